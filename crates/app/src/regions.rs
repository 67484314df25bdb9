//! Regions (SPEC 2.9, 4.14, issue 33): which region this instance serves and which peers serve
//! the others, the region list and details, the peers' health probed over HTTP, an
//! organization's region view, and where a request for an organization's resident data belongs.

use plantd_model::Timestamp;
use plantd_model::region::RegionId;
use serde::Serialize;
use std::time::{Duration, Instant};

use crate::app::App;
pub use crate::config::RegionSettings;
use crate::error::AppError;

/// A region's addresses: the REST API, the live stream, the MQTT device channel and the
/// console.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct Endpoints {
    pub api: Option<String>,
    pub websocket: Option<String>,
    pub mqtt: Option<String>,
    pub dashboard: Option<String>,
}

/// A region as listed (SPEC 4.14; the SPEC shows no body: docs/api.md, "Regions").
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct RegionView {
    #[schema(value_type = String, example = "us-east")]
    pub id: RegionId,
    pub name: &'static str,
    pub location: &'static str,
    /// `active` when an instance of this deployment serves it, else `unavailable`.
    pub status: &'static str,
    /// Whether this deployment serves the region.
    pub served: bool,
    /// Whether it is the region of the instance answering.
    pub current: bool,
    pub certifications: Vec<&'static str>,
    pub endpoints: Endpoints,
}

/// A served region's health (SPEC 2.9), probed when asked.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct RegionHealth {
    #[schema(value_type = String, example = "eu-west")]
    pub id: RegionId,
    /// `healthy`, `degraded` (answered, but not healthy or slower than a second) or
    /// `unreachable`.
    pub status: &'static str,
    /// Round trip of the probe (0 for the instance answering); `null` when unreachable.
    pub latency_ms: Option<u64>,
    pub last_check: Timestamp,
}

/// SPEC 2.9's organization region view.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct OrgRegionView {
    pub organization_id: String,
    #[schema(value_type = String, example = "us-east")]
    pub primary_region: RegionId,
    pub data_residency_enabled: bool,
    #[schema(value_type = Vec<String>)]
    pub available_regions: Vec<RegionId>,
    pub endpoints: Endpoints,
    /// The copy of its resident data in its secondary region (active-passive), when one was
    /// made: the secondary region and when the copy was taken (as this instance knows it: the
    /// primary region's instance the copy it sent, the secondary's the copy it holds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secondary_copy: Option<SecondaryCopy>,
    /// The organization's newest region migration, when it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migration: Option<crate::region_migration::MigrationView>,
}

/// The copy of an organization's resident data in its secondary region.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct SecondaryCopy {
    #[schema(value_type = String, example = "eu-west")]
    pub region: String,
    pub copied_at: Timestamp,
    pub points: i64,
    pub rows: i64,
}

/// A probe slower than this answers `degraded`.
const SLOW_PROBE: Duration = Duration::from_secs(1);
/// A peer that does not answer within this is `unreachable`.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

fn websocket_of(root: &str) -> String {
    let ws = if let Some(rest) = root.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = root.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        root.to_string()
    };
    format!("{ws}/v1/ws")
}

impl App {
    pub fn region_settings(&self) -> &RegionSettings {
        &self.config().regions
    }

    /// The root address of the instance serving `region` (this instance's public origin for
    /// its own region).
    pub fn region_root(&self, region: RegionId) -> Option<String> {
        let s = self.region_settings();
        if region == s.region {
            Some(self.issuer().to_string())
        } else {
            s.peer_root(region).map(str::to_string)
        }
    }

    fn endpoints_of(&self, region: RegionId) -> Endpoints {
        let root = self.region_root(region);
        let mqtt = if region == self.region_settings().region {
            self.region_settings().mqtt_url.clone()
        } else {
            self.peer_mqtt(region)
        };
        Endpoints {
            api: root.as_ref().map(|r| format!("{r}/v1")),
            websocket: root.as_deref().map(websocket_of),
            mqtt,
            dashboard: root.as_ref().map(|r| format!("{r}/")),
        }
    }

    /// Every region of SPEC 2.9, served or not.
    pub fn regions(&self) -> Vec<RegionView> {
        let served = self.region_settings().served();
        RegionId::ALL
            .into_iter()
            .map(|id| {
                let is_served = served.contains(&id);
                RegionView {
                    id,
                    name: id.name(),
                    location: id.location(),
                    status: if is_served { "active" } else { "unavailable" },
                    served: is_served,
                    current: id == self.region_settings().region,
                    certifications: id.certifications().to_vec(),
                    endpoints: self.endpoints_of(id),
                }
            })
            .collect()
    }

    /// One region; an unknown id is a 404 naming the ids.
    pub fn region(&self, id: &str) -> Result<RegionView, AppError> {
        let id: RegionId = id.parse().map_err(|_| AppError::NotFound("region"))?;
        Ok(self
            .regions()
            .into_iter()
            .find(|r| r.id == id)
            .expect("every region is listed"))
    }

    /// The served regions' health: each peer probed now, concurrently (`GET
    /// {root}/api/v1/regions/{id}`), its round trip measured; the peer's MQTT address is
    /// learnt from its answer.
    pub async fn regions_health(&self) -> Vec<RegionHealth> {
        let settings = self.region_settings();
        let own = RegionHealth {
            id: settings.region,
            status: "healthy",
            latency_ms: Some(0),
            last_check: Timestamp::now(),
        };
        let mut probes = tokio::task::JoinSet::new();
        for (id, root) in settings.peers.clone() {
            let app = self.clone();
            probes.spawn(async move { app.probe_peer(id, root).await });
        }
        let mut out = vec![own];
        out.extend(probes.join_all().await);
        out.sort_by_key(|h| h.id);
        out
    }

    async fn probe_peer(&self, id: RegionId, root: String) -> RegionHealth {
        let client = self.regional().http();
        let started = Instant::now();
        let answer = tokio::time::timeout(
            PROBE_TIMEOUT,
            client
                .get(format!("{root}/api/v1/regions/{id}"))
                .header("accept", "application/json")
                .send(),
        )
        .await;
        let elapsed = started.elapsed();
        let latency_ms = Some(elapsed.as_millis() as u64);
        let (status, latency_ms) = match answer {
            Ok(Ok(r)) if r.status().is_success() => {
                if let Ok(body) = r.json::<serde_json::Value>().await {
                    let mqtt = body["data"]["endpoints"]["mqtt"].as_str().map(String::from);
                    self.regional().learn_peer_mqtt(id, mqtt);
                }
                (
                    if elapsed > SLOW_PROBE {
                        "degraded"
                    } else {
                        "healthy"
                    },
                    latency_ms,
                )
            }
            Ok(Ok(_)) => ("degraded", latency_ms),
            _ => ("unreachable", None),
        };
        RegionHealth {
            id,
            status,
            latency_ms,
            last_check: Timestamp::now(),
        }
    }

    fn peer_mqtt(&self, region: RegionId) -> Option<String> {
        self.regional().peer_mqtt(region)
    }

    /// An organization's primary region: the stored one, or this instance's for an
    /// organization created before it had one (claimed by the replication worker).
    pub async fn org_primary_region(&self, org_id: &str) -> Result<(RegionId, bool), AppError> {
        let (region, strict) = self.store().org_region(org_id).await?;
        let region = match region {
            Some(r) => r
                .parse()
                .map_err(|e: String| AppError::internal("organization region", e))?,
            None => self.region_settings().region,
        };
        Ok((region, strict))
    }

    /// SPEC 2.9's organization region view.
    pub async fn org_region_view(&self, org_id: &str) -> Result<OrgRegionView, AppError> {
        let (primary, strict) = self.org_primary_region(org_id).await?;
        Ok(OrgRegionView {
            organization_id: org_id.to_string(),
            primary_region: primary,
            data_residency_enabled: strict,
            available_regions: self.region_settings().served(),
            endpoints: self.endpoints_of(primary),
            secondary_copy: self.secondary_copy(org_id).await?,
            migration: self.org_migration(org_id).await?,
        })
    }

    async fn secondary_copy(&self, org_id: &str) -> Result<Option<SecondaryCopy>, AppError> {
        let own = self.region_settings().region.as_str().to_string();
        let sent = self.store().standby_copy(org_id, "sent").await?;
        let copy = match sent {
            Some(c) => Some(c),
            None => self.store().standby_copy(org_id, "held").await?.map(|c| {
                plantd_store::StandbyCopy {
                    region: own.clone(),
                    ..c
                }
            }),
        };
        Ok(copy.map(|c| SecondaryCopy {
            region: c.region,
            copied_at: c.copied_at,
            points: c.points,
            rows: c.rows,
        }))
    }

    /// Where the organization's resident data is served when that is not this instance: the
    /// primary region's root address. `None` on a single instance, and when this instance
    /// serves the organization's primary region. Looked up at most once per `key_cache_ttl`.
    pub async fn resident_elsewhere(&self, org_id: &str) -> Result<Option<String>, AppError> {
        let settings = self.region_settings();
        if settings.peers.is_empty() {
            return Ok(None);
        }
        let cache = self.regional().org_regions();
        let region = match cache.get(org_id, self.config().key_cache_ttl) {
            Ok(r) => r,
            Err(lookup) => {
                let (r, _) = self.org_primary_region(org_id).await?;
                cache.put(lookup, org_id.to_string(), r);
                r
            }
        };
        if region == settings.region {
            return Ok(None);
        }
        Ok(self.region_root(region))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bootstrap_region_is_the_first_served_in_spec_order() {
        let mut s = RegionSettings {
            region: RegionId::EuWest,
            peers: vec![(RegionId::ApNortheast, "http://a".into())],
            ..RegionSettings::default()
        };
        assert_eq!(s.served(), vec![RegionId::EuWest, RegionId::ApNortheast]);
        assert_eq!(s.bootstrap_region(), RegionId::EuWest);
        s.peers.push((RegionId::UsEast, "http://b".into()));
        assert_eq!(s.bootstrap_region(), RegionId::UsEast);
        assert_eq!(websocket_of("https://x.example"), "wss://x.example/v1/ws");
        assert_eq!(websocket_of("http://127.0.0.1:9"), "ws://127.0.0.1:9/v1/ws");
    }
}
