//! Latest value per tag of an asset: from memory where this process sees every write (SQLite),
//! else from the database. Memory entries are filled from the database on first read and kept
//! current by ingest.

use plantd_model::Timestamp;
use plantd_model::telemetry::{Point, Quality};
use serde::Serialize;
use sqlx::Row;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use plantd_store::Store;
use std::sync::Arc;

use crate::error::Result;

#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LatestValue {
    pub tag_name: String,
    pub value: f64,
    pub timestamp: Timestamp,
    pub quality: Quality,
}

type Tags = HashMap<String, (i64, f64, Quality)>;

#[derive(Default)]
struct Inner {
    assets: HashMap<(String, String), Tags>,
    /// Assets being read from the database, with how many reads and what this node's ingest
    /// committed meanwhile (merged into what the reads return, so they never store an older
    /// value than one already acknowledged).
    loading: HashMap<(String, String), (usize, Tags)>,
}

/// Keeps the newer of each tag's values.
fn merge(into: &mut Tags, from: &Tags) {
    for (tag, v) in from {
        let slot = into.entry(tag.clone()).or_insert(*v);
        if v.0 > slot.0 {
            *slot = *v;
        }
    }
}

/// The channel on which PostgreSQL nodes announce the assets their ingest wrote.
pub(crate) const CHANNEL: &str = "plantd_latest";

/// Latest values per (organization, asset), in memory on both backends.
///
/// - SQLite: one process sees every write; ingest updates the entries it touches.
/// - PostgreSQL: several nodes may write. Each ingest also announces, inside its transaction,
///   the assets it wrote (`NOTIFY plantd_latest`, prefixed with the writing node's id); other
///   nodes drop those entries and read them again on the next request. While a node's listener
///   is down its cache is bypassed. A read that raced an announcement does not store what it
///   read (a generation counter).
pub(crate) struct LatestCache {
    /// Announcements from this node are skipped: its ingest already updated its entries.
    pub(crate) node: String,
    trusted: AtomicBool,
    generation: AtomicU64,
    inner: Mutex<Inner>,
    /// Dropped with the cache, which ends its listener.
    alive: tokio::sync::watch::Sender<()>,
    listening: OnceLock<()>,
}

impl LatestCache {
    pub(crate) fn new(trusted: bool) -> Self {
        Self {
            node: plantd_model::new_id(),
            trusted: AtomicBool::new(trusted),
            generation: AtomicU64::new(0),
            inner: Mutex::default(),
            alive: tokio::sync::watch::channel(()).0,
            listening: OnceLock::new(),
        }
    }

    /// Applies committed points to assets already in memory (others load on first read).
    pub(crate) fn observe(&self, org_id: &str, points: &[Point]) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let inner = &mut *inner;
        let mut key = (org_id.to_string(), String::new());
        for p in points {
            if key.1 != p.asset_id {
                key.1.clone_from(&p.asset_id);
            }
            let tags = match inner.assets.get_mut(&key) {
                Some(tags) => Some(tags),
                None => inner.loading.get_mut(&key).map(|(_, tags)| tags),
            };
            if let Some(tags) = tags {
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

    /// The announcement texts for assets written by a group: this node's id, then one
    /// `org<TAB>asset` per line, split below PostgreSQL's 8,000-byte payload limit.
    pub(crate) fn announcements<'a>(
        &self,
        assets: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut current = self.node.clone();
        for (org, asset) in assets {
            if current.len() + org.len() + asset.len() + 2 > 7_000 {
                out.push(std::mem::replace(&mut current, self.node.clone()));
            }
            current.push('\n');
            current.push_str(org);
            current.push('\t');
            current.push_str(asset);
        }
        if current.len() > self.node.len() {
            out.push(current);
        }
        out
    }
}

impl plantd_store::NotifyTarget for LatestCache {
    fn reset(&self, trusted: bool) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.trusted.store(trusted, Ordering::Release);
        inner.assets.clear();
    }

    fn notified(&self, payload: &str) {
        let mut lines = payload.split('\n');
        if lines.next() == Some(self.node.as_str()) {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        for line in lines {
            if let Some((org, asset)) = line.split_once('\t') {
                inner.assets.remove(&(org.to_string(), asset.to_string()));
            }
        }
    }
}

impl LatestCache {
    /// Whether `read` answers from memory now (always on SQLite; on PostgreSQL once this node
    /// hears the other nodes' writes).
    pub(crate) fn answers_from_memory(&self) -> bool {
        self.trusted.load(Ordering::Acquire)
    }

    /// The latest value of each tag of an asset (only `tags` when given), by tag name.
    pub(crate) async fn read(
        self: &Arc<Self>,
        store: &Store,
        org_id: &str,
        asset_id: &str,
        tags: Option<&[String]>,
    ) -> Result<Vec<LatestValue>> {
        let cache = self;
        cache.listening.get_or_init(|| {
            store.listen(CHANNEL, cache, cache.alive.subscribe());
        });
        let key = (org_id.to_string(), asset_id.to_string());
        let (cached, generation) = {
            let mut inner = cache.inner.lock().unwrap_or_else(|p| p.into_inner());
            let generation = cache.generation.load(Ordering::Acquire);
            let hit = if cache.trusted.load(Ordering::Acquire) {
                inner.assets.get(&key).cloned()
            } else {
                None
            };
            if hit.is_none() {
                inner.loading.entry(key.clone()).or_default().0 += 1;
            }
            (hit, generation)
        };
        let all = match cached {
            Some(all) => all,
            None => {
                let loaded = load(store.pool(), org_id, asset_id).await;
                let mut inner = cache.inner.lock().unwrap_or_else(|p| p.into_inner());
                let meanwhile = match inner.loading.get_mut(&key) {
                    Some((readers, tags)) if *readers > 1 => {
                        *readers -= 1;
                        tags.clone()
                    }
                    _ => inner
                        .loading
                        .remove(&key)
                        .map(|(_, t)| t)
                        .unwrap_or_default(),
                };
                let mut loaded = loaded?;
                merge(&mut loaded, &meanwhile);
                if cache.trusted.load(Ordering::Acquire)
                    && cache.generation.load(Ordering::Acquire) == generation
                {
                    let entry = inner.assets.entry(key).or_default();
                    merge(entry, &loaded);
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
}

/// The latest value of each tag of an asset, from the database: the last point of each series'
/// last block.
async fn load(pool: &sqlx::AnyPool, org_id: &str, asset_id: &str) -> Result<Tags> {
    let rows = sqlx::query(
        "SELECT s.tag_name, b.data FROM telemetry_series s \
         JOIN telemetry_block b ON b.series_id = s.id \
         WHERE s.org_id = $1 AND s.asset_id = $2 \
         AND b.start_ts = (SELECT MAX(m.start_ts) FROM telemetry_block m WHERE m.series_id = s.id)",
    )
    .bind(org_id)
    .bind(asset_id)
    .fetch_all(pool)
    .await?;
    let mut tags = Tags::new();
    for r in rows {
        let columns = crate::block::decode(&r.try_get::<Vec<u8>, _>("data")?)?;
        if let Some(last) = columns.iter().last() {
            tags.insert(r.try_get("tag_name")?, last);
        }
    }
    Ok(tags)
}
