//! The heartbeat writer: heartbeats of many devices, arriving together (a fleet's devices
//! started together send theirs in the same second), are written in one transaction by the
//! group writer (`group_writer.rs`), each device still waiting until its heartbeat is durable.
//! One transaction per heartbeat held SQLite's single writer for over a second when 5,000
//! devices reported at once, and every ingest commit waited behind them (docs/benchmarks.md,
//! "Fleet").

use plantd_model::Timestamp;

use crate::database::Database;
use crate::error::Result;
use crate::group_writer::{Group, Queue};

/// A device's heartbeat to store: org, device, figures (JSON text), firmware version, time.
pub(crate) struct Heartbeat {
    pub org_id: String,
    pub device_id: String,
    pub figures: String,
    pub firmware_version: Option<String>,
    pub at: Timestamp,
}

/// Heartbeats, written in groups (`group_writer.rs`); each answer says whether the device
/// was there.
pub(crate) struct HeartbeatGroup;

/// The heartbeat writer's queue.
pub(crate) type HeartbeatQueue = Queue<HeartbeatGroup>;

impl Group for HeartbeatGroup {
    type Job = Heartbeat;
    type Answer = bool;
    const NAME: &'static str = "heartbeat";
    const QUEUE: usize = 4096;
    const PER_TX: usize = 1000;

    async fn write(db: &Database, jobs: &[Heartbeat]) -> Result<Vec<bool>> {
        let mut tx = db.begin_write().await?;
        let mut found = Vec::with_capacity(jobs.len());
        for h in jobs {
            let done = sqlx::query(
                "UPDATE devices SET heartbeat = $1, heartbeat_at = $2, \
                 firmware_version = COALESCE($3, firmware_version) WHERE org_id = $4 AND id = $5",
            )
            .bind(h.figures.as_str())
            .bind(h.at.millis())
            .bind(h.firmware_version.as_deref())
            .bind(h.org_id.as_str())
            .bind(h.device_id.as_str())
            .execute(&mut *tx)
            .await?;
            found.push(done.rows_affected() > 0);
        }
        tx.commit().await?;
        Ok(found)
    }
}
