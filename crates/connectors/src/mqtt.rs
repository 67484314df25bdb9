//! MQTT subscriber (rumqttc): subscribes to the configured topic filters and maps JSON payloads
//! to points.
//!
//! Payloads (field names configurable, defaults shown):
//! - `{"asset_id": "Pump_01", "tag_name": "Flow", "value": 12.5, "timestamp": "...", "quality": "good"}`
//! - `{"asset_id": "Pump_01", "timestamp": "...", "values": {"Flow": 12.5, "Pressure": 3.1}}`
//! - an array of either;
//! - a bare number (or `{"value": ...}`) when the tag comes from a topic level.
//!
//! The asset may come from the payload, from a topic level (`asset_id_topic_level`), or be fixed
//! (`asset_id`); the tag from the payload or a topic level (`tag_name_topic_level`). Timestamps
//! are RFC 3339 text or Unix epoch numbers (milliseconds from 1e11 up, seconds below); without
//! one the time of arrival is used. Booleans are stored as 1 and 0.
//!
//! The session is persistent (clean session off, a stable client id), so that with QoS 1 or 2
//! the broker keeps messages published while the connector was away and delivers them on
//! reconnect.

use plantd_model::Timestamp;
use plantd_model::data_source::{
    BrowseEntry, BrowseError, MqttConfig, check_topic_filter, parse_url,
};
use plantd_model::telemetry::Quality;
use rumqttc::{
    AsyncClient, ConnectReturnCode, ConnectionError, Event, MqttOptions, Packet, QoS,
    TlsConfiguration, Transport,
};
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;

use std::time::Duration;

use crate::net::{describe_io_error, host_port};
use crate::sink::Sink;

/// Distinct asset/tag pairs counted as `tag_count` at most.
const MAX_COUNTED_TAGS: usize = 100_000;

pub use crate::sink::Mapped;

struct Fields<'a> {
    asset: &'a str,
    tag: &'a str,
    value: &'a str,
    timestamp: &'a str,
}

fn fields(c: &MqttConfig) -> Fields<'_> {
    Fields {
        asset: c.asset_id_field.as_deref().unwrap_or("asset_id"),
        tag: c.tag_name_field.as_deref().unwrap_or("tag_name"),
        value: c.value_field.as_deref().unwrap_or("value"),
        timestamp: c.timestamp_field.as_deref().unwrap_or("timestamp"),
    }
}

/// Maps one message to values, or says why it cannot.
pub fn map_payload(
    c: &MqttConfig,
    topic: &str,
    payload: &[u8],
    now: Timestamp,
) -> Result<Vec<Mapped>, String> {
    let f = fields(c);
    let levels: Vec<&str> = topic.split('/').collect();
    let level = |n: Option<usize>| n.and_then(|n| levels.get(n).copied());
    let topic_asset = level(c.asset_id_topic_level).or(c.asset_id.as_deref());
    let topic_tag = level(c.tag_name_topic_level);
    let text = std::str::from_utf8(payload).map_err(|_| "payload is not UTF-8 text".to_string())?;
    let json: Value = serde_json::from_str(text.trim())
        .map_err(|e| format!("payload is not JSON ({e}); expected e.g. {{\"asset_id\": ..., \"tag_name\": ..., \"value\": ...}}"))?;
    let mut out = Vec::new();
    match &json {
        Value::Array(items) => {
            for item in items {
                map_object(&f, item, topic_asset, topic_tag, now, &mut out)?;
            }
        }
        other => map_object(&f, other, topic_asset, topic_tag, now, &mut out)?,
    }
    Ok(out)
}

fn map_object(
    f: &Fields,
    item: &Value,
    topic_asset: Option<&str>,
    topic_tag: Option<&str>,
    now: Timestamp,
    out: &mut Vec<Mapped>,
) -> Result<(), String> {
    let obj = match item {
        Value::Object(obj) => obj,
        // A bare value: asset and tag from the topic.
        bare => {
            let (Some(asset), Some(tag)) = (topic_asset, topic_tag) else {
                return Err("a bare value needs asset_id and tag_name from topic levels (asset_id_topic_level, tag_name_topic_level)".into());
            };
            out.push(Mapped {
                asset_id: asset.to_string(),
                tag_name: tag.to_string(),
                value: number(bare).ok_or("the value is not a number or boolean")?,
                timestamp: now,
                quality: Quality::Good,
            });
            return Ok(());
        }
    };
    let asset = match obj.get(f.asset) {
        Some(Value::String(s)) => s.as_str(),
        _ => topic_asset.ok_or_else(|| {
            format!(
                "no asset: the payload has no '{}' field and no asset_id_topic_level or asset_id is configured",
                f.asset
            )
        })?,
    };
    let timestamp = match obj.get(f.timestamp) {
        None | Some(Value::Null) => now,
        Some(Value::String(s)) => {
            Timestamp::parse(s).map_err(|e| format!("field '{}' {e}", f.timestamp))?
        }
        Some(Value::Number(n)) => {
            let n = n.as_f64().unwrap_or(f64::NAN);
            if !n.is_finite() {
                return Err(format!("field '{}' is not a valid time", f.timestamp));
            }
            Timestamp::from_millis(if n.abs() >= 1e11 { n } else { n * 1000.0 } as i64)
        }
        Some(_) => {
            return Err(format!(
                "field '{}' must be RFC 3339 text or Unix epoch seconds/milliseconds",
                f.timestamp
            ));
        }
    };
    let quality = match obj.get("quality").and_then(Value::as_str) {
        Some("uncertain") => Quality::Uncertain,
        Some("bad") => Quality::Bad,
        _ => Quality::Good,
    };
    let tag = match obj.get(f.tag) {
        Some(Value::String(s)) => Some(s.as_str()),
        _ => topic_tag,
    };
    if let (Some(tag), Some(v)) = (tag, obj.get(f.value)) {
        out.push(Mapped {
            asset_id: asset.to_string(),
            tag_name: tag.to_string(),
            value: number(v)
                .ok_or_else(|| format!("field '{}' is not a number or boolean", f.value))?,
            timestamp,
            quality,
        });
        return Ok(());
    }
    if let Some(Value::Object(values)) = obj.get("values") {
        for (tag, v) in values {
            out.push(Mapped {
                asset_id: asset.to_string(),
                tag_name: tag.clone(),
                value: number(v).ok_or_else(|| format!("values.{tag} is not a number"))?,
                timestamp,
                quality,
            });
        }
        return Ok(());
    }
    Err(format!(
        "the payload names no value: expected '{}' and '{}' fields, a 'values' object, or tag_name_topic_level",
        f.tag, f.value
    ))
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64().filter(|x| x.is_finite()),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|x| x.is_finite()),
        _ => None,
    }
}

/// MQTT topic matching (`+` one level, `#` the rest).
pub fn topic_matches(filter: &str, topic: &str) -> bool {
    let mut f = filter.split('/');
    let mut t = topic.split('/');
    loop {
        match (f.next(), t.next()) {
            (Some("#"), _) => return true,
            (Some("+"), Some(_)) => {}
            (Some(a), Some(b)) if a == b => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

fn qos(n: u8) -> QoS {
    match n {
        0 => QoS::AtMostOnce,
        2 => QoS::ExactlyOnce,
        _ => QoS::AtLeastOnce,
    }
}

fn options(c: &MqttConfig, client_id: &str) -> Result<(MqttOptions, String), String> {
    let url = parse_url(&c.broker_url).map_err(|e| format!("broker_url {e}"))?;
    let tls = matches!(url.scheme.as_str(), "mqtts" | "ssl");
    let port = url.port.unwrap_or(if tls { 8883 } else { 1883 });
    let mut o = MqttOptions::new(client_id, url.host.clone(), port);
    o.set_keep_alive(Duration::from_secs(30));
    o.set_clean_session(false);
    o.set_max_packet_size(16 * 1024 * 1024, 1024 * 1024);
    if let Some(user) = &c.username {
        o.set_credentials(user.clone(), c.password.clone().unwrap_or_default());
    }
    if tls {
        o.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(
            Arc::new(tls_config(c)?),
        )));
    }
    Ok((o, host_port(&url.host, port)))
}

/// Trusts the system's certificate authorities plus `ca_file` (PEM), if given.
fn tls_config(c: &MqttConfig) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    if let Some(path) = &c.ca_file {
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("cannot read ca_file {path}: {e}"))?;
        for cert in certs {
            let cert = cert.map_err(|e| format!("ca_file {path} is not PEM: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("ca_file {path} holds an unusable certificate: {e}"))?;
        }
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
}

/// The client id: configured, or derived from the data source id (stable, so that the broker
/// keeps the session).
fn client_id(c: &MqttConfig, source_id: &str) -> String {
    c.client_id.clone().unwrap_or_else(|| {
        let tail: String = source_id
            .chars()
            .filter(|ch| ch.is_ascii_alphanumeric())
            .collect();
        let tail = &tail[tail.len().saturating_sub(16)..];
        format!("plantd-{tail}")
    })
}

pub fn describe(e: &ConnectionError, addr: &str) -> String {
    match e {
        ConnectionError::Io(io) => describe_io_error(io, addr),
        ConnectionError::ConnectionRefused(code) => format!(
            "the broker at {addr} refused the connection: {}",
            match code {
                ConnectReturnCode::BadUserNamePassword => "bad user name or password",
                ConnectReturnCode::NotAuthorized => "not authorized",
                ConnectReturnCode::BadClientId => "client id rejected",
                ConnectReturnCode::ServiceUnavailable => "service unavailable",
                ConnectReturnCode::RefusedProtocolVersion => "MQTT 3.1.1 not supported",
                ConnectReturnCode::Success => "no reason given",
            }
        ),
        ConnectionError::Tls(t) => {
            let text = t.to_string();
            if text.contains("certificate") || text.contains("Certificate") {
                format!("bad certificate: the TLS handshake with {addr} failed ({text})")
            } else {
                format!("TLS with {addr} failed: {text}")
            }
        }
        ConnectionError::NetworkTimeout => format!("no answer from {addr} (timed out)"),
        other => format!("MQTT connection to {addr} failed: {other}"),
    }
}

/// One connection: subscribe on every CONNACK and map messages until the connection fails.
pub async fn session(c: &MqttConfig, sink: &Sink) -> Result<(), String> {
    let (opts, addr) = options(c, &client_id(c, sink.source_id()))?;
    let (client, mut events) = AsyncClient::new(opts, 64);
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut last_problem_at: Option<std::time::Instant> = None;
    // Sparkplug B: what each node's births said, and when a rebirth was last asked of it.
    let mut sparkplug = crate::sparkplug::Decoder::default();
    let mut rebirths: std::collections::HashMap<(String, String), std::time::Instant> =
        std::collections::HashMap::new();
    loop {
        let event = events.poll().await.map_err(|e| describe(&e, &addr))?;
        match event {
            Event::Incoming(Packet::ConnAck(ack)) => {
                if ack.code != ConnectReturnCode::Success {
                    return Err(describe(
                        &ConnectionError::ConnectionRefused(ack.code),
                        &addr,
                    ));
                }
                for topic in &c.topics {
                    client
                        .try_subscribe(topic.clone(), qos(c.qos))
                        .map_err(|e| format!("cannot subscribe to {topic}: {e}"))?;
                }
                sink.connected(seen.len());
            }
            Event::Incoming(Packet::SubAck(ack))
                if ack
                    .return_codes
                    .iter()
                    .any(|r| matches!(r, rumqttc::SubscribeReasonCode::Failure)) =>
            {
                sink.problem(Some(format!(
                    "the broker refused a subscription among {}",
                    c.topics.join(", ")
                )));
            }
            Event::Incoming(Packet::Publish(p)) => {
                // A persistent session may still carry subscriptions of an earlier config.
                if !c.topics.iter().any(|f| topic_matches(f, &p.topic)) {
                    continue;
                }
                let mapped = if c.is_sparkplug() {
                    sparkplug
                        .decode(&p.topic, &p.payload, Timestamp::now())
                        .map(|d| {
                            if let Some((group, node, why)) = d.rebirth {
                                let asked = rebirths.entry((group.clone(), node.clone())).or_insert_with(|| {
                                    std::time::Instant::now() - Duration::from_secs(60)
                                });
                                // At most one request per node every 5 s: a node answers with its births.
                                if asked.elapsed() >= Duration::from_secs(5) {
                                    *asked = std::time::Instant::now();
                                    let (topic, body) = crate::sparkplug::rebirth_request(&group, &node, Timestamp::now());
                                    tracing::info!(%group, %node, reason = %why, "asking a Sparkplug node to publish its births again");
                                    if let Err(e) = client.try_publish(topic, QoS::AtLeastOnce, false, body) {
                                        tracing::warn!(error = %e, "could not ask for a Sparkplug rebirth");
                                    }
                                }
                            }
                            d.points
                        })
                } else {
                    map_payload(c, &p.topic, &p.payload, Timestamp::now())
                };
                match mapped {
                    Ok(values) => {
                        for m in &values {
                            if seen.len() < MAX_COUNTED_TAGS {
                                seen.insert((m.asset_id.clone(), m.tag_name.clone()));
                            }
                        }
                        sink.set_tag_count(seen.len());
                        sink.push(values.into_iter().map(|m| {
                            sink.point(&m.asset_id, &m.tag_name, m.value, m.timestamp, m.quality)
                        }));
                    }
                    Err(e) => {
                        // Told once per 10 s at most, so a chatty bad publisher is not a storm of
                        // state writes.
                        if last_problem_at.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                            last_problem_at = Some(std::time::Instant::now());
                            sink.problem(Some(format!("message on {}: {e}", p.topic)));
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// Connects and waits for the broker's CONNACK.
pub async fn probe(c: &MqttConfig) -> Result<String, String> {
    let (mut opts, addr) = options(c, &format!("plantd-test-{}", std::process::id()))?;
    opts.set_clean_session(true);
    let (client, mut events) = AsyncClient::new(opts, 4);
    let outcome = tokio::time::timeout(crate::net::PROBE_TIMEOUT, async {
        loop {
            match events.poll().await {
                Ok(Event::Incoming(Packet::ConnAck(ack))) => {
                    return if ack.code == ConnectReturnCode::Success {
                        Ok(format!(
                            "connected to the MQTT broker at {addr} (CONNACK accepted)"
                        ))
                    } else {
                        Err(describe(
                            &ConnectionError::ConnectionRefused(ack.code),
                            &addr,
                        ))
                    };
                }
                Ok(_) => {}
                Err(e) => return Err(describe(&e, &addr)),
            }
        }
    })
    .await
    .unwrap_or_else(|_| Err(crate::net::timed_out(&addr)));
    let _ = client.try_disconnect();
    outcome
}

/// Topics one browse reports at most.
const MAX_BROWSED_TOPICS: usize = 1_000;
/// Characters of a payload shown as its sample.
const SAMPLE_CHARS: usize = 256;

/// Listens to `filter` on the broker for `window` (from its SUBACK; retained messages arrive
/// at once): each topic seen, with its latest payload, when it came and how many came.
pub async fn listen(
    c: &MqttConfig,
    filter: &str,
    window: Duration,
) -> Result<Vec<BrowseEntry>, BrowseError> {
    check_topic_filter(filter).map_err(|e| BrowseError::BadNode(format!("'{filter}' {e}")))?;
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let (mut opts, addr) = options(
        c,
        &format!("plantd-browse-{}-{nonce:08x}", std::process::id()),
    )
    .map_err(BrowseError::Device)?;
    opts.set_clean_session(true);
    let (client, mut events) = AsyncClient::new(opts, 16);
    let mut seen: std::collections::BTreeMap<String, (Vec<u8>, Timestamp, u64)> =
        std::collections::BTreeMap::new();
    let outcome = async {
        // Connected and subscribed, within the probe's time.
        tokio::time::timeout(crate::net::PROBE_TIMEOUT, async {
            loop {
                match events.poll().await.map_err(|e| describe(&e, &addr))? {
                    Event::Incoming(Packet::ConnAck(ack)) => {
                        if ack.code != ConnectReturnCode::Success {
                            return Err(describe(
                                &ConnectionError::ConnectionRefused(ack.code),
                                &addr,
                            ));
                        }
                        client
                            .try_subscribe(filter, QoS::AtMostOnce)
                            .map_err(|e| format!("cannot subscribe to {filter}: {e}"))?;
                    }
                    Event::Incoming(Packet::SubAck(ack)) => {
                        if ack
                            .return_codes
                            .iter()
                            .any(|r| matches!(r, rumqttc::SubscribeReasonCode::Failure))
                        {
                            return Err(format!("the broker refused a subscription to {filter}"));
                        }
                        return Ok(());
                    }
                    _ => {}
                }
            }
        })
        .await
        .unwrap_or_else(|_| Err(crate::net::timed_out(&addr)))?;
        let until = tokio::time::Instant::now() + window;
        loop {
            let event = match tokio::time::timeout_at(until, events.poll()).await {
                Err(_) => return Ok(()),
                Ok(e) => e.map_err(|e| describe(&e, &addr))?,
            };
            if let Event::Incoming(Packet::Publish(p)) = event {
                let now = Timestamp::now();
                let room = seen.len() < MAX_BROWSED_TOPICS;
                match seen.get_mut(&p.topic) {
                    Some(entry) => *entry = (p.payload.to_vec(), now, entry.2 + 1),
                    None if room => {
                        seen.insert(p.topic, (p.payload.to_vec(), now, 1));
                    }
                    None => {}
                }
            }
        }
    }
    .await;
    let _ = client.try_disconnect();
    outcome.map_err(BrowseError::Device)?;
    Ok(seen
        .into_iter()
        .map(|(topic, (payload, at, count))| {
            let last = topic.rsplit('/').next().unwrap_or_default().to_string();
            let mut e = BrowseEntry::new(topic.clone(), last, topic, "Topic");
            let (kind, sample) = match std::str::from_utf8(&payload) {
                Ok(text) => (
                    if serde_json::from_str::<Value>(text).is_ok() {
                        "json"
                    } else {
                        "text"
                    },
                    text.chars().take(SAMPLE_CHARS).collect(),
                ),
                Err(_) => ("binary", format!("{} bytes of binary data", payload.len())),
            };
            e.data_type = Some(kind.into());
            e.sample = Some(sample);
            e.seen_at = Some(at);
            e.messages = Some(count);
            e
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: Value) -> MqttConfig {
        let mut base = serde_json::json!({"broker_url": "mqtt://localhost", "topics": ["#"]});
        if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
            b.extend(e);
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn payload_shapes() {
        let now = Timestamp::from_millis(1_700_000_000_000);
        let c = config(serde_json::json!({}));
        let one = map_payload(
            &c,
            "x",
            br#"{"asset_id":"P1","tag_name":"Flow","value":12.5,"timestamp":"2026-01-01T00:00:00Z"}"#,
            now,
        )
        .unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].value, 12.5);
        assert_eq!(
            one[0].timestamp,
            Timestamp::parse("2026-01-01T00:00:00Z").unwrap()
        );
        let many = map_payload(
            &c,
            "x",
            br#"[{"asset_id":"P1","values":{"Flow":1,"Run":true},"timestamp":1700000000}]"#,
            now,
        )
        .unwrap();
        assert_eq!(many.len(), 2);
        assert_eq!(many[0].timestamp.millis(), 1_700_000_000_000);
        assert!(many.iter().any(|m| m.tag_name == "Run" && m.value == 1.0));
        let topics =
            config(serde_json::json!({"asset_id_topic_level": 1, "tag_name_topic_level": 2}));
        let bare = map_payload(&topics, "plant/P2/Temp", b"41.5", now).unwrap();
        assert_eq!(
            bare,
            vec![Mapped {
                asset_id: "P2".into(),
                tag_name: "Temp".into(),
                value: 41.5,
                timestamp: now,
                quality: Quality::Good
            }]
        );
        assert!(
            map_payload(&c, "x", b"not json", now)
                .unwrap_err()
                .contains("not JSON")
        );
        assert!(
            map_payload(&c, "x", br#"{"tag_name":"a","value":1}"#, now)
                .unwrap_err()
                .contains("no asset")
        );
        assert!(
            map_payload(
                &c,
                "x",
                br#"{"asset_id":"a","tag_name":"b","value":"x"}"#,
                now
            )
            .unwrap_err()
            .contains("not a number")
        );
    }

    #[test]
    fn topic_filters() {
        assert!(topic_matches("plant/+/telemetry", "plant/p1/telemetry"));
        assert!(topic_matches("plant/#", "plant/p1/x/y"));
        assert!(!topic_matches("plant/+", "plant/p1/x"));
        assert!(!topic_matches("a/b", "a/c"));
    }
}
