//! PostgreSQL change notifications between API nodes: a listener task per in-memory cache,
//! which hears `NOTIFY <channel>` from every node's writes and tells the cache.
//!
//! While the listener is not subscribed (connecting, or after losing its connection), the
//! cache is told to distrust itself; once subscribed, every later write is heard, so the cache
//! starts empty and trusted.

use std::sync::{Arc, Weak};
use std::time::Duration;

/// An in-memory cache kept current by notifications.
pub trait NotifyTarget: Send + Sync + 'static {
    /// Forget everything; trust the cache again only if `trusted`.
    fn reset(&self, trusted: bool);
    /// A write on some node sent `payload`.
    fn notified(&self, payload: &str);
}

/// Listens on `channel` for as long as `target` lives (and `alive` has not been dropped).
pub fn spawn_listener<T: NotifyTarget>(
    url: String,
    channel: &'static str,
    target: &Arc<T>,
    mut alive: tokio::sync::watch::Receiver<()>,
) {
    let target: Weak<T> = Arc::downgrade(target);
    tokio::spawn(async move {
        loop {
            let Some(t) = target.upgrade() else { return };
            t.reset(false);
            drop(t);
            let mut listener = match sqlx::postgres::PgListener::connect(&url).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(error = %e, channel, "change listener cannot connect; cache bypassed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if let Err(e) = listener.listen(channel).await {
                tracing::warn!(error = %e, channel, "change listener cannot LISTEN; cache bypassed");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            // Subscribed: from now on every write is heard, so an empty cache may be trusted.
            match target.upgrade() {
                Some(t) => t.reset(true),
                None => return,
            }
            loop {
                let received = tokio::select! {
                    r = listener.try_recv() => r,
                    _ = alive.changed() => return,
                };
                match received {
                    Ok(Some(n)) => match target.upgrade() {
                        Some(t) => t.notified(n.payload()),
                        None => return,
                    },
                    // Connection lost (None) or broken (Err): notifications may have been missed.
                    Ok(None) | Err(_) => break,
                }
            }
            tracing::warn!(channel, "change listener lost its connection; reconnecting");
        }
    });
}
