//! Webhook deliveries: each alert event is queued as a delivery row for every subscribed
//! webhook (by the dispatcher in `deliveries.rs`), and posted here, signed; retries follow
//! [`crate::deliveries::retry_at`].
//!
//! Signature: header `X-Plantd-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of
//! "<t>.<body>" with the webhook's secret>`; receivers recompute it and reject old `t` (replay).

use hmac::{Hmac, Mac};
use plantd_model::Timestamp;
use plantd_store::{AttemptOutcome, Delivery, Webhook};
use sha2::Sha256;
use std::time::Duration;

use crate::AppState;
use crate::deliveries::retry_at;

/// How long one attempt may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// The signature header's value for `body` sent at `t` (Unix seconds).
pub fn signature(secret: &str, t: i64, body: &str) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(format!("{t}.{body}").as_bytes());
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// The HTTP client of webhook and Slack posts.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(ATTEMPT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("plantd/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
}

/// Posts one delivery and records the attempt.
pub(crate) async fn send(state: AppState, client: reqwest::Client, d: Delivery, hook: Webhook) {
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
    let retry_at = retry_at(attempt);
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
