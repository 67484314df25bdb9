//! Request counts per API key, UTC day and endpoint: counted in memory by the request pipeline
//! and written to the database by the usage worker (`workers.rs`), so a request costs no write.

use plantd_model::Timestamp;
use plantd_store::{Store, StoreError};
use std::collections::HashMap;
use std::sync::Mutex;

/// Request counts not yet written to the database.
#[derive(Default)]
pub struct RequestCounter {
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    counts: HashMap<(String, String, String, String), u64>,
    last_used: HashMap<String, Timestamp>,
}

impl RequestCounter {
    pub fn record(&self, key_id: &str, org_id: &str, endpoint: &str, now: Timestamp) {
        let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        *p.counts
            .entry((
                key_id.to_string(),
                org_id.to_string(),
                now.day(),
                endpoint.to_string(),
            ))
            .or_insert(0) += 1;
        p.last_used.insert(key_id.to_string(), now);
    }

    /// Writes pending counts; on failure they are kept for the next attempt.
    pub async fn flush(&self, store: &Store) -> Result<(), StoreError> {
        let taken = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        if taken.counts.is_empty() && taken.last_used.is_empty() {
            return Ok(());
        }
        let rows: Vec<_> = taken
            .counts
            .iter()
            .map(|((k, o, d, e), n)| (k.clone(), o.clone(), d.clone(), e.clone(), *n))
            .collect();
        let used: Vec<_> = taken
            .last_used
            .iter()
            .map(|(k, t)| (k.clone(), *t))
            .collect();
        if let Err(e) = store.record_key_usage(&rows, &used).await {
            let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            for (k, n) in taken.counts {
                *p.counts.entry(k).or_insert(0) += n;
            }
            for (k, t) in taken.last_used {
                let slot = p.last_used.entry(k).or_insert(t);
                *slot = (*slot).max(t);
            }
            return Err(e);
        }
        Ok(())
    }
}
