//! The heartbeat writer: heartbeats of many devices, arriving together (a fleet's devices
//! started together send theirs in the same second), are written by one task in one transaction,
//! each device still waiting until its heartbeat is durable. One transaction per heartbeat held
//! SQLite's single writer for over a second when 5,000 devices reported at once, and every
//! ingest commit waited behind them (docs/benchmarks.md, "Fleet").

use plantd_model::Timestamp;

use crate::database::Database;
use crate::error::{Result, StoreError};

/// A device's heartbeat to store: org, device, figures (JSON text), firmware version, time.
pub(crate) struct Heartbeat {
    pub org_id: String,
    pub device_id: String,
    pub figures: String,
    pub firmware_version: Option<String>,
    pub at: Timestamp,
}

pub(crate) type Job = (Heartbeat, tokio::sync::oneshot::Sender<Outcome>);

/// What a job's write came to: stored, no such device, or the group's failure.
pub(crate) enum Outcome {
    Stored,
    NoDevice,
    Failed(String),
}

/// The heartbeat writer's queue.
pub(crate) type HeartbeatQueue = tokio::sync::mpsc::Sender<Job>;

/// Heartbeats that may wait for the writer before devices wait to queue.
const QUEUE: usize = 4096;
/// Heartbeats per transaction at most.
const PER_TX: usize = 1000;

/// Starts the writer task on `db` and returns its queue.
pub(crate) fn spawn(db: Database) -> HeartbeatQueue {
    let (tx, rx) = tokio::sync::mpsc::channel(QUEUE);
    tokio::spawn(run(db, rx));
    tx
}

/// Queues a heartbeat and waits until it is durable; `NotFound` when the device is gone.
pub(crate) async fn write(queue: &HeartbeatQueue, h: Heartbeat) -> Result<()> {
    let (reply, outcome) = tokio::sync::oneshot::channel();
    let gone = || StoreError::Writer("the heartbeat writer stopped before answering".into());
    queue.send((h, reply)).await.map_err(|_| gone())?;
    match outcome.await.map_err(|_| gone())? {
        Outcome::Stored => Ok(()),
        Outcome::NoDevice => Err(StoreError::NotFound),
        Outcome::Failed(e) => Err(StoreError::Writer(format!("heartbeat write failed: {e}"))),
    }
}

/// Writes every heartbeat queued behind the first in one transaction, then answers each.
async fn run(db: Database, mut rx: tokio::sync::mpsc::Receiver<Job>) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < PER_TX {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        match write_group(&db, &jobs).await {
            Ok(found) => {
                for ((_, reply), found) in jobs.into_iter().zip(found) {
                    let _ = reply.send(if found {
                        Outcome::Stored
                    } else {
                        Outcome::NoDevice
                    });
                }
            }
            Err(e) => {
                let e = plantd_model::error_chain(&e);
                tracing::error!(error = %e, heartbeats = jobs.len(), "could not write device heartbeats");
                for (_, reply) in jobs {
                    let _ = reply.send(Outcome::Failed(e.clone()));
                }
            }
        }
    }
}

/// Stores the group's heartbeats; whether each device was there.
async fn write_group(db: &Database, jobs: &[Job]) -> Result<Vec<bool>> {
    let mut tx = db.begin_write().await?;
    let mut found = Vec::with_capacity(jobs.len());
    for (h, _) in jobs {
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
