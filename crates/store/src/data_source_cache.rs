//! Each organization's data sources kept in memory, so that listing them reads no database.
//!
//! The cache is trusted only while every write is sure to invalidate it:
//! - SQLite: one server process owns the database file (`plantd serve` holds a lock next to it),
//!   and every data source write goes through this `Store`, which invalidates after committing.
//! - PostgreSQL: several API nodes may share the database, so every write also sends
//!   `NOTIFY plantd_data_sources, '<org_id>'` inside its transaction, and each node listens. While
//!   the listener is down the cache is bypassed; when it is back the cache starts empty.
//!
//! A read that raced an invalidation does not store what it read (a generation counter), so a
//! stale list never enters the cache.

use plantd_model::data_source::DataSource;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::notify;

pub(crate) const CHANNEL: &str = "plantd_data_sources";

#[derive(Debug)]
pub(crate) struct DataSourceCache {
    orgs: Mutex<HashMap<String, Arc<Vec<DataSource>>>>,
    generation: AtomicU64,
    trusted: AtomicBool,
    /// Dropped with the cache, which ends its listener.
    alive: tokio::sync::watch::Sender<()>,
    /// Bumped on every invalidation, for watchers of data source changes.
    changed: tokio::sync::watch::Sender<u64>,
}

impl DataSourceCache {
    pub(crate) fn new(trusted: bool) -> Self {
        Self {
            orgs: Mutex::default(),
            generation: AtomicU64::new(0),
            trusted: AtomicBool::new(trusted),
            alive: tokio::sync::watch::channel(()).0,
            changed: tokio::sync::watch::channel(0).0,
        }
    }

    pub(crate) fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn announce(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// The cached list and, on a miss, the generation to hand back to [`Self::put`].
    pub(crate) fn get(&self, org_id: &str) -> Result<Arc<Vec<DataSource>>, u64> {
        let generation = self.generation.load(Ordering::Acquire);
        if !self.trusted.load(Ordering::Acquire) {
            return Err(generation);
        }
        let orgs = self.orgs.lock().unwrap_or_else(|p| p.into_inner());
        orgs.get(org_id).cloned().ok_or(generation)
    }

    /// Stores a list read at `generation`, unless something was invalidated since.
    pub(crate) fn put(&self, org_id: &str, generation: u64, list: Arc<Vec<DataSource>>) {
        let mut orgs = self.orgs.lock().unwrap_or_else(|p| p.into_inner());
        if self.trusted.load(Ordering::Acquire)
            && self.generation.load(Ordering::Acquire) == generation
        {
            orgs.insert(org_id.to_string(), list);
        }
    }

    pub(crate) fn invalidate(&self, org_id: &str) {
        let mut orgs = self.orgs.lock().unwrap_or_else(|p| p.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        orgs.remove(org_id);
        drop(orgs);
        self.announce();
    }

    fn reset(&self, trusted: bool) {
        let mut orgs = self.orgs.lock().unwrap_or_else(|p| p.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.trusted.store(trusted, Ordering::Release);
        orgs.clear();
        drop(orgs);
        self.announce();
    }
}

/// Listens for other nodes' data source writes on PostgreSQL until the cache is dropped.
pub(crate) fn spawn_listener(url: String, cache: &Arc<DataSourceCache>) {
    let alive = cache.alive.subscribe();
    notify::spawn_listener(url, CHANNEL, cache, alive);
}

impl notify::NotifyTarget for DataSourceCache {
    fn reset(&self, trusted: bool) {
        DataSourceCache::reset(self, trusted);
    }
    fn notified(&self, payload: &str) {
        self.invalidate(payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_that_raced_an_invalidation_is_not_stored() {
        let cache = DataSourceCache::new(true);
        let generation = cache.get("o").unwrap_err();
        cache.invalidate("o");
        cache.put("o", generation, Arc::new(Vec::new()));
        let generation = cache.get("o").unwrap_err();
        cache.put("o", generation, Arc::new(Vec::new()));
        assert!(cache.get("o").is_ok());
        cache.reset(false);
        assert!(cache.get("o").is_err(), "an untrusted cache is bypassed");
    }
}
