//! The edge agent and its cloud (issue 34): the assets an operator registers in the cloud for
//! an edge device (`PUT/GET /v1/fleet/devices/{id}/assets`), the agent's configuration view
//! (`GET /v1/edge/config`), its enrollment with the
//! cloud by an enrollment token (it becomes a fleet device there), and the cloud sync that
//! pulls its registered assets and provisions them (`POST /v1/provisioning/sync/cloud`).

use plantd_model::Timestamp;
use plantd_model::Validator;
use plantd_model::provisioning::{AssetRow, asset_rows};
use plantd_store::Uplink;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::Duration;

use crate::app::App;
use crate::caller::{Caller, Credential};
use crate::error::{AppError, AppResult};
use crate::provisioning::{ImportReport, Method, named_entries};

/// How long a call to the cloud may take.
const CLOUD_TIMEOUT: Duration = Duration::from_secs(15);

/// `GET/PUT /v1/fleet/devices/{id}/assets`.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct DeviceAssets {
    pub device_id: String,
    /// The rows as checked (defaults filled in).
    pub assets: Vec<AssetRow>,
    /// When they were last set; null before.
    pub updated_at: Option<Timestamp>,
}

/// The agent's enrollment, as `GET /v1/edge/config` shows it (never the password).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct CloudLink {
    pub url: String,
    pub device_id: String,
    pub enrolled_at: Timestamp,
}

impl From<&Uplink> for CloudLink {
    fn from(u: &Uplink) -> Self {
        Self {
            url: u.cloud_url.clone(),
            device_id: u.device_id.clone(),
            enrolled_at: u.enrolled_at,
        }
    }
}

/// `GET /v1/edge/config`: the agent's mode and retention (SPEC 8.6).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct EdgeConfigView {
    pub mode: plantd_model::provisioning::DeploymentMode,
    pub retention: EdgeRetention,
    /// The cloud this agent enrolled with; null before it enrolls.
    pub cloud: Option<CloudLink>,
    /// The regional clouds it forwards to, in order: its primary, then its failover list
    /// (empty before it enrolls).
    pub regions: Vec<plantd_model::edge_regions::RegionalCloud>,
    /// The uplink's status and what waits for the cloud; null before it enrolls.
    pub forwarding: Option<crate::uplink_state::ForwardingView>,
}

/// Days each kind of data is kept on the agent.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct EdgeRetention {
    pub raw_days: i64,
    pub minute_days: i64,
    pub hour_days: i64,
    pub day_days: i64,
    pub ml_predictions_days: i64,
    pub alert_history_days: i64,
}

/// The cloud's refusal or silence, as a 409 the operator acts on.
fn cloud_error(what: &str, e: impl std::fmt::Display) -> AppError {
    AppError::Refused {
        code: "cloud_unreachable",
        message: format!("{what}: {e}"),
    }
}

/// Sends a call to the cloud (at `cloud`) and reads its JSON answer; a cloud that cannot be
/// reached, refuses (`the cloud refused <doing>`, with its message) or answers no JSON is a
/// `cloud_unreachable` refusal.
async fn ask_cloud(call: reqwest::RequestBuilder, cloud: &str, doing: &str) -> AppResult<Value> {
    let r = call
        .timeout(CLOUD_TIMEOUT)
        .send()
        .await
        .map_err(|e| cloud_error(&format!("cannot reach the cloud at {cloud}"), e))?;
    if !r.status().is_success() {
        return Err(cloud_error(
            &format!("the cloud refused {doing}"),
            cloud_refusal(r).await,
        ));
    }
    r.json()
        .await
        .map_err(|e| cloud_error("the cloud's answer is not JSON", e))
}

/// The cloud's error message in its envelope, else the status.
async fn cloud_refusal(r: reqwest::Response) -> String {
    let status = r.status();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    match body["error"]["message"].as_str() {
        Some(m) => format!("{status}: {m}"),
        None => status.to_string(),
    }
}

/// A cloud's root address as the agent keeps it: no surrounding space, no trailing `/`.
pub fn cloud_root(url: &str) -> String {
    url.trim().trim_end_matches('/').to_string()
}

impl App {
    /// The edge agent's settings; `not found` on an instance that is not `plantd edge`.
    pub async fn edge_config(&self, org_id: &str) -> AppResult<EdgeConfigView> {
        let edge = self.config().edge.as_ref().ok_or(AppError::NotFound(
            "edge configuration (this instance is not an edge agent: `plantd edge`)",
        ))?;
        let r = &self.config().retention;
        let uplink = self.store().uplink(org_id).await?;
        Ok(EdgeConfigView {
            mode: edge.mode,
            retention: EdgeRetention {
                raw_days: r.raw_days,
                minute_days: r.minute_days,
                hour_days: r.hour_days,
                day_days: r.day_days,
                ml_predictions_days: edge.ml_predictions_days,
                alert_history_days: edge.alert_history_days,
            },
            cloud: uplink.as_ref().map(CloudLink::from),
            regions: uplink
                .as_ref()
                .map(|u| self.regions_of(u))
                .unwrap_or_default(),
            forwarding: match uplink {
                Some(_) => Some(self.forwarding_view().await?),
                None => None,
            },
        })
    }

    /// Registers the assets an edge device provisions at its next cloud sync (each row checked
    /// as an import's; a bad one named `assets[i].field`, nothing stored).
    pub async fn set_device_assets(
        &self,
        org_id: &str,
        device_id: &str,
        assets: Vec<Value>,
    ) -> AppResult<DeviceAssets> {
        let entries = named_entries(assets);
        let mut v = Validator::new();
        let rows: Vec<AssetRow> = if entries.is_empty() {
            Vec::new()
        } else {
            asset_rows(&entries, &HashSet::new(), &mut v)
                .into_iter()
                .map(|a| a.row)
                .collect()
        };
        v.finish()?;
        let updated_at = self
            .store()
            .set_device_assets(org_id, device_id, &rows)
            .await
            .map_err(AppError::missing("device"))?;
        Ok(DeviceAssets {
            device_id: device_id.to_string(),
            assets: rows,
            updated_at: Some(updated_at),
        })
    }

    /// A device's registered assets: to the organization's operators, and to the device itself
    /// (its own password; another device's are missing to it).
    pub async fn device_assets(&self, caller: &Caller, device_id: &str) -> AppResult<DeviceAssets> {
        if let Credential::Device { id } = &caller.credential
            && id != device_id
        {
            return Err(AppError::NotFound("device"));
        }
        // The device must be the organization's.
        self.store()
            .device(&caller.org_id, device_id)
            .await
            .map_err(AppError::missing("device"))?;
        let (assets, updated_at) = self
            .store()
            .device_assets(&caller.org_id, device_id)
            .await?;
        Ok(DeviceAssets {
            device_id: device_id.to_string(),
            assets,
            updated_at,
        })
    }

    /// The agent's enrollment with its cloud, if it enrolled.
    pub async fn cloud_link(&self, org_id: &str) -> AppResult<Option<CloudLink>> {
        Ok(self
            .store()
            .uplink(org_id)
            .await?
            .as_ref()
            .map(CloudLink::from))
    }

    /// Enrolls this agent with the cloud at `cloud_url` (its root) by an enrollment token: it
    /// registers there as a fleet device (serial number: this agent's organization id, stable
    /// for its data directory) and keeps the credentials it got. Enrolling again (another
    /// token, another cloud) replaces the former enrollment.
    pub async fn enroll(&self, org_id: &str, cloud_url: &str, token: &str) -> AppResult<CloudLink> {
        let url = cloud_root(cloud_url);
        let parsed = plantd_model::data_source::parse_url(&url)
            .map_err(|e| AppError::invalid("cloud_url", e))?;
        if parsed.scheme != "http" && parsed.scheme != "https" {
            return Err(AppError::invalid(
                "cloud_url",
                "must be the cloud's root address, http:// or https://",
            ));
        }
        if token.trim().is_empty() {
            return Err(AppError::invalid("token", "is required"));
        }
        let host = std::fs::read_to_string("/etc/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "gateway".into());
        let body = json!({"name": format!("Edge {host}"), "serial_number": format!("edge-{org_id}"),
                          "enrollment_token": token.trim(), "tags": ["edge"]});
        let call = self
            .regional()
            .http()
            .post(format!("{url}/v1/fleet/devices"))
            .json(&body);
        let answer = ask_cloud(call, &url, "the enrollment").await?;
        let device = &answer["data"];
        let (Some(id), Some(password)) =
            (device["id"].as_str(), device["mqtt"]["password"].as_str())
        else {
            return Err(cloud_error(
                "the cloud's answer",
                "has no device id and password",
            ));
        };
        let mut mqtt = device["mqtt"].clone();
        if let Some(m) = mqtt.as_object_mut() {
            m.remove("password");
        }
        let regions = self.learn_regions(&url).await;
        let uplink = Uplink {
            cloud_url: url,
            device_id: id.to_string(),
            password: password.to_string(),
            mqtt,
            enrolled_at: Timestamp::now(),
            regions,
        };
        self.store().set_uplink(org_id, &uplink).await?;
        // From now on what the agent stores is kept for the cloud too.
        self.forward_from_now(true);
        Ok(CloudLink::from(&uplink))
    }

    /// The enrollment kept, its cloud's root address now `cloud_url`: the same cloud answering
    /// at another address (`plantd up` started again on another port). The device, its
    /// credentials and what waits to be forwarded stay.
    pub async fn move_cloud(&self, org_id: &str, cloud_url: &str) -> AppResult<Option<CloudLink>> {
        let Some(mut uplink) = self.store().uplink(org_id).await? else {
            return Ok(None);
        };
        let url = cloud_root(cloud_url);
        if uplink.cloud_url != url {
            uplink.cloud_url = url.clone();
            uplink.regions = self.learn_regions(&url).await;
            self.store().set_uplink(org_id, &uplink).await?;
        }
        Ok(Some(CloudLink::from(&uplink)))
    }

    /// What the cloud at `url` says of its regions (`GET /api/v1/regions`): the one it answers
    /// from (`current`) and each served region's root and MQTT address, with the round trip of
    /// asking each region; `{}` when it does not say.
    async fn learn_regions(&self, url: &str) -> Value {
        let call = self.regional().http().get(format!("{url}/api/v1/regions"));
        let Ok(answer) = ask_cloud(call, url, "the region list").await else {
            return json!({});
        };
        let mut current = Value::Null;
        let mut known = Vec::new();
        for r in answer["data"].as_array().into_iter().flatten() {
            let Some(api) = r["endpoints"]["api"].as_str() else {
                continue;
            };
            if r["current"] == true {
                current = r["id"].clone();
            }
            let mut cloud = plantd_model::edge_regions::RegionalCloud {
                region: r["id"].as_str().unwrap_or_default().to_string(),
                api: plantd_model::edge_regions::api_root(api),
                mqtt: r["endpoints"]["mqtt"].as_str().map(str::to_string),
                latency_ms: None,
            };
            // The region itself says where its channel is (the cloud knows a peer's only
            // from its last probe), and the round trip is measured on the way.
            let started = std::time::Instant::now();
            let own = self
                .regional()
                .http()
                .get(format!("{}/api/v1/regions/{}", cloud.api, cloud.region))
                .timeout(CLOUD_TIMEOUT)
                .send()
                .await;
            if let Ok(r) = own
                && r.status().is_success()
            {
                cloud.latency_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
                if let Ok(v) = r.json::<Value>().await
                    && let Some(m) = v["data"]["endpoints"]["mqtt"].as_str()
                {
                    cloud.mqtt = Some(m.to_string());
                }
            }
            known.push(cloud);
        }
        json!({"current": current, "known": known})
    }

    /// Pulls the assets registered for this agent in the cloud and provisions them
    /// (`Method::Cloud`), as an import would.
    pub async fn sync_from_cloud(&self, org_id: &str) -> AppResult<ImportReport> {
        let Some(u) = self.store().uplink(org_id).await? else {
            return Err(AppError::Refused {
                code: "not_enrolled",
                message: "this agent is not enrolled with a cloud: start it with --enroll TOKEN --cloud URL, or POST /v1/edge/enroll".into(),
            });
        };
        let url = format!("{}/v1/fleet/devices/{}/assets", u.cloud_url, u.device_id);
        let call = self.regional().http().get(&url).bearer_auth(&u.password);
        let answer = ask_cloud(call, &u.cloud_url, "the sync").await?;
        let assets = answer["data"]["assets"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if assets.is_empty() {
            return Ok(ImportReport {
                imported: 0,
                created: 0,
                updated: 0,
                assets: Vec::new(),
            });
        }
        self.import_entries(org_id, assets, Method::Cloud).await
    }
}
