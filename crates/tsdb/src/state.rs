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

/// Series ids by organization, then by asset and tag. Ingest looks up every point's series here
/// (100,000 series at a plant), so an organization's map is found once per batch and a series'
/// key is one allocation (see [`SeriesIds::key`]): a lookup hashes and compares one byte string,
/// not three strings in three places of memory.
#[derive(Default)]
pub(crate) struct SeriesIds {
    by_org: HashMap<String, HashMap<Box<[u8]>, SeriesEntry>>,
}

impl SeriesIds {
    /// The key of (asset, tag) within an organization, written into `buf`: the asset's length,
    /// the asset, the tag (so that no two pairs share a key).
    pub(crate) fn key<'b>(buf: &'b mut Vec<u8>, asset: &str, tag: &str) -> &'b [u8] {
        buf.clear();
        buf.extend_from_slice(&(asset.len() as u64).to_le_bytes());
        buf.extend_from_slice(asset.as_bytes());
        buf.extend_from_slice(tag.as_bytes());
        buf
    }

    /// An organization's series, if it has any.
    pub(crate) fn of_org(&self, org_id: &str) -> Option<&HashMap<Box<[u8]>, SeriesEntry>> {
        self.by_org.get(org_id)
    }

    pub(crate) fn insert(&mut self, (org, asset, tag): SeriesKey, entry: SeriesEntry) {
        let mut buf = Vec::new();
        let key: Box<[u8]> = Self::key(&mut buf, &asset, &tag).into();
        self.by_org.entry(org).or_default().insert(key, entry);
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
}
