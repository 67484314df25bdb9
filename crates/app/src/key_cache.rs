//! API keys looked up by the hash of their secret, with their organization's tier, trusted for
//! a while so that a request costs no database read for authentication.

use plantd_model::Tier;
use plantd_model::api_key::ApiKey;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Default)]
pub(crate) struct KeyCache {
    entries: Mutex<HashMap<String, (ApiKey, Tier, Instant)>>,
}

impl KeyCache {
    pub(crate) fn get(&self, hash: &str, ttl: Duration) -> Option<(ApiKey, Tier)> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(hash)
            .filter(|(_, _, at)| at.elapsed() < ttl)
            .map(|(k, t, _)| (k.clone(), *t))
    }

    pub(crate) fn put(&self, hash: String, key: ApiKey, tier: Tier) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() > 100_000 {
            entries.clear();
        }
        entries.insert(hash, (key, tier, Instant::now()));
    }

    /// Forgets a key (after revocation or rotation) so the old secret stops working at once.
    pub(crate) fn forget_key(&self, key_id: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|_, (k, _, _)| k.id != key_id);
    }
}
