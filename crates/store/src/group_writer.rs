//! Group commit for small writes that arrive together: one task takes every job queued behind
//! the first (up to a bound), writes them in one transaction (one fsync for all), then answers
//! each caller, who waits until its write is durable. The audit writer and the heartbeat writer
//! are two kinds of group ([`Group`]).

use std::future::Future;
use tokio::sync::{mpsc, oneshot};

use crate::database::Database;
use crate::error::{Result, StoreError};

/// A kind of job written in groups.
pub(crate) trait Group: 'static {
    type Job: Send + 'static;
    /// What each job's caller gets back (the job's own outcome within a written group).
    type Answer: Send + 'static;
    /// Names the writer in errors and logs ("audit", "heartbeat").
    const NAME: &'static str;
    /// Jobs that may wait for the writer before callers wait to queue.
    const QUEUE: usize;
    /// Jobs per transaction at most.
    const PER_TX: usize;
    /// Writes `jobs` in one transaction; an answer per job, in order.
    fn write(
        db: &Database,
        jobs: &[Self::Job],
    ) -> impl Future<Output = Result<Vec<Self::Answer>>> + Send;
}

type Reply<G> = oneshot::Sender<std::result::Result<<G as Group>::Answer, String>>;

/// A writer's queue.
pub(crate) type Queue<G> = mpsc::Sender<(<G as Group>::Job, Reply<G>)>;

/// Starts the writer task of `G` on `db` and returns its queue.
pub(crate) fn spawn<G: Group>(db: Database) -> Queue<G> {
    let (tx, rx) = mpsc::channel(G::QUEUE);
    tokio::spawn(run::<G>(db, rx));
    tx
}

/// Queues a job and waits until it is durable.
pub(crate) async fn write<G: Group>(queue: &Queue<G>, job: G::Job) -> Result<G::Answer> {
    let (reply, answer) = oneshot::channel();
    let gone = || StoreError::Writer(format!("the {} writer stopped before answering", G::NAME));
    queue.send((job, reply)).await.map_err(|_| gone())?;
    answer
        .await
        .map_err(|_| gone())?
        .map_err(|e| StoreError::Writer(format!("{} write failed: {e}", G::NAME)))
}

/// Writes every job queued behind the first in one transaction, then answers each.
async fn run<G: Group>(db: Database, mut rx: mpsc::Receiver<(G::Job, Reply<G>)>) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first.0];
        let mut replies = vec![first.1];
        while jobs.len() < G::PER_TX {
            match rx.try_recv() {
                Ok((job, reply)) => {
                    jobs.push(job);
                    replies.push(reply);
                }
                Err(_) => break,
            }
        }
        match G::write(&db, &jobs).await {
            Ok(answers) => {
                for (reply, answer) in replies.into_iter().zip(answers) {
                    let _ = reply.send(Ok(answer));
                }
            }
            Err(e) => {
                let e = plantd_model::error_chain(&e);
                tracing::error!(error = %e, writer = G::NAME, jobs = jobs.len(), "could not write a group");
                for reply in replies {
                    let _ = reply.send(Err(e.clone()));
                }
            }
        }
    }
}
