//! The edge agent's uplink to its cloud (issue 34), the use cases its transport
//! (`plantd_mqtt::uplink`) calls: who it logs in as, which regional clouds it forwards to and
//! whether they answer, what it forwards (the telemetry outbox, oldest first), its heartbeat and
//! the commands it answers. What it did shows in `GET /v1/edge/config` (`forwarding`).

use plantd_model::Timestamp;
use plantd_model::device::{DescribedTag, DescribedTags, DeviceTopics, MAX_DESCRIBED_TAGS};
use plantd_model::edge_regions::RegionalCloud;
use plantd_model::telemetry::{Point, Quality};
use plantd_store::Uplink;
use serde_json::{Value, json};
use std::time::Duration;

use crate::app::App;
use crate::error::AppResult;
use crate::uplink_state::{FailoverEvent, ForwardingView};

pub use plantd_tsdb::OutboxRecord;

/// Points in one message to the cloud at most (its ingest takes 10,000).
pub const POINTS_PER_MESSAGE: usize = 5_000;
/// What an agent's described tags are (how many, when one last changed): see
/// [`App::edge_tags`].
pub type TagsMark = (i64, i64);
/// Tags an agent tells its cloud about at most (in messages of [`MAX_DESCRIBED_TAGS`]).
pub const MAX_TOLD_TAGS: usize = 100_000;
/// How long a regional cloud's health check may take.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(5);

/// What the agent logs in to its cloud's MQTT channel with.
#[derive(Clone, Debug)]
pub struct UplinkLogin {
    pub device_id: String,
    pub password: String,
    pub topics: DeviceTopics,
}

/// A cloud's MQTT address, split: `mqtt://host:port` (1883 by default).
pub fn mqtt_address(url: &str) -> Result<(String, u16), String> {
    let parsed = plantd_model::data_source::parse_url(url)?;
    match parsed.scheme.as_str() {
        "mqtt" | "tcp" => Ok((parsed.host, parsed.port.unwrap_or(1883))),
        "mqtts" | "ssl" => Err(format!(
            "{url}: MQTT over TLS to the cloud is not supported by the agent in this release; \
             name the cloud's plain MQTT address with PLANTD_MQTT_URL (mqtt://host:1883)"
        )),
        other => Err(format!(
            "{url}: '{other}' is not an MQTT address (mqtt://host:port)"
        )),
    }
}

/// One point as the cloud's ingest takes it.
#[derive(serde::Serialize)]
struct WirePoint<'a> {
    asset_id: &'a str,
    tag_name: &'a str,
    value: f64,
    timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    quality: Option<&'static str>,
}

/// A batch as the cloud's ingest takes it (`{"data": [points]}`), the quality kept (written
/// only when not `good`).
pub fn telemetry_payload<'a>(points: impl IntoIterator<Item = &'a Point>) -> Vec<u8> {
    let data: Vec<WirePoint<'a>> = points
        .into_iter()
        .map(|p| WirePoint {
            asset_id: &p.asset_id,
            tag_name: &p.tag_name,
            value: p.value,
            timestamp: p.timestamp.to_rfc3339(),
            quality: (p.quality != Quality::Good).then(|| p.quality.as_str()),
        })
        .collect();
    #[derive(serde::Serialize)]
    struct Batch<'a> {
        data: Vec<WirePoint<'a>>,
    }
    serde_json::to_vec(&Batch { data }).unwrap_or_default()
}

impl App {
    /// The agent's way to its cloud, once it enrolled: its login and its regional clouds in
    /// order (one read of the enrollment).
    pub async fn uplink_route(
        &self,
        org_id: &str,
    ) -> AppResult<Option<(UplinkLogin, Vec<RegionalCloud>)>> {
        Ok(self.store().uplink(org_id).await?.map(|u| {
            let regions = self.regions_of(&u);
            let login = UplinkLogin {
                topics: DeviceTopics::of(&u.device_id),
                device_id: u.device_id,
                password: u.password,
            };
            (login, regions)
        }))
    }

    /// The regional clouds an enrollment forwards to, in order: its primary, then its failover
    /// list (docs/api.md, "Edge regions"); none on an instance that is not an edge agent.
    pub(crate) fn regions_of(&self, u: &Uplink) -> Vec<RegionalCloud> {
        let Some(edge) = self.config().edge.as_ref() else {
            return Vec::new();
        };
        let known: Vec<RegionalCloud> =
            serde_json::from_value(u.regions["known"].clone()).unwrap_or_default();
        edge.regions.order(
            &known,
            u.regions["current"].as_str(),
            &u.cloud_url,
            edge.mqtt_url.as_deref(),
        )
    }

    /// One health check of a regional cloud for this device: the region answers within 5 s and
    /// serves the device's organization (`GET /v1/fleet/devices/{id}/assets` with the device's
    /// password answers 200; a region that does not serve it answers 307 to the one that does,
    /// and redirects are not followed). So the agent forwards only where its points are kept:
    /// a secondary region counts once the organization has failed over to it, and a former
    /// primary that comes back after the failover does not.
    pub async fn region_serves(&self, cloud: &RegionalCloud, login: &UplinkLogin) -> bool {
        let call = self
            .regional()
            .http()
            .get(format!(
                "{}/v1/fleet/devices/{}/assets",
                cloud.api.trim_end_matches('/'),
                login.device_id
            ))
            .bearer_auth(&login.password)
            .timeout(HEALTH_TIMEOUT);
        matches!(call.send().await, Ok(r) if r.status().is_success())
    }

    /// Starts (or stops) keeping what is ingested for the cloud.
    pub fn forward_from_now(&self, on: bool) {
        self.tsdb().set_forwarding(on);
    }

    /// The outbox's oldest records in `(after, up_to]` but `skip`, up to about `max_points`.
    pub async fn outbox_next(
        &self,
        after: i64,
        up_to: Option<i64>,
        skip: &[i64],
        max_points: usize,
    ) -> AppResult<Vec<OutboxRecord>> {
        Ok(self
            .tsdb()
            .outbox_oldest(after, up_to, skip, max_points)
            .await?)
    }

    /// The newest record's id in the outbox (0 when empty): what was kept before now.
    pub async fn outbox_newest(&self) -> AppResult<i64> {
        Ok(self.tsdb().outbox_count().await?.newest_id)
    }

    /// The cloud acknowledged these records (`points` points in all): they leave the outbox.
    pub async fn outbox_forwarded(&self, ids: &[i64], points: u64) -> AppResult<()> {
        self.tsdb().outbox_forwarded(ids).await?;
        metrics::counter!("plantd_edge_forwarded_points_total").increment(points);
        self.uplink().update(|v| {
            v.forwarded_batches += ids.len() as u64;
            v.forwarded_points += points;
            v.last_forwarded_at = Some(Timestamp::now());
        });
        Ok(())
    }

    /// The forwarding status with what the outbox holds now.
    pub async fn forwarding_view(&self) -> AppResult<ForwardingView> {
        let count = self.tsdb().outbox_count().await?;
        let mut view = self.uplink().get();
        view.pending_batches = count.records;
        view.pending_points = count.points;
        view.backfill_points_per_second = self
            .config()
            .edge
            .as_ref()
            .map(|e| e.backfill_points_per_second)
            .unwrap_or_default();
        Ok(view)
    }

    /// The transport is reaching `cloud`.
    pub fn uplink_reaching(&self, cloud: &RegionalCloud) {
        self.uplink().update(|v| {
            v.region = Some(cloud.region.clone());
            v.api_url = Some(cloud.api.clone());
            v.mqtt_url = cloud.mqtt.clone();
        });
    }

    /// The transport is connected (true) or not, with why.
    pub fn uplink_connected(&self, connected: bool, error: Option<String>) {
        self.uplink().update(|v| {
            if connected && !v.connected {
                v.connected_since = Some(Timestamp::now());
            }
            if !connected {
                v.connected_since = None;
            }
            v.connected = connected;
            v.last_error = error;
        });
    }

    /// The failover rule moved the agent from one regional cloud to another.
    pub fn uplink_failed_over(&self, from: &RegionalCloud, to: &RegionalCloud, reason: &str) {
        tracing::warn!(from = %from.region, to = %to.region, reason, "edge agent: forwarding to another region");
        self.uplink().failed_over(FailoverEvent {
            from: from.region.clone(),
            to: to.region.clone(),
            at: Timestamp::now(),
            reason: reason.to_string(),
        });
    }

    /// The heartbeat's figures for this host: CPU (since the last heartbeat) and memory use,
    /// the temperature where the host reports one, the agent's uptime and its version.
    pub fn edge_heartbeat(&self) -> Vec<u8> {
        let mut hb = serde_json::Map::new();
        if let Some((busy, total)) = cpu_jiffies()
            && let Some(p) = self.uplink().cpu_percent(busy, total)
        {
            hb.insert("cpu_percent".into(), json!(round1(p)));
        }
        if let Some(p) = memory_percent() {
            hb.insert("memory_percent".into(), json!(round1(p)));
        }
        if let Some(t) = std::fs::read_to_string("/sys/class/thermal/thermal_zone0/temp")
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
        {
            hb.insert("temperature_c".into(), json!(round1(t / 1000.0)));
        }
        hb.insert(
            "uptime_seconds".into(),
            json!((Timestamp::now().millis() - self.started_at().millis()).max(0) / 1000),
        );
        hb.insert("firmware_version".into(), json!(self.firmware_version()));
        serde_json::to_vec(&hb).unwrap_or_default()
    }

    /// What the agent knows its tags measure (read from its sources or set by a person), as
    /// the messages of its `tags` topic (at most [`MAX_DESCRIBED_TAGS`] tags each, up to
    /// [`MAX_TOLD_TAGS`] in all), with the mark of what they say; `None` while the mark is
    /// still `told` (nothing changed since the cloud last heard them).
    pub async fn edge_tags(
        &self,
        org_id: &str,
        told: Option<TagsMark>,
    ) -> AppResult<Option<(TagsMark, Vec<Vec<u8>>)>> {
        let mark = self.store().tag_descriptions_mark(org_id).await?;
        if told == Some(mark) {
            return Ok(None);
        }
        let stored = self
            .store()
            .org_tag_descriptions(org_id, MAX_TOLD_TAGS as i64)
            .await?;
        let tags: Vec<DescribedTag> = stored
            .into_iter()
            .map(|(asset_id, (tag_name, d, _, _))| DescribedTag::new(asset_id, tag_name, d))
            .collect();
        let messages = tags
            .chunks(MAX_DESCRIBED_TAGS)
            .map(|chunk| {
                serde_json::to_vec(&DescribedTags {
                    tags: chunk.to_vec(),
                })
                .map_err(|e| crate::error::AppError::internal("encoding the tags", e))
            })
            .collect::<AppResult<_>>()?;
        Ok(Some((mark, messages)))
    }

    /// Answers a command from the cloud (its `commands` topic): the payload of its result
    /// (`{id, status, result}`), or None for a message that is not a command.
    ///
    /// - `ping`: `{"version"}`;
    /// - `sync_assets`: pulls the assets registered for the device and provisions them (the
    ///   import's report);
    /// - `get_config`: the agent's configuration (`GET /v1/edge/config`);
    /// - `ota.update` and `ota.rollback`: the agent updates itself (`edge_update.rs`) and
    ///   reports on its `ota` topic; the final report completes the command, so these get an
    ///   answer here only when they cannot be taken;
    /// - anything else fails with "unknown command".
    pub async fn edge_command(&self, org_id: &str, payload: &[u8]) -> Option<Vec<u8>> {
        let command: Value = serde_json::from_slice(payload).ok()?;
        let id = command["id"].as_str()?.to_string();
        let name = command["command"].as_str().unwrap_or_default().to_string();
        let outcome: Result<Value, String> = match name.as_str() {
            crate::ota::UPDATE_COMMAND => {
                match self.take_update_command(org_id, &command["params"]) {
                    Ok(()) => return None,
                    Err(e) => Err(e),
                }
            }
            crate::ota::ROLLBACK_COMMAND => match self.take_rollback_command(&command["params"]) {
                Ok(()) => return None,
                Err(e) => Err(e),
            },
            "ping" => Ok(json!({"version": env!("CARGO_PKG_VERSION")})),
            "sync_assets" => self
                .sync_from_cloud(org_id)
                .await
                .map(|r| serde_json::to_value(r).unwrap_or_default())
                .map_err(|e| e.to_string()),
            "get_config" => self
                .edge_config(org_id)
                .await
                .map(|c| serde_json::to_value(c).unwrap_or_default())
                .map_err(|e| e.to_string()),
            other => Err(format!(
                "unknown command '{other}'; the agent answers ping, sync_assets, get_config, ota.update and ota.rollback"
            )),
        };
        let answer = match outcome {
            Ok(result) => json!({"id": id, "status": "succeeded", "result": result}),
            Err(e) => json!({"id": id, "status": "failed", "result": {"error": e}}),
        };
        serde_json::to_vec(&answer).ok()
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// (busy, total) jiffies of every CPU from `/proc/stat`.
fn cpu_jiffies() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let n: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = n.iter().sum();
    // idle and iowait are not busy.
    let idle = n.get(3).copied().unwrap_or(0) + n.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// The share of memory in use, from `/proc/meminfo`.
fn memory_percent() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<f64> {
        info.lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let (total, available) = (field("MemTotal:")?, field("MemAvailable:")?);
    (total > 0.0).then(|| (total - available) * 100.0 / total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_batch_is_the_ingest_body_with_its_quality() {
        let p = |q| Point {
            asset_id: "Pump_01".into(),
            tag_name: "Flow".into(),
            value: 1.5,
            timestamp: Timestamp::from_millis(1_700_000_000_000),
            quality: q,
            data_source_id: Some("ds".into()),
        };
        let body: Value =
            serde_json::from_slice(&telemetry_payload(&[p(Quality::Good), p(Quality::Bad)]))
                .unwrap();
        assert_eq!(body["data"][0]["asset_id"], "Pump_01");
        assert!(body["data"][0].get("quality").is_none());
        assert_eq!(body["data"][1]["quality"], "bad");
        assert!(body["data"][0].get("data_source_id").is_none());
        // The cloud's ingest reads it back whole.
        let now = Timestamp::from_millis(1_700_000_100_000);
        let (points, _) = plantd_model::telemetry::parse_batch(
            &telemetry_payload(&[p(Quality::Uncertain)]),
            Default::default(),
            now,
            Timestamp::from_millis(0),
        )
        .unwrap();
        assert_eq!(points[0].quality, Quality::Uncertain);
        assert_eq!(
            mqtt_address("mqtt://cloud:1884").unwrap(),
            ("cloud".into(), 1884)
        );
        assert_eq!(mqtt_address("mqtt://cloud").unwrap().1, 1883);
        assert!(
            mqtt_address("mqtts://cloud")
                .unwrap_err()
                .contains("PLANTD_MQTT_URL")
        );
        assert!(mqtt_address("http://cloud").is_err());
    }
}
