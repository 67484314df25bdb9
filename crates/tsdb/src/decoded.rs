//! Decoded columns of compressed blocks, kept in memory for scans that read the same blocks
//! again (BI queries: a dashboard refreshed, a query run again in SQL Lab, a report).
//!
//! An entry is keyed by the compressed bytes of its column themselves, so it answers only for
//! those exact bytes: a block rewritten by sealing, compaction or a late point has other bytes
//! and misses; nothing is ever stale and nothing needs invalidating (decoding is a pure function
//! of the bytes). Bounded by bytes (the decoded numbers and their keys), the least recently
//! used out first; timestamps and values each get half the budget. A scan larger than the
//! budget leaves the cache holding its last blocks and gains nothing from it the next time.

use foldhash::fast::RandomState;
use hashlink::LruCache;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The cache's budget unless configured otherwise (`[telemetry] scan_cache_mb`): 256 MiB, the
/// values of about 16,000,000 points with their timestamps.
pub const SCAN_CACHE_BYTES: usize = 256 << 20;

/// Bytes an entry costs beyond its key and numbers (the map's node, the `Arc`'s counts).
const ENTRY_OVERHEAD: usize = 96;

/// A number pco decodes that the cache keeps (timestamps and values).
pub(crate) trait Cached: pco::data_types::Number + Default {
    fn side(cache: &Decoded) -> &Side<Self>;
}

impl Cached for i64 {
    fn side(cache: &Decoded) -> &Side<Self> {
        &cache.ts
    }
}

impl Cached for f64 {
    fn side(cache: &Decoded) -> &Side<Self> {
        &cache.values
    }
}

/// The cache of one process, shared by its scans.
pub(crate) struct Decoded {
    /// Bytes allowed in all (0: off).
    budget: AtomicUsize,
    ts: Side<i64>,
    values: Side<f64>,
    /// Columns answered from memory, and columns decoded while the cache was on.
    hits: AtomicU64,
    misses: AtomicU64,
}

/// What the cache holds and has done, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanCacheStats {
    pub bytes: u64,
    pub hits: u64,
    pub misses: u64,
}

/// One column kind's entries and the bytes they hold.
pub(crate) struct Side<T> {
    entries: Mutex<Entries<T>>,
}

struct Entries<T> {
    map: LruCache<Box<[u8]>, Arc<[T]>, RandomState>,
    bytes: usize,
}

impl<T> Default for Side<T> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(Entries {
                map: LruCache::with_hasher(usize::MAX, RandomState::default()),
                bytes: 0,
            }),
        }
    }
}

fn cost<T>(key: usize, n: usize) -> usize {
    key + n * std::mem::size_of::<T>() + ENTRY_OVERHEAD
}

impl<T> Side<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Entries<T>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn get(&self, key: &[u8]) -> Option<Arc<[T]>> {
        self.lock().map.get(key).cloned()
    }

    fn put(&self, key: &[u8], numbers: Arc<[T]>, limit: usize) {
        let add = cost::<T>(key.len(), numbers.len());
        if add > limit {
            return;
        }
        let mut e = self.lock();
        if let Some(old) = e.map.insert(key.into(), numbers) {
            e.bytes -= cost::<T>(key.len(), old.len());
        }
        e.bytes += add;
        shrink(&mut e, limit);
    }

    fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

fn shrink<T>(e: &mut Entries<T>, limit: usize) {
    while e.bytes > limit {
        match e.map.remove_lru() {
            Some((k, v)) => e.bytes -= cost::<T>(k.len(), v.len()),
            None => break,
        }
    }
}

impl Decoded {
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            budget: AtomicUsize::new(budget),
            ts: Side::default(),
            values: Side::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Sets the bytes the cache may hold, dropping the least recently used entries over it.
    pub(crate) fn set_budget(&self, bytes: usize) {
        self.budget.store(bytes, Ordering::Relaxed);
        shrink(&mut self.ts.lock(), bytes / 2);
        shrink(&mut self.values.lock(), bytes / 2);
    }

    /// Bytes held now (timestamps and values), hits and misses so far.
    pub(crate) fn stats(&self) -> ScanCacheStats {
        ScanCacheStats {
            bytes: (self.ts.bytes() + self.values.bytes()) as u64,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    /// The `n` numbers `part` compresses, appended to `into`: from the cache when it holds
    /// `part`, else decoded (by `decode`, which appends them) and kept.
    pub(crate) fn column<T: Cached>(
        &self,
        part: &[u8],
        n: usize,
        into: &mut Vec<T>,
        decode: impl FnOnce(&[u8], usize, &mut Vec<T>) -> crate::error::Result<()>,
    ) -> crate::error::Result<()> {
        let limit = self.budget.load(Ordering::Relaxed) / 2;
        if limit == 0 {
            return decode(part, n, into);
        }
        let side = T::side(self);
        if let Some(hit) = side.get(part)
            && hit.len() == n
        {
            self.hits.fetch_add(1, Ordering::Relaxed);
            into.extend_from_slice(&hit);
            return Ok(());
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let at = into.len();
        decode(part, n, into)?;
        side.put(part, Arc::from(&into[at..]), limit);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_counting<'a>(
        calls: &'a std::cell::Cell<usize>,
    ) -> impl FnOnce(&[u8], usize, &mut Vec<f64>) -> crate::error::Result<()> + 'a {
        move |part, n, into| {
            calls.set(calls.get() + 1);
            into.extend((0..n).map(|i| f64::from(part[0]) + i as f64));
            Ok(())
        }
    }

    #[test]
    fn a_column_is_decoded_once_and_answered_from_memory_after() {
        let cache = Decoded::new(1 << 20);
        let calls = std::cell::Cell::new(0);
        let (mut a, mut b) = (Vec::new(), vec![-1.0]);
        cache
            .column(&[7, 1, 2], 3, &mut a, decode_counting(&calls))
            .unwrap();
        cache
            .column(&[7, 1, 2], 3, &mut b, decode_counting(&calls))
            .unwrap();
        assert_eq!(calls.get(), 1);
        assert_eq!((cache.stats().hits, cache.stats().misses), (1, 1));
        assert_eq!(a, vec![7.0, 8.0, 9.0]);
        assert_eq!(b, vec![-1.0, 7.0, 8.0, 9.0]);
        // Other bytes (a rewritten block) are other numbers: decoded, never the old entry.
        cache
            .column(&[9, 1, 2], 3, &mut a, decode_counting(&calls))
            .unwrap();
        assert_eq!(calls.get(), 2);
        assert_eq!(&a[3..], &[9.0, 10.0, 11.0]);
    }

    #[test]
    fn the_budget_bounds_the_bytes_held_and_zero_turns_it_off() {
        let per_entry = cost::<f64>(1, 100);
        let cache = Decoded::new(2 * 3 * per_entry);
        let calls = std::cell::Cell::new(0);
        let mut out = Vec::new();
        for k in 0..10u8 {
            cache
                .column(&[k], 100, &mut out, decode_counting(&calls))
                .unwrap();
        }
        // Values get half the budget: the last three columns.
        assert_eq!(cache.stats().bytes as usize, 3 * per_entry);
        cache
            .column(&[9], 100, &mut out, decode_counting(&calls))
            .unwrap();
        assert_eq!(calls.get(), 10);
        cache
            .column(&[0], 100, &mut out, decode_counting(&calls))
            .unwrap();
        assert_eq!(calls.get(), 11);
        cache.set_budget(0);
        assert_eq!(cache.stats().bytes as usize, 0);
        cache
            .column(&[9], 100, &mut out, decode_counting(&calls))
            .unwrap();
        cache
            .column(&[9], 100, &mut out, decode_counting(&calls))
            .unwrap();
        assert_eq!((calls.get(), cache.stats().bytes as usize), (13, 0));
    }
}
