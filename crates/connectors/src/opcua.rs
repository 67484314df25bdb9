//! OPC UA client (async-opcua): opens a session with the configured security, finds the
//! variables (an explicit node list, or by browsing from `root_node`, default the Objects
//! folder), and subscribes to them: every data change the server publishes becomes a point.
//!
//! Browsing follows hierarchical references between objects (not properties, and not the
//! server's own `Server` object); a numeric or boolean variable under an object becomes asset =
//! the object's browse name, tag = the variable's browse name. Quality follows the status code
//! (good, uncertain, bad); a bad value without a value is not stored. Timestamps are the
//! source timestamp, else the server timestamp, else the time of arrival.
//!
//! The library's own reconnect is off: a lost session ends [`session`], and the connector's
//! backoff ([`crate::run`]) opens a new one, browsing again (the server's variables may have
//! changed meanwhile).

use ::opcua::client::browser::BrowseResultItem;
use ::opcua::client::transport::TcpConnector;
use ::opcua::client::{
    Client, ClientBuilder, DataChangeCallback, DefaultRetryPolicy, ExponentialBackoff,
    IdentityToken, MonitoredItem, Session, SessionEventLoop, SessionPollResult,
};
use ::opcua::crypto::SecurityPolicy;
use ::opcua::types::{
    AttributeId, BrowseDescription, BrowseDirection, BrowseResultMask, DataValue,
    MessageSecurityMode, MonitoredItemCreateRequest, MonitoringMode, MonitoringParameters,
    NodeClass, NodeClassMask, NodeId, ObjectId, ReadValueId, ReferenceTypeId, StatusCode,
    TimestampsToReturn, UserTokenType, VariableId, Variant,
};
use futures_util::StreamExt;
use plantd_model::Timestamp;
use plantd_model::data_source::{OpcuaConfig, parse_url};
use plantd_model::telemetry::{Quality, check_name};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

use crate::net::{dial, host_port};
use crate::sink::Sink;

/// Each step of connecting (dial, endpoints, session) may take this long.
pub(crate) const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Monitored items created per request.
const ITEMS_PER_REQUEST: usize = 1000;
/// Variables one source subscribes to at most.
pub const MAX_TAGS: usize = plantd_model::data_source::MAX_MAPPED_TAGS;

/// Client creation may write the client's key pair; one at a time.
static CLIENT_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn client(pki_dir: &Path) -> Result<Client, String> {
    let _guard = CLIENT_LOCK.lock().await;
    let dir = pki_dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        ClientBuilder::new()
            .application_name("plantd connector")
            .application_uri("urn:plantd:connector")
            .product_uri("urn:plantd:connector")
            .pki_dir(dir)
            // Created once per directory; without one the library logs errors on every
            // connection, secured or not.
            .create_sample_keypair(true)
            .trust_server_certs(true)
            .verify_server_certs(false)
            .session_retry_limit(0)
            .request_timeout(Duration::from_secs(15))
            .keep_alive_interval(Duration::from_secs(5))
            .max_failed_keep_alive_count(3)
            .session_timeout(30_000)
            // A publish response may carry tens of thousands of notifications.
            .max_array_length(1_000_000)
            .max_message_size(0)
            .max_chunk_count(0)
            .max_string_length(1 << 20)
            .max_byte_string_length(1 << 24)
            .client()
            .map_err(|e| format!("cannot set up the OPC UA client: {}", e.join(", ")))
    })
    .await
    .map_err(|e| format!("cannot set up the OPC UA client: {e}"))?
}

/// An open session and the task driving it. Dropping it closes the session in the background.
pub(crate) struct Connected {
    pub(crate) session: Arc<Session>,
    driver: Option<tokio::task::JoinHandle<()>>,
    lost: oneshot::Receiver<StatusCode>,
    /// `mode/policy` of the session.
    security: String,
}

impl Drop for Connected {
    fn drop(&mut self) {
        let session = self.session.clone();
        let driver = self.driver.take();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                session.disable_reconnects();
                let _ = tokio::time::timeout(Duration::from_secs(5), session.disconnect()).await;
                if let Some(d) = driver {
                    d.abort();
                }
            });
        }
    }
}

/// Dials, picks the endpoint matching the configured security, and opens a session.
pub(crate) async fn connect(c: &OpcuaConfig, pki_dir: &Path) -> Result<Connected, String> {
    let url = parse_url(&c.endpoint).map_err(|e| format!("endpoint {e}"))?;
    let addr = host_port(&url.host, url.port.unwrap_or(4840));
    let policy = SecurityPolicy::from_str(&c.security_policy).unwrap_or(SecurityPolicy::Unknown);
    let mode = MessageSecurityMode::from(c.security_mode.as_str());
    let mut client = client(pki_dir).await?;
    let endpoints = tokio::time::timeout(
        STEP_TIMEOUT,
        client.get_server_endpoints_from_url(c.endpoint.as_str()),
    )
    .await;
    // The library's own messages for the network are vague; the network's are not: after a
    // failure (only then, so a server never sees a connection closed before it spoke), dial to
    // say what failed.
    let dial_failure = || dial(&url.host, url.port.unwrap_or(4840), STEP_TIMEOUT);
    let endpoints = match endpoints {
        Ok(Ok(endpoints)) => endpoints,
        Ok(Err(e)) => {
            dial_failure().await?;
            return Err(format!(
                "cannot read the endpoints of {}: {}",
                c.endpoint,
                describe(e.status())
            ));
        }
        Err(_) => {
            dial_failure().await?;
            return Err(format!(
                "{addr} accepted the connection but sent no OPC UA endpoints within {} s (is it an OPC UA server?)",
                STEP_TIMEOUT.as_secs()
            ));
        }
    };
    let Some(endpoint) = Client::find_matching_endpoint(&endpoints, &c.endpoint, policy, mode)
    else {
        let offered: Vec<String> = endpoints
            .iter()
            .map(|e| {
                format!(
                    "{}/{}",
                    e.security_mode,
                    SecurityPolicy::from_uri(e.security_policy_uri.as_ref())
                )
            })
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        return Err(format!(
            "wrong security settings: the server offers no {}/{} endpoint; it offers {}",
            c.security_mode,
            c.security_policy,
            offered.join(", ")
        ));
    };
    let identity = match &c.username {
        Some(user) => {
            if endpoint.find_policy(UserTokenType::UserName).is_none() {
                return Err(
                    "the server accepts no user name and password on this endpoint (remove username, or use its other identities)"
                        .into(),
                );
            }
            IdentityToken::new_user_name(user.clone(), c.password.clone().unwrap_or_default())
        }
        None => IdentityToken::Anonymous,
    };
    let (session, event_loop) = client
        .connect_to_endpoint_directly(endpoint, identity)
        .map_err(|e| describe(e.status()))?;
    let (up_tx, up_rx) = oneshot::channel();
    let (lost_tx, lost_rx) = oneshot::channel();
    let driver = tokio::spawn(drive(event_loop, up_tx, lost_tx));
    let mut connected = Connected {
        session,
        driver: Some(driver),
        lost: lost_rx,
        security: format!("{}/{}", c.security_mode, c.security_policy),
    };
    match tokio::time::timeout(STEP_TIMEOUT, up_rx).await {
        Ok(Ok(Ok(()))) => Ok(connected),
        Ok(Ok(Err(code))) => {
            if let Some(d) = connected.driver.take() {
                d.abort();
            }
            Err(describe(code))
        }
        _ => {
            if let Some(d) = connected.driver.take() {
                d.abort();
            }
            Err(format!(
                "no OPC UA session with {addr} within {} s",
                STEP_TIMEOUT.as_secs()
            ))
        }
    }
}

/// Polls the session's event loop: tells when the session is up, and when it is lost (then
/// stops polling, so that the library does not reconnect on its own).
async fn drive(
    event_loop: SessionEventLoop<TcpConnector>,
    up: oneshot::Sender<Result<(), StatusCode>>,
    lost: oneshot::Sender<StatusCode>,
) {
    let mut events = std::pin::pin!(event_loop.enter());
    let mut up = Some(up);
    while let Some(event) = events.next().await {
        match event {
            Ok(SessionPollResult::Reconnected(_)) => {
                if let Some(tx) = up.take() {
                    let _ = tx.send(Ok(()));
                }
            }
            Ok(SessionPollResult::ConnectionLost(code)) => {
                let _ = lost.send(code);
                return;
            }
            Ok(_) => {}
            Err(code) => {
                match up.take() {
                    Some(tx) => {
                        let _ = tx.send(Err(code));
                    }
                    None => {
                        let _ = lost.send(code);
                    }
                }
                return;
            }
        }
    }
}

/// Words for a status code that ended or refused a session.
pub fn describe(code: StatusCode) -> String {
    let name = code.to_string();
    let detail = || format!("{name} ({})", code.sub_code().description());
    if code.is_good() {
        return "the server stopped answering (keep-alive failed)".into();
    }
    if name.contains("Certificate") || name == "BadSecurityChecksFailed" {
        return format!("bad certificate: {}", detail());
    }
    if name == "BadSecurityPolicyRejected" || name == "BadSecurityModeRejected" {
        return format!("wrong security settings: {}", detail());
    }
    if name.contains("IdentityToken") || name.contains("User") {
        return format!(
            "the server rejected the user identity (wrong username or password?): {}",
            detail()
        );
    }
    match name.as_str() {
        "BadTooManySessions" => format!("the server has no free session: {}", detail()),
        "BadServerHalted" | "BadShutdown" => format!("the server shut down: {}", detail()),
        "BadTimeout" => format!("the server did not answer in time: {}", detail()),
        "BadCommunicationError" | "BadConnectionClosed" | "BadNotConnected" => {
            format!("connection lost: {}", detail())
        }
        "BadTcpEndpointUrlInvalid" => format!("endpoint URL not usable: {}", detail()),
        _ => detail(),
    }
}

/// A variable to subscribe to.
#[derive(Clone, Debug)]
struct Tag {
    node: NodeId,
    asset_id: String,
    tag_name: String,
}

/// Data types stored as numbers: Boolean, SByte..Double, Number, Integer, UInteger, Duration.
pub(crate) fn numeric_type(dt: &NodeId) -> bool {
    dt.namespace == 0
        && matches!(&dt.identifier, ::opcua::types::Identifier::Numeric(n) if matches!(n, 1..=11 | 26..=28 | 290))
}

fn browse_description(node_id: NodeId) -> BrowseDescription {
    BrowseDescription {
        node_id,
        browse_direction: BrowseDirection::Forward,
        reference_type_id: ReferenceTypeId::HierarchicalReferences.into(),
        include_subtypes: true,
        node_class_mask: (NodeClassMask::OBJECT | NodeClassMask::VARIABLE).bits(),
        result_mask: BrowseResultMask::All as u32,
    }
}

/// Variables found by browsing from `root`, with their parent object's browse name, plus the
/// number of variables skipped for their names.
async fn browse(session: &Session, root: NodeId) -> Result<(Vec<Tag>, usize), String> {
    let server_object: NodeId = ObjectId::Server.into();
    // The root's own name, for variables directly under it.
    let root_name = session
        .read(
            &[ReadValueId::new(root.clone(), AttributeId::BrowseName)],
            TimestampsToReturn::Neither,
            0.0,
        )
        .await
        .map_err(|e| format!("cannot read root node {root}: {}", describe(e.status())))?
        .into_iter()
        .next()
        .and_then(|dv| match dv.value {
            Some(Variant::QualifiedName(q)) => Some(q.name.to_string()),
            _ => None,
        })
        .ok_or_else(|| format!("root node {root} does not exist on the server"))?;
    let mut names: HashMap<NodeId, String> = HashMap::from([(root.clone(), root_name)]);
    let mut visited: HashSet<NodeId> = HashSet::from([root.clone()]);
    let mut candidates: Vec<Tag> = Vec::new();
    let mut seen_vars: HashSet<NodeId> = HashSet::new();
    let mut skipped = 0usize;
    let follow = {
        let server_object = server_object.clone();
        move |item: &BrowseResultItem| -> Vec<BrowseDescription> {
            item.references()
                .iter()
                .filter(|r| {
                    r.reference_type_id != ReferenceTypeId::HasProperty
                        && r.node_id.server_index == 0
                        && r.node_class == NodeClass::Object
                        && r.node_id.node_id != server_object
                })
                .map(|r| browse_description(r.node_id.node_id.clone()))
                .collect()
        }
    };
    let no_retry = DefaultRetryPolicy::new(ExponentialBackoff::new(
        Duration::from_secs(1),
        Some(0),
        Duration::from_millis(100),
    ));
    let stream = session
        .browser()
        .handler(follow)
        .retry_policy(no_retry)
        .max_nodes_per_request(500)
        .max_references_per_node(1000)
        .max_concurrent_requests(2)
        .run(vec![browse_description(root)]);
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        let item = item.map_err(|e| format!("browsing failed: {}", describe(e.status())))?;
        if item.status().is_bad() {
            continue;
        }
        let parent = item.parent_id().clone();
        for r in item.references().iter() {
            if r.reference_type_id == ReferenceTypeId::HasProperty || r.node_id.server_index != 0 {
                continue;
            }
            let node = r.node_id.node_id.clone();
            match r.node_class {
                NodeClass::Object if visited.insert(node.clone()) => {
                    names.insert(node, r.browse_name.name.to_string());
                }
                NodeClass::Variable => {
                    let Some(asset) = names.get(&parent) else {
                        continue;
                    };
                    if !seen_vars.insert(node.clone()) {
                        continue;
                    }
                    let tag = r.browse_name.name.to_string();
                    if check_name(asset).is_err() || check_name(&tag).is_err() {
                        skipped += 1;
                        continue;
                    }
                    candidates.push(Tag {
                        node,
                        asset_id: asset.clone(),
                        tag_name: tag,
                    });
                }
                _ => {}
            }
        }
        if candidates.len() > MAX_TAGS * 2 {
            break;
        }
    }
    // Only numbers and booleans are telemetry.
    let mut tags = Vec::with_capacity(candidates.len());
    for chunk in candidates.chunks(1000) {
        let request: Vec<ReadValueId> = chunk
            .iter()
            .map(|t| ReadValueId::new(t.node.clone(), AttributeId::DataType))
            .collect();
        let types = session
            .read(&request, TimestampsToReturn::Neither, 0.0)
            .await
            .map_err(|e| format!("cannot read variable data types: {}", describe(e.status())))?;
        for (t, dv) in chunk.iter().zip(types) {
            if let Some(Variant::NodeId(dt)) = &dv.value
                && numeric_type(dt)
            {
                tags.push(t.clone());
            }
        }
    }
    tags.truncate(MAX_TAGS);
    Ok((tags, skipped))
}

/// Tags of the explicit node list.
fn listed(c: &OpcuaConfig) -> Result<Vec<Tag>, String> {
    c.nodes
        .iter()
        .map(|n| {
            Ok(Tag {
                node: NodeId::from_str(&n.node_id)
                    .map_err(|_| format!("node id '{}' cannot be parsed", n.node_id))?,
                asset_id: n.asset_id.clone(),
                tag_name: n.tag_name.clone(),
            })
        })
        .collect()
}

fn value_of(v: &Variant) -> Option<f64> {
    Some(match v {
        Variant::Boolean(b) => f64::from(u8::from(*b)),
        Variant::SByte(x) => f64::from(*x),
        Variant::Byte(x) => f64::from(*x),
        Variant::Int16(x) => f64::from(*x),
        Variant::UInt16(x) => f64::from(*x),
        Variant::Int32(x) => f64::from(*x),
        Variant::UInt32(x) => f64::from(*x),
        Variant::Int64(x) => *x as f64,
        Variant::UInt64(x) => *x as f64,
        Variant::Float(x) => f64::from(*x),
        Variant::Double(x) => *x,
        _ => return None,
    })
    .filter(|x| x.is_finite())
}

fn quality_of(dv: &DataValue) -> Quality {
    let status = dv.status();
    if status.is_good() {
        Quality::Good
    } else if status.is_uncertain() {
        Quality::Uncertain
    } else {
        Quality::Bad
    }
}

fn timestamp_of(dv: &DataValue) -> Timestamp {
    dv.source_timestamp
        .as_ref()
        .or(dv.server_timestamp.as_ref())
        .map(|t| Timestamp::from_millis(t.as_chrono().timestamp_millis()))
        .filter(|t| t.millis() > 0)
        .unwrap_or_else(Timestamp::now)
}

/// One session: connect, find the variables, subscribe, and stream until the session is lost.
pub async fn session(c: &OpcuaConfig, pki_dir: &Path, sink: &Sink) -> Result<(), String> {
    let mut conn = connect(c, pki_dir).await?;
    let session = conn.session.clone();
    let (tags, skipped) = if c.nodes.is_empty() {
        let root = match &c.root_node {
            Some(text) => NodeId::from_str(text)
                .map_err(|_| format!("root_node '{text}' cannot be parsed"))?,
            None => ObjectId::ObjectsFolder.into(),
        };
        browse(&session, root).await?
    } else {
        (listed(c)?, 0)
    };
    let tags = Arc::new(tags);
    let callback_tags = tags.clone();
    let callback_sink = sink.clone();
    let subscription = session
        .create_subscription(
            Duration::from_millis(c.publishing_interval_ms),
            60,
            10,
            50_000,
            0,
            true,
            DataChangeCallback::new(move |dv: DataValue, item: &MonitoredItem| {
                let Some(tag) = callback_tags.get((item.client_handle() as usize).wrapping_sub(1))
                else {
                    return;
                };
                // A bad status without a value has nothing to store.
                let Some(value) = dv.value.as_ref().and_then(value_of) else {
                    return;
                };
                callback_sink.push([callback_sink.point(
                    &tag.asset_id,
                    &tag.tag_name,
                    value,
                    timestamp_of(&dv),
                    quality_of(&dv),
                )]);
            }),
        )
        .await
        .map_err(|e| format!("cannot create a subscription: {}", describe(e.status())))?;
    // Queue enough samples to keep every one taken between two publishes.
    let queue_size =
        (c.publishing_interval_ms / c.sampling_interval_ms.max(1)).clamp(1, 100) as u32 + 1;
    let mut refused: Vec<String> = Vec::new();
    let mut subscribed = 0usize;
    for (n, chunk) in tags.chunks(ITEMS_PER_REQUEST).enumerate() {
        let items: Vec<MonitoredItemCreateRequest> = chunk
            .iter()
            .enumerate()
            .map(|(i, t)| MonitoredItemCreateRequest {
                item_to_monitor: ReadValueId::from(&t.node),
                monitoring_mode: MonitoringMode::Reporting,
                requested_parameters: MonitoringParameters {
                    client_handle: (n * ITEMS_PER_REQUEST + i + 1) as u32,
                    sampling_interval: c.sampling_interval_ms as f64,
                    queue_size,
                    discard_oldest: true,
                    ..Default::default()
                },
            })
            .collect();
        let created = session
            .create_monitored_items(subscription, TimestampsToReturn::Both, items)
            .await
            .map_err(|e| format!("cannot create monitored items: {}", describe(e.status())))?;
        for (t, r) in chunk.iter().zip(created) {
            if r.result.status_code.is_good() {
                subscribed += 1;
            } else {
                refused.push(format!(
                    "{}/{} ({}): {}",
                    t.asset_id, t.tag_name, t.node, r.result.status_code
                ));
            }
        }
    }
    tracing::info!(
        source = sink.source_id(),
        subscribed,
        refused = refused.len(),
        security = %conn.security,
        "OPC UA connector subscribed"
    );
    sink.connected(subscribed);
    let named: Vec<(NodeId, String, String)> = tags
        .iter()
        .map(|t| (t.node.clone(), t.asset_id.clone(), t.tag_name.clone()))
        .collect();
    sink.describe(crate::opcua_properties::descriptions(&session, &named).await);
    let mut problems = Vec::new();
    if let Some(first) = refused.first() {
        problems.push(format!(
            "{} variables refused by the server, e.g. {first}",
            refused.len()
        ));
    }
    if skipped > 0 {
        problems.push(format!(
            "{skipped} variables skipped: their names cannot be asset ids or tag names"
        ));
    }
    if !problems.is_empty() {
        sink.problem(Some(problems.join("; ")));
    }
    let code = (&mut conn.lost)
        .await
        .unwrap_or(StatusCode::BadConnectionClosed);
    Err(describe(code))
}

/// Opens a session, reads the server's state, and closes the session.
pub async fn probe(c: &OpcuaConfig, pki_dir: &Path) -> Result<String, String> {
    let attempt = async {
        let conn = connect(c, pki_dir).await?;
        let values = tokio::time::timeout(
            STEP_TIMEOUT,
            conn.session.read(
                &[ReadValueId::new(
                    VariableId::Server_ServerStatus_State.into(),
                    AttributeId::Value,
                )],
                TimestampsToReturn::Neither,
                0.0,
            ),
        )
        .await
        .map_err(|_| "the session opened but the server status read timed out".to_string())?
        .map_err(|e| {
            format!(
                "the session opened but reading the server status failed: {}",
                describe(e.status())
            )
        })?;
        let state = values
            .first()
            .and_then(|dv| dv.value.as_ref())
            .and_then(|v| match v {
                Variant::Int32(n) => Some(*n),
                _ => None,
            });
        let state = match state {
            Some(0) => "Running".to_string(),
            Some(1) => "Failed".to_string(),
            Some(2) => "NoConfiguration".to_string(),
            Some(3) => "Suspended".to_string(),
            Some(4) => "Shutdown".to_string(),
            Some(5) => "Test".to_string(),
            Some(6) => "CommunicationFault".to_string(),
            Some(n) => format!("state {n}"),
            None => "unknown".to_string(),
        };
        Ok(format!(
            "OPC UA session opened ({}); server state {state}",
            conn.security
        ))
    };
    tokio::time::timeout(crate::net::PROBE_TIMEOUT * 2, attempt)
        .await
        .unwrap_or_else(|_| Err(crate::net::timed_out(&c.endpoint)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_map_to_quality_and_messages() {
        let mut dv = DataValue::new_now(Variant::Double(1.5));
        assert_eq!(quality_of(&dv), Quality::Good);
        dv.status = Some(StatusCode::UncertainLastUsableValue);
        assert_eq!(quality_of(&dv), Quality::Uncertain);
        dv.status = Some(StatusCode::BadSensorFailure);
        assert_eq!(quality_of(&dv), Quality::Bad);
        assert!(timestamp_of(&dv).millis() > 0);
        assert!(describe(StatusCode::BadCertificateUntrusted).starts_with("bad certificate"));
        assert!(describe(StatusCode::BadUserAccessDenied).contains("user identity"));
        assert!(describe(StatusCode::BadIdentityTokenRejected).contains("user identity"));
        assert!(describe(StatusCode::BadTooManySessions).contains("no free session"));
        assert!(describe(StatusCode::Good).contains("stopped answering"));
    }

    #[test]
    fn numbers_and_booleans_are_values() {
        assert_eq!(value_of(&Variant::Boolean(true)), Some(1.0));
        assert_eq!(value_of(&Variant::Int32(-4)), Some(-4.0));
        assert_eq!(value_of(&Variant::Float(2.5)), Some(2.5));
        assert_eq!(value_of(&Variant::String("x".into())), None);
        assert_eq!(value_of(&Variant::Double(f64::NAN)), None);
        assert!(numeric_type(&NodeId::new(0, 11u32)), "Double");
        assert!(numeric_type(&NodeId::new(0, 1u32)), "Boolean");
        assert!(!numeric_type(&NodeId::new(0, 12u32)), "String");
        assert!(!numeric_type(&NodeId::new(2, 11u32)), "another namespace");
    }
}
