//! Looked-up credentials trusted for a while, so that a request costs no database read: API
//! keys by the hash of their secret (with their organization's tier), and the licenses and
//! device activations that license keys name. A change made on this node forgets the entries
//! it touches at once; other nodes trust theirs for at most the configured time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries that may be held before the cache starts over.
const MAX_ENTRIES: usize = 100_000;

pub(crate) struct TrustCache<V> {
    inner: Mutex<Entries<V>>,
}

struct Entries<V> {
    map: HashMap<String, (V, Instant)>,
    /// Counts the forgets, so that a value read before one is not stored after it.
    generation: u64,
}

/// When a lookup began, for [`TrustCache::put`]: a value read from the store is kept only if
/// nothing was forgotten since, so a change made meanwhile is never hidden by an older read.
#[derive(Clone, Copy)]
pub(crate) struct Lookup(u64);

impl<V> Default for TrustCache<V> {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Entries {
                map: HashMap::new(),
                generation: 0,
            }),
        }
    }
}

impl<V: Clone> TrustCache<V> {
    fn entries(&self) -> std::sync::MutexGuard<'_, Entries<V>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value under `key` if it was stored less than `ttl` ago; otherwise `Err` with the
    /// lookup to pass to [`TrustCache::put`] after reading the store.
    pub(crate) fn get(&self, key: &str, ttl: Duration) -> Result<V, Lookup> {
        let entries = self.entries();
        match entries.map.get(key) {
            Some((v, at)) if at.elapsed() < ttl => Ok(v.clone()),
            _ => Err(Lookup(entries.generation)),
        }
    }

    /// Keeps `value` under `key`, unless something was forgotten since `lookup` began.
    pub(crate) fn put(&self, lookup: Lookup, key: String, value: V) {
        let mut entries = self.entries();
        if entries.generation != lookup.0 {
            return;
        }
        if entries.map.len() >= MAX_ENTRIES {
            entries.map.clear();
        }
        entries.map.insert(key, (value, Instant::now()));
    }

    /// Forgets every entry `stale` picks (after a change made on this node).
    pub(crate) fn forget(&self, stale: impl Fn(&str, &V) -> bool) {
        let mut entries = self.entries();
        entries.generation += 1;
        entries.map.retain(|k, (v, _)| !stale(k, v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(60);

    #[test]
    fn a_kept_value_is_answered_until_forgotten() {
        let cache = TrustCache::default();
        let lookup = cache.get("a", TTL).unwrap_err();
        cache.put(lookup, "a".into(), 1);
        assert_eq!(cache.get("a", TTL).ok(), Some(1));
        assert!(
            cache.get("a", Duration::ZERO).is_err(),
            "older than the ttl"
        );
        cache.forget(|k, _| k == "a");
        assert!(cache.get("a", TTL).is_err());
    }

    #[test]
    fn a_read_begun_before_a_forget_is_not_kept() {
        let cache = TrustCache::default();
        let before = cache.get("a", TTL).unwrap_err();
        // A change lands (and forgets) while the read of the old value is under way.
        cache.forget(|k, _| k == "a");
        cache.put(before, "a".into(), 1);
        assert!(cache.get("a", TTL).is_err());
        let after = cache.get("a", TTL).unwrap_err();
        cache.put(after, "a".into(), 2);
        assert_eq!(cache.get("a", TTL).ok(), Some(2));
    }
}
