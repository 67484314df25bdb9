//! Latest value per tag of an asset: from memory where this process sees every write (SQLite),
//! else from the database. Memory entries are filled from the database on first read and kept
//! current by ingest.

use plantd_model::Timestamp;
use plantd_model::telemetry::{Point, Quality};
use serde::Serialize;
use sqlx::Row;
use std::collections::HashMap;
use std::sync::Mutex;

use crate::{Result, Tsdb};

#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LatestValue {
    pub tag_name: String,
    pub value: f64,
    pub timestamp: Timestamp,
    pub quality: Quality,
}

type Tags = HashMap<String, (i64, f64, Quality)>;

pub(crate) struct LatestCache {
    trusted: bool,
    assets: Mutex<HashMap<(String, String), Tags>>,
}

impl LatestCache {
    pub(crate) fn new(trusted: bool) -> Self {
        Self {
            trusted,
            assets: Mutex::default(),
        }
    }

    /// Applies committed points to assets already in memory (others load on first read).
    pub(crate) fn observe(&self, org_id: &str, points: &[Point]) {
        if !self.trusted {
            return;
        }
        let mut assets = self.assets.lock().unwrap_or_else(|p| p.into_inner());
        let mut key = (org_id.to_string(), String::new());
        for p in points {
            key.1.clone_from(&p.asset_id);
            if let Some(tags) = assets.get_mut(&key) {
                let ts = p.timestamp.millis();
                let slot = tags
                    .entry(p.tag_name.clone())
                    .or_insert((ts, p.value, p.quality));
                if ts >= slot.0 {
                    *slot = (ts, p.value, p.quality);
                }
            }
        }
    }
}

impl Tsdb {
    /// The latest value of each tag of an asset (only `tags` when given), by tag name.
    pub async fn latest(
        &self,
        org_id: &str,
        asset_id: &str,
        tags: Option<&[String]>,
    ) -> Result<Vec<LatestValue>> {
        let key = (org_id.to_string(), asset_id.to_string());
        let cached = if self.shared.latest.trusted {
            self.shared
                .latest
                .assets
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&key)
                .cloned()
        } else {
            None
        };
        let all = match cached {
            Some(all) => all,
            None => {
                let loaded = self.load_latest(org_id, asset_id).await?;
                if self.shared.latest.trusted {
                    let mut assets = self
                        .shared
                        .latest
                        .assets
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    // An ingest that committed meanwhile may already be newer than what was read.
                    let entry = assets.entry(key).or_default();
                    for (tag, v) in &loaded {
                        let slot = entry.entry(tag.clone()).or_insert(*v);
                        if v.0 > slot.0 {
                            *slot = *v;
                        }
                    }
                    entry.clone()
                } else {
                    loaded
                }
            }
        };
        let mut out: Vec<LatestValue> = all
            .into_iter()
            .filter(|(tag, _)| tags.is_none_or(|wanted| wanted.iter().any(|w| w == tag)))
            .map(|(tag_name, (ts, value, quality))| LatestValue {
                tag_name,
                value,
                timestamp: Timestamp::from_millis(ts),
                quality,
            })
            .collect();
        out.sort_by(|a, b| a.tag_name.cmp(&b.tag_name));
        Ok(out)
    }

    async fn load_latest(&self, org_id: &str, asset_id: &str) -> Result<Tags> {
        let rows = sqlx::query(
            "SELECT s.tag_name, r.ts, r.value, r.quality FROM telemetry_series s \
             JOIN telemetry_raw r ON r.series_id = s.id \
             WHERE s.org_id = $1 AND s.asset_id = $2 \
             AND r.ts = (SELECT MAX(m.ts) FROM telemetry_raw m WHERE m.series_id = s.id)",
        )
        .bind(org_id)
        .bind(asset_id)
        .fetch_all(self.pool())
        .await?;
        let mut tags = Tags::new();
        for r in rows {
            let quality: i16 = r.try_get("quality")?;
            tags.insert(
                r.try_get("tag_name")?,
                (
                    r.try_get("ts")?,
                    r.try_get("value")?,
                    Quality::from_code(quality.into()),
                ),
            );
        }
        Ok(tags)
    }
}
