//! What the ingest writer, the sealer and the readers share: the store, the retention settings,
//! the series ids by name, the latest values, the storage counts, the sealer's wake-up and
//! whether the upgrade in place is done.

use foldhash::HashMap;
use plantd_store::Store;
use std::sync::{Arc, Mutex};

use crate::latest::LatestCache;
use crate::retention::Retention;
use crate::storage::StorageUsage;

/// A series by (organization, asset, tag).
pub(crate) type SeriesKey = (String, String, String);
/// A series' id and the data source it is linked to.
pub(crate) type SeriesEntry = (i64, Option<String>);

/// Series ids by organization, then asset, then tag. Ingest looks up every point's series here
/// (100,000 series at a plant): an organization's map is found once per batch, an asset's once
/// per run of its points (a scan sends an asset's tags together), and a tag is looked up in its
/// asset's small map, which stays in the cache while the asset's points go by. (One map keyed
/// by asset and tag made every point a random access into 100,000 entries: a fifth of the
/// server's time at that scale, docs/benchmarks.md.)
#[derive(Default)]
pub(crate) struct SeriesIds {
    by_org: HashMap<String, HashMap<Box<str>, AssetSeries>>,
}

/// An asset's series by tag name.
pub(crate) type AssetSeries = HashMap<Box<str>, SeriesEntry>;

impl SeriesIds {
    /// An organization's series by asset, if it has any.
    pub(crate) fn of_org(&self, org_id: &str) -> Option<&HashMap<Box<str>, AssetSeries>> {
        self.by_org.get(org_id)
    }

    pub(crate) fn insert(&mut self, (org, asset, tag): SeriesKey, entry: SeriesEntry) {
        self.by_org
            .entry(org)
            .or_default()
            .entry(asset.into_boxed_str())
            .or_default()
            .insert(tag.into_boxed_str(), entry);
    }
}

pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) retention: Retention,
    pub(crate) series: Mutex<SeriesIds>,
    pub(crate) latest: Arc<LatestCache>,
    /// The newest point of each series written so far (SQLite, where this process writes them
    /// all; `i64::MIN`: none), so that a flush probes only series it has not seen.
    pub(crate) newest: Mutex<HashMap<i64, i64>>,
    /// What this process knows of the telemetry log, and the flusher's signals.
    pub(crate) log: crate::log::LogState,
    pub(crate) storage: StorageUsage,
    /// Told after each flush: the sealer looks for head blocks to merge.
    pub(crate) seal_wake: tokio::sync::Notify,
    /// Set once a database of the first storage layout has been converted (see `upgrade`).
    pub(crate) upgraded: tokio::sync::OnceCell<u64>,
    /// Whether ingest also appends to the edge agent's outbox (`outbox.rs`).
    pub(crate) forward: std::sync::atomic::AtomicBool,
    /// The background sealer's passes completed, and what they rewrote (windows sealed, spans
    /// of rollups packed, days compacted), for `/metrics`.
    pub(crate) sealer_passes: std::sync::atomic::AtomicU64,
    pub(crate) sealer_rewrites: std::sync::atomic::AtomicU64,
    /// Decoded columns of compressed blocks that scans read again (`decoded.rs`).
    pub(crate) decoded: crate::decoded::Decoded,
}
