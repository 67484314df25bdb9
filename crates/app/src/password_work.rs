//! Argon2id work of requests (password checks and hashes): at most `password_checks_at_once`
//! computations at once, each holding about 19 MiB, run on threads of their own. Own threads
//! keep that memory reused: spread over the runtime's blocking threads, each thread's allocator
//! arena kept the 19 MiB it had touched, and a burst of logins left hundreds of megabytes
//! behind. A computation that waits more than 5 s for its turn is refused for now (429).

use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{Semaphore, oneshot};

use crate::error::{AppError, AppResult};

/// How long a computation waits for its turn before it is refused.
const QUEUE_WAIT: Duration = Duration::from_secs(5);

type Job = Box<dyn FnOnce() + Send>;

pub(crate) struct PasswordWork {
    /// One per thread: a computation holds one while queued and running.
    turns: Semaphore,
    jobs: mpsc::Sender<Job>,
}

impl PasswordWork {
    /// `threads` threads (at least one), which end when this is dropped.
    pub(crate) fn new(threads: usize) -> Self {
        let threads = threads.max(1);
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..threads {
            let queue = queue.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("plantd-argon2-{i}"))
                .spawn(move || {
                    loop {
                        let job = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start a password thread");
            }
        }
        Self {
            turns: Semaphore::new(threads),
            jobs,
        }
    }

    /// Runs `f` on a password thread once one is free (waiting at most 5 s).
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> AppResult<T> {
        let _turn = match tokio::time::timeout(QUEUE_WAIT, self.turns.acquire()).await {
            Ok(Ok(turn)) => turn,
            _ => {
                metrics::counter!("plantd_password_checks_refused_total").increment(1);
                return Err(AppError::LimitReached {
                    message: "too many password checks are under way; retry in 1 s".into(),
                    retry_after: 1,
                });
            }
        };
        let (done, answer) = oneshot::channel();
        self.jobs
            .send(Box::new(move || {
                let _ = done.send(f());
            }))
            .map_err(|_| {
                AppError::internal(
                    "cannot queue a password computation",
                    "the password threads have stopped",
                )
            })?;
        answer
            .await
            .map_err(|e| AppError::internal("a password computation stopped", e))
    }
}
