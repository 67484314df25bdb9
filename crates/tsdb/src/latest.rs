//! Latest value per tag of an asset: from memory where this process sees every write (SQLite),
//! else from the database. Memory entries are filled from the database on first read and kept
//! current by ingest.

use plantd_model::Timestamp;
use plantd_model::telemetry::{Point, Quality};
use serde::Serialize;
use sqlx::Row;
// foldhash: these maps are read for every point ingested; SipHash cost a fifth of the
// server's time at 100,000 series.
use foldhash::{HashMap, HashMapExt};
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

    /// Forgets the organization's latest values (its points were deleted).
    pub(crate) fn forget_org(&self, org_id: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.assets.retain(|(org, _), _| org != org_id);
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
                // (No copy of the tag's name unless it is new.)
                match tags.get_mut(&p.tag_name) {
                    Some(slot) if ts < slot.0 => {}
                    Some(slot) => *slot = (ts, p.value, p.quality),
                    None => {
                        tags.insert(p.tag_name.clone(), (ts, p.value, p.quality));
                    }
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
        flushed: impl std::future::Future<Output = Result<()>>,
    ) -> Result<Vec<LatestValue>> {
        let all = self
            .read_assets(store, org_id, &[asset_id.to_string()], flushed)
            .await?
            .into_iter()
            .next()
            .map(|(_, values)| values)
            .unwrap_or_default();
        Ok(all
            .into_iter()
            .filter(|v| tags.is_none_or(|wanted| wanted.contains(&v.tag_name)))
            .collect())
    }

    /// The latest value of each tag of each of `assets`, by tag name, in the order of `assets`
    /// (an asset without points has an empty list). Assets not in memory are read from the
    /// database together: one query for the whole organization when there are many. `flushed`
    /// runs before the database is read (the telemetry log is flushed into blocks by it); points
    /// committed from then on reach the entries being read through `observe`.
    pub(crate) async fn read_assets(
        self: &Arc<Self>,
        store: &Store,
        org_id: &str,
        assets: &[String],
        flushed: impl std::future::Future<Output = Result<()>>,
    ) -> Result<Vec<(String, Vec<LatestValue>)>> {
        let cache = self;
        cache.listening.get_or_init(|| {
            store.listen(CHANNEL, cache, cache.alive.subscribe());
        });
        let mut found: HashMap<&str, Tags> = HashMap::with_capacity(assets.len());
        let mut missing: Vec<&str> = Vec::new();
        let generation = {
            let mut inner = cache.inner.lock().unwrap_or_else(|p| p.into_inner());
            let generation = cache.generation.load(Ordering::Acquire);
            let trusted = cache.trusted.load(Ordering::Acquire);
            let mut key = (org_id.to_string(), String::new());
            for asset in assets {
                key.1.clone_from(asset);
                match inner.assets.get(&key).filter(|_| trusted) {
                    Some(tags) => {
                        found.insert(asset, tags.clone());
                    }
                    None if !found.contains_key(asset.as_str())
                        && !missing.contains(&asset.as_str()) =>
                    {
                        inner.loading.entry(key.clone()).or_default().0 += 1;
                        missing.push(asset);
                    }
                    None => {}
                }
            }
            generation
        };
        if !missing.is_empty() {
            let loaded = match flushed.await {
                Ok(()) => load(store.pool(), org_id, &missing).await,
                Err(e) => Err(e),
            };
            let mut inner = cache.inner.lock().unwrap_or_else(|p| p.into_inner());
            let keep = cache.trusted.load(Ordering::Acquire)
                && cache.generation.load(Ordering::Acquire) == generation;
            let mut loaded = match loaded {
                Ok(loaded) => loaded,
                Err(e) => {
                    for asset in &missing {
                        done_loading(&mut inner, org_id, asset);
                    }
                    return Err(e);
                }
            };
            for asset in missing {
                let meanwhile = done_loading(&mut inner, org_id, asset);
                let mut tags = loaded.remove(asset).unwrap_or_default();
                merge(&mut tags, &meanwhile);
                if keep {
                    let entry = inner
                        .assets
                        .entry((org_id.to_string(), asset.to_string()))
                        .or_default();
                    merge(entry, &tags);
                    tags = entry.clone();
                }
                found.insert(asset, tags);
            }
        }
        Ok(assets
            .iter()
            .map(|asset| {
                let mut values: Vec<LatestValue> = found
                    .get(asset.as_str())
                    .into_iter()
                    .flatten()
                    .map(|(tag_name, (ts, value, quality))| LatestValue {
                        tag_name: tag_name.clone(),
                        value: *value,
                        timestamp: Timestamp::from_millis(*ts),
                        quality: *quality,
                    })
                    .collect();
                values.sort_by(|a, b| a.tag_name.cmp(&b.tag_name));
                (asset.clone(), values)
            })
            .collect())
    }
}

/// Ends one read's loading of an asset: what this node's ingest committed meanwhile.
fn done_loading(inner: &mut Inner, org_id: &str, asset: &str) -> Tags {
    let key = (org_id.to_string(), asset.to_string());
    match inner.loading.get_mut(&key) {
        Some((readers, tags)) if *readers > 1 => {
            *readers -= 1;
            tags.clone()
        }
        _ => inner
            .loading
            .remove(&key)
            .map(|(_, t)| t)
            .unwrap_or_default(),
    }
}

/// Above this many assets to read, one query reads the whole organization's latest values.
const ASSETS_BY_NAME: usize = 16;

/// The latest value of each tag of `assets`, from the database: the last point of each
/// series' last block.
async fn load(
    pool: &sqlx::AnyPool,
    org_id: &str,
    assets: &[&str],
) -> Result<HashMap<String, Tags>> {
    macro_rules! last_block {
        ($asset:literal) => {
            concat!(
                "SELECT s.asset_id, s.tag_name, b.data FROM telemetry_series s \
                 JOIN telemetry_block b ON b.series_id = s.id \
                 WHERE s.org_id = $1 ",
                $asset,
                " AND b.start_ts = \
                 (SELECT MAX(m.start_ts) FROM telemetry_block m WHERE m.series_id = s.id)"
            )
        };
    }
    let mut rows = Vec::new();
    if assets.len() > ASSETS_BY_NAME {
        rows = sqlx::query(last_block!(""))
            .bind(org_id)
            .fetch_all(pool)
            .await?;
    } else {
        for asset in assets {
            rows.extend(
                sqlx::query(last_block!("AND s.asset_id = $2"))
                    .bind(org_id)
                    .bind(*asset)
                    .fetch_all(pool)
                    .await?,
            );
        }
    }
    let mut out: HashMap<String, Tags> = HashMap::new();
    for r in rows {
        let columns = crate::block::decode(&r.try_get::<Vec<u8>, _>("data")?)?;
        if let Some(last) = columns.iter().last() {
            out.entry(r.try_get("asset_id")?)
                .or_default()
                .insert(r.try_get("tag_name")?, last);
        }
    }
    Ok(out)
}
