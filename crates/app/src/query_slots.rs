//! How many BI queries each organization runs at once on this node: a query takes a slot for
//! as long as it runs (the guard gives it back, also when the query is cancelled).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub(crate) struct QuerySlots {
    running: Arc<Mutex<HashMap<String, u32>>>,
}

/// A taken slot, given back when dropped.
pub(crate) struct Slot {
    running: Arc<Mutex<HashMap<String, u32>>>,
    org_id: String,
}

impl QuerySlots {
    /// Takes a slot of the organization when fewer than `max` of its queries run.
    pub(crate) fn take(&self, org_id: &str, max: u32) -> Option<Slot> {
        let mut running = self.running.lock().expect("query slots");
        let n = running.entry(org_id.to_string()).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Slot {
            running: self.running.clone(),
            org_id: org_id.to_string(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut running = self.running.lock().expect("query slots");
        if let Some(n) = running.get_mut(&self.org_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                running.remove(&self.org_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_comes_back_when_its_query_ends() {
        let slots = QuerySlots::default();
        let a = slots.take("o", 2).expect("first");
        let _b = slots.take("o", 2).expect("second");
        assert!(slots.take("o", 2).is_none());
        assert!(
            slots.take("other", 2).is_some(),
            "organizations count apart"
        );
        drop(a);
        assert!(slots.take("o", 2).is_some());
    }
}
