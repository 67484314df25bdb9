//! When this node last heard from each device, kept in memory and written to the database in
//! one transaction every few seconds by the fleet worker, so that thousands of devices sending
//! a message a second cost one write per interval, not one per message. A device this node has
//! not yet seen online is written at once, so that its first contact turns it online without
//! waiting.

use plantd_model::Timestamp;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

#[derive(Default)]
pub struct SeenDevices {
    inner: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    /// Device id → (organization, latest contact) not yet written.
    pending: HashMap<String, (String, Timestamp)>,
    /// Devices this node has written as online since it last turned them offline.
    online: std::collections::HashSet<String>,
}

impl SeenDevices {
    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes a contact; true when it should be written now (this node has not seen the device
    /// online).
    pub fn saw(&self, org_id: &str, device_id: &str, at: Timestamp) -> bool {
        let mut seen = self.lock();
        let entry = seen
            .pending
            .entry(device_id.to_string())
            .or_insert_with(|| (org_id.to_string(), at));
        if entry.1 < at {
            entry.1 = at;
        }
        !seen.online.contains(device_id)
    }

    /// Takes the contacts to write.
    pub fn take(&self) -> Vec<(String, String, Timestamp)> {
        self.lock()
            .pending
            .drain()
            .map(|(device, (org, at))| (org, device, at))
            .collect()
    }

    /// Puts back contacts whose write failed (a newer contact of the meantime wins).
    pub fn put_back(&self, contacts: Vec<(String, String, Timestamp)>) {
        let mut seen = self.lock();
        for (org, device, at) in contacts {
            let entry = seen.pending.entry(device).or_insert((org, at));
            if entry.1 < at {
                entry.1 = at;
            }
        }
    }

    /// The written contacts: these devices are online.
    pub fn written(&self, devices: impl IntoIterator<Item = String>) {
        self.lock().online.extend(devices);
    }

    /// The device went offline (or was deleted): its next contact is written at once.
    pub fn forget(&self, device_id: &str) {
        self.lock().online.remove(device_id);
    }
}
