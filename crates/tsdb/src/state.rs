//! What the ingest writer, the sealer and the readers share: the store, the retention settings,
//! the series ids by name, the latest values, the storage counts, the sealer's wake-up and
//! whether the upgrade in place is done.

use foldhash::HashMap;
use plantd_store::Store;
use std::sync::{Arc, Mutex};

use crate::latest::LatestCache;
use crate::retention::Retention;
use crate::storage::StorageUsage;

/// Series ids by (organization, asset, tag), with the data source each is linked to.
pub(crate) type SeriesKey = (String, String, String);
/// A series' id and the data source it is linked to.
pub(crate) type SeriesEntry = (i64, Option<String>);

pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) retention: Retention,
    pub(crate) series: Mutex<HashMap<SeriesKey, SeriesEntry>>,
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
}
