//! Open WebSocket connections per organization, for the tier's connection limit (SPEC 8.2).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct StreamSlots {
    per_org: Mutex<HashMap<String, u64>>,
}

/// A taken slot, released when the socket task ends (or the upgrade never happens).
pub struct Slot {
    slots: Arc<StreamSlots>,
    org_id: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut m = self.slots.per_org.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.org_id) {
            *n = n.saturating_sub(1);
        }
    }
}

impl StreamSlots {
    /// A slot of `org_id` unless `limit` are taken.
    pub fn take(self: &Arc<Self>, org_id: &str, limit: Option<u64>) -> Option<Slot> {
        let mut m = self.per_org.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(org_id.to_string()).or_insert(0);
        if limit.is_some_and(|l| *n >= l) {
            return None;
        }
        *n += 1;
        Some(Slot {
            slots: self.clone(),
            org_id: org_id.to_string(),
        })
    }

    /// Open connections, every organization's.
    pub fn total(&self) -> u64 {
        self.per_org
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .sum()
    }
}
