//! Waiting for what happens in the background (connectors, workers, deliveries): poll until a
//! condition holds, with a deadline that only keeps a broken build from hanging.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `f` every 250 ms until it returns something, for at most `secs`.
pub async fn wait_for<T, F, Fut>(what: &str, secs: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A name no other test of this run uses: the process id and the time in nanoseconds.
pub fn unique_name() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    )
}

/// A new directory under the system's temporary directory, named after `what`.
pub fn temp_dir(what: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("plantd-test-{what}-{}", unique_name()));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}
