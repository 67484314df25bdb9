//! Webhook deliveries: alert events from the event bus are queued as delivery rows for every
//! subscribed webhook, and a sender posts them, signed, retrying with backoff. Delivery never
//! runs on the ingest path: queueing happens in this worker, after the event.
//!
//! Signature: header `X-Plantd-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of
//! "<t>.<body>" with the webhook's secret>`; receivers recompute it and reject old `t` (replay).

use hmac::{Hmac, Mac};
use plantd_model::Timestamp;
use plantd_store::{AttemptOutcome, Delivery, Webhook};
use serde_json::json;
use sha2::Sha256;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

use crate::AppState;
use crate::events::Event;

pub(crate) const WORKER: &str = "webhooks";

/// Attempts per delivery before it is marked failed.
pub const MAX_ATTEMPTS: i64 = 10;
/// Delay after the n-th failed attempt: 2^(n-1) s, at most this.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(600);
/// How long one attempt may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Deliveries sent at once.
const CONCURRENCY: usize = 16;

/// The signature header's value for `body` sent at `t` (Unix seconds).
pub fn signature(secret: &str, t: i64, body: &str) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(format!("{t}.{body}").as_bytes());
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(ATTEMPT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("plantd-webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
}

/// Runs until `stop` turns true: queues alert events, sends what is due.
pub(crate) async fn run(state: AppState, mut stop: watch::Receiver<bool>) {
    state.workers.register(WORKER);
    let due = Arc::new(Notify::new());
    let queue = tokio::spawn(queue_events(state.clone(), due.clone()));
    let client = client();
    let mut sending = tokio::task::JoinSet::new();
    loop {
        match state
            .store
            .claim_due_deliveries(Timestamp::now(), 60_000, CONCURRENCY as i64)
            .await
        {
            Ok(batch) => {
                state.workers.report(WORKER, Ok(()));
                for (d, hook) in batch {
                    while sending.len() >= CONCURRENCY {
                        sending.join_next().await;
                    }
                    sending.spawn(send(state.clone(), client.clone(), d, hook));
                }
            }
            Err(e) => state.workers.report(WORKER, Err(e.to_string())),
        }
        while sending.try_join_next().is_some() {}
        tokio::select! {
            _ = due.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => break,
        }
    }
    queue.abort();
    // Attempts in flight finish (each within its timeout).
    while sending.join_next().await.is_some() {}
}

async fn queue_events(state: AppState, due: Arc<Notify>) {
    let mut events = state.events.subscribe();
    loop {
        let event = match events.recv().await {
            Ok(e) => e,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                tracing::error!(
                    missed = n,
                    "webhook queue fell behind the event bus; events lost"
                );
                continue;
            }
            Err(_) => return,
        };
        let Event::Alert {
            org_id,
            event,
            alert,
        } = event
        else {
            continue;
        };
        let created_at = Timestamp::now();
        let queued = state
            .store
            .queue_deliveries(&org_id, event, |id| {
                json!({"id": id, "event": event, "created_at": created_at, "data": &*alert})
                    .to_string()
            })
            .await;
        match queued {
            Ok(0) => {}
            Ok(_) => due.notify_one(),
            Err(e) => tracing::error!(error = %e, event, "webhook deliveries not queued"),
        }
    }
}

async fn send(state: AppState, client: reqwest::Client, d: Delivery, hook: Webhook) {
    let t = Timestamp::now().unix_seconds();
    let result = client
        .post(&hook.url)
        .header("content-type", "application/json")
        .header("x-plantd-event", &d.event)
        .header("x-plantd-delivery", &d.id)
        .header("x-plantd-signature", signature(&hook.secret, t, &d.payload))
        .body(d.payload.clone())
        .send()
        .await;
    let attempt = d.attempts + 1;
    let retry_at = (attempt < MAX_ATTEMPTS).then(|| {
        let delay = Duration::from_secs(1 << (attempt - 1).min(20)).min(MAX_RETRY_DELAY);
        Timestamp::from_millis(Timestamp::now().millis() + delay.as_millis() as i64)
    });
    let outcome = match result {
        Ok(r) if r.status().is_success() => AttemptOutcome::Delivered {
            status_code: i64::from(r.status().as_u16()),
        },
        Ok(r) => AttemptOutcome::Failed {
            status_code: Some(i64::from(r.status().as_u16())),
            error: format!("the receiver answered {}", r.status()),
            retry_at,
        },
        Err(e) => AttemptOutcome::Failed {
            status_code: None,
            error: if e.is_timeout() {
                format!("no answer within {} s", ATTEMPT_TIMEOUT.as_secs())
            } else {
                format!("could not post to {}: {e}", hook.url)
            },
            retry_at,
        },
    };
    if let AttemptOutcome::Failed { error, .. } = &outcome {
        tracing::info!(delivery = %d.id, attempt, %error, "webhook delivery failed");
    }
    if let Err(e) = state.store.record_attempt(&d.id, outcome).await {
        tracing::warn!(delivery = %d.id, error = %e, "webhook attempt not recorded");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn signatures_follow_the_documented_recipe() {
        // echo -n '1700000000.{"a":1}' | openssl dgst -sha256 -hmac secret
        assert_eq!(
            super::signature("secret", 1_700_000_000, r#"{"a":1}"#),
            "t=1700000000,v1=49f24e537407743fa4a0242bb63b94b9a47ee99cbbe071ccd8a22550ae411686"
        );
    }
}
