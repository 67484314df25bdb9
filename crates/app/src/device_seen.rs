//! When this node last heard from each device, kept in memory and written to the database by
//! the fleet worker: a device's contact is written when the one written before is older than
//! the write interval (`written_every`), at most `MAX_PER_PASS` devices a pass, so that
//! thousands of devices sending a message a second cost a few hundred row updates a second,
//! not one per message. A device this node has not yet seen online is written at once, so that
//! its first contact turns it online without waiting.

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
    /// Devices this node has written as online since it last turned them offline, with the
    /// contact last written.
    online: HashMap<String, Timestamp>,
}

/// Contacts written in one pass at most.
pub const MAX_PER_PASS: usize = 1000;

impl SeenDevices {
    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes a contact; true when it should be written now (this node has not seen the device
    /// online). A contact within `every` of the one last written is not written.
    pub fn saw(
        &self,
        org_id: &str,
        device_id: &str,
        at: Timestamp,
        every: std::time::Duration,
    ) -> bool {
        let mut seen = self.lock();
        let written = seen.online.get(device_id).copied();
        if written.is_some_and(|w| at.millis() - w.millis() < every.as_millis() as i64) {
            return false;
        }
        let entry = seen
            .pending
            .entry(device_id.to_string())
            .or_insert_with(|| (org_id.to_string(), at));
        if entry.1 < at {
            entry.1 = at;
        }
        written.is_none()
    }

    /// Takes up to `MAX_PER_PASS` contacts to write.
    pub fn take(&self) -> Vec<(String, String, Timestamp)> {
        let mut seen = self.lock();
        let keys: Vec<String> = seen.pending.keys().take(MAX_PER_PASS).cloned().collect();
        keys.into_iter()
            .filter_map(|device| {
                let (org, at) = seen.pending.remove(&device)?;
                Some((org, device, at))
            })
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
    pub fn written(&self, contacts: impl IntoIterator<Item = (String, Timestamp)>) {
        self.lock().online.extend(contacts);
    }

    /// The device went offline (or was deleted): its next contact is written at once.
    pub fn forget(&self, device_id: &str) {
        self.lock().online.remove(device_id);
    }
}
