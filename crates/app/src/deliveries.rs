//! The delivery worker: announces alert changes to the outside, never on the ingest path.
//!
//! 1. Dispatch: every committed alert change left a row in the outbox (`alert_events`, written
//!    in the transaction that changed the alert). Each is turned, in one transaction, into a
//!    delivery per subscribed webhook and a notification per channel of the rule (email on
//!    `alert.triggered` and `alert.resolved`, Slack likewise). A channel that cannot be used
//!    (no SMTP relay configured, no recipients, no Slack URL) gives a notification that failed
//!    at once, with the reason, so that the log says why nobody was told.
//! 2. Sending: due webhook deliveries and notifications are claimed (one sender at a time,
//!    across nodes) and sent, up to [`CONCURRENCY`] at once; a failure is retried after 1, 2,
//!    4, ... s (at most [`MAX_RETRY_DELAY`]), [`MAX_ATTEMPTS`] attempts in all, unless it is
//!    permanent (an SMTP 5xx, a Slack URL that is gone).
//!
//! This node's alert changes wake the worker at once (event bus); other nodes' are found
//! within a second.
//!
//! Webhook deliveries are signed (`webhooks::signature`): header `X-Plantd-Signature:
//! t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" with the webhook's secret>`.

use plantd_alerts::channels::{self, Mailer, SendError};
use plantd_model::Timestamp;
use plantd_model::alert::Alert;
use plantd_model::event::EventType;
use plantd_store::{
    AlertEvent, AttemptOutcome, Delivery, NewNotification, Notification, StoreError, Webhook,
};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

use crate::app::App;
use crate::events::Event;
use crate::webhooks::signature;

const WORKER: &str = "deliveries";

/// Attempts per delivery or notification before it is marked failed.
pub const MAX_ATTEMPTS: i64 = 10;
/// Delay after the n-th failed attempt: 2^(n-1) s, at most this.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(600);
/// Sends at once (webhooks and notifications together).
const CONCURRENCY: usize = 16;
/// How long a claimed row is reserved for the sender that claimed it.
const CLAIM_MS: i64 = 120_000;

/// When to try again after failed attempt number `attempt` (from 1); `None`: give up.
fn retry_at(attempt: i64) -> Option<Timestamp> {
    (attempt < MAX_ATTEMPTS).then(|| {
        let delay = Duration::from_secs(1 << (attempt - 1).clamp(0, 20)).min(MAX_RETRY_DELAY);
        Timestamp::from_millis(Timestamp::now().millis() + delay.as_millis() as i64)
    })
}

const NO_SMTP: &str =
    "email is not configured on this server: add an [smtp] section to plantd's configuration";

/// Runs until `stop` turns true.
pub(crate) async fn run(app: App, mut stop: watch::Receiver<bool>) {
    app.workers().register(WORKER);
    let mailer: Result<Arc<Mailer>, String> = match &app.config().smtp {
        None => Err(NO_SMTP.to_string()),
        Some(c) => Mailer::new(c).map(Arc::new).map_err(|e| {
            tracing::error!(error = %e, "SMTP settings unusable; email notifications fail");
            format!("the server's SMTP settings are unusable: {e}")
        }),
    };
    let client = http_client();
    let mut events = app.events().subscribe();
    let mut sending = tokio::task::JoinSet::new();
    loop {
        let round = async {
            dispatch_pending(&app, mailer.as_ref().err()).await?;
            let now = Timestamp::now();
            let free = CONCURRENCY.saturating_sub(sending.len()) as i64;
            for (d, hook) in app
                .store()
                .claim_due_deliveries(now, CLAIM_MS, free)
                .await?
            {
                sending.spawn(send_webhook(app.clone(), client.clone(), d, hook));
            }
            let free = CONCURRENCY.saturating_sub(sending.len()) as i64;
            for n in app
                .store()
                .claim_due_notifications(now, CLAIM_MS, free)
                .await?
            {
                sending.spawn(send_notification(
                    app.clone(),
                    mailer.clone(),
                    client.clone(),
                    n,
                ));
            }
            Ok::<_, StoreError>(())
        };
        match round.await {
            Ok(()) => app.workers().report(WORKER, Ok(())),
            Err(e) => app
                .workers()
                .report(WORKER, Err(plantd_model::error_chain(&e))),
        }
        tokio::select! {
            // A local alert change: dispatch it now.
            _ = next_alert(&mut events) => {}
            // A send finished: room for the next.
            Some(_) = sending.join_next(), if !sending.is_empty() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => break,
        }
    }
    // Sends in flight finish (each within its timeout).
    while sending.join_next().await.is_some() {}
}

/// Returns at this node's next alert change (or when some were missed); never if the bus is
/// gone.
async fn next_alert(events: &mut tokio::sync::broadcast::Receiver<Event>) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match events.recv().await {
            Ok(Event::Alert { .. }) | Err(RecvError::Lagged(_)) => return,
            Ok(_) => {}
            Err(RecvError::Closed) => std::future::pending().await,
        }
    }
}

/// Turns the outbox's alert events into deliveries and notifications, oldest first.
async fn dispatch_pending(app: &App, smtp_problem: Option<&String>) -> Result<(), StoreError> {
    loop {
        let pending = app.store().pending_alert_events(100).await?;
        let n = pending.len();
        let mut failed = None;
        // One event that cannot be dispatched now does not hold up the others.
        for event in pending {
            if let Err(e) = dispatch(app, smtp_problem, &event).await {
                tracing::warn!(event = %event.id, error = %plantd_model::error_chain(&e), "alert event not dispatched; retrying");
                failed = Some(e);
            }
        }
        match failed {
            Some(e) => return Err(e),
            None if n < 100 => return Ok(()),
            None => {}
        }
    }
}

async fn dispatch(
    app: &App,
    smtp_problem: Option<&String>,
    event: &AlertEvent,
) -> Result<(), StoreError> {
    let alert: Alert = serde_json::from_str(&event.payload)?;
    let mut notifications = Vec::new();
    // People are told when an alert fires and when it ends; acknowledging is their own doing.
    if event.event != EventType::AlertAcknowledged {
        let channels = match &event.rule_id {
            // A rule's alerts go to its channels as they are now; a deleted rule's resolutions
            // reach webhooks only: its channels went with it.
            Some(rule_id) => match app.store().alert_rule(&event.org_id, rule_id).await {
                Ok(rule) => rule.notifications,
                Err(StoreError::NotFound) => Vec::new(),
                Err(e) => return Err(e),
            },
            // An alert created through the API names its own channels.
            None => alert.notifications.clone(),
        };
        if channels.iter().any(|c| c == "email" || c == "slack") {
            let settings = app.store().notification_settings(&event.org_id).await?;
            for channel in channels {
                match channel.as_str() {
                    "email" => {
                        let (subject, body) = channels::email_message(event.event, &alert);
                        let error = if let Some(problem) = smtp_problem {
                            Some(problem.clone())
                        } else if settings.email_recipients.is_empty() {
                            Some("no email recipients: set email_recipients with PUT /v1/organizations/current/notifications".to_string())
                        } else {
                            None
                        };
                        notifications.push(NewNotification {
                            channel,
                            target: settings.email_recipients.join(", "),
                            subject,
                            body,
                            error,
                        });
                    }
                    "slack" => {
                        let body = channels::slack_message(event.event, &alert);
                        notifications.push(NewNotification {
                            channel,
                            target: settings.slack_webhook_url.clone().unwrap_or_default(),
                            subject: body["text"].as_str().unwrap_or_default().to_string(),
                            body: body.to_string(),
                            error: settings.slack_webhook_url.is_none().then(|| {
                                "no Slack webhook URL: set slack_webhook_url with PUT /v1/organizations/current/notifications".to_string()
                            }),
                        });
                    }
                    // Webhooks subscribe to events, not rules (queued below for every event).
                    _ => {}
                }
            }
        }
    }
    let dispatched = app
        .store()
        .dispatch_alert_event(
            event,
            |id| {
                json!({"id": id, "event": event.event, "created_at": event.created_at, "data": alert})
                    .to_string()
            },
            &notifications,
        )
        .await?;
    if dispatched {
        for n in notifications.iter().filter(|n| n.error.is_some()) {
            tracing::warn!(alert = %event.alert_id, channel = %n.channel,
                error = n.error.as_deref().unwrap_or_default(), "alert notification not sent");
        }
    }
    Ok(())
}

/// Sends one email or Slack notification and records the attempt.
async fn send_notification(
    app: App,
    mailer: Result<Arc<Mailer>, String>,
    client: reqwest::Client,
    n: Notification,
) {
    let result = match n.channel.as_str() {
        "email" => match &mailer {
            Ok(m) => {
                let to: Vec<String> = n.target.split(", ").map(str::to_string).collect();
                m.send(&to, &n.subject, &n.body, &n.alert_id, n.event).await
            }
            Err(problem) => Err(SendError {
                message: problem.clone(),
                permanent: true,
            }),
        },
        "slack" => channels::post_slack(&client, &n.target, &n.body).await,
        other => Err(SendError {
            message: format!("unknown channel {other}"),
            permanent: true,
        }),
    };
    let attempt = n.attempts + 1;
    let outcome = match result {
        Ok(()) => {
            tracing::info!(notification = %n.id, alert = %n.alert_id, channel = %n.channel, attempt, "alert notification sent");
            Ok(())
        }
        Err(e) => {
            let retry = if e.permanent { None } else { retry_at(attempt) };
            tracing::warn!(notification = %n.id, alert = %n.alert_id, channel = %n.channel, attempt,
                error = %e.message, retrying = retry.is_some(), "alert notification failed");
            Err((e.message, retry))
        }
    };
    if let Err(e) = app
        .store()
        .record_notification_attempt(&n.id, outcome)
        .await
    {
        tracing::warn!(notification = %n.id, error = %plantd_model::error_chain(&e), "notification attempt not recorded");
    }
}

/// How long one attempt may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP client of webhook and Slack posts.
fn http_client() -> reqwest::Client {
    plantd_alerts::tls::install_provider();
    reqwest::Client::builder()
        .timeout(ATTEMPT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("plantd/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
}

/// Posts one webhook delivery, signed, and records the attempt.
async fn send_webhook(app: App, client: reqwest::Client, d: Delivery, hook: Webhook) {
    let t = Timestamp::now().unix_seconds();
    let result = client
        .post(&hook.url)
        .header("content-type", "application/json")
        .header("x-plantd-event", d.event.as_str())
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
    if let Err(e) = app.store().record_attempt(&d.id, outcome).await {
        tracing::warn!(delivery = %d.id, error = %plantd_model::error_chain(&e), "webhook attempt not recorded");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_and_end() {
        let after = |attempt| retry_at(attempt).map(|t| t.millis() - Timestamp::now().millis());
        let near = |got: Option<i64>, want: i64| {
            let got = got.expect("a retry");
            assert!((want - 50..=want).contains(&got), "{got} vs {want}");
        };
        near(after(1), 1_000);
        near(after(2), 2_000);
        near(after(4), 8_000);
        near(after(9), 256_000);
        assert!(after(10).is_none());
        // The cap applies where the doubling passes it.
        assert_eq!(
            Duration::from_secs(1 << 10).min(MAX_RETRY_DELAY),
            MAX_RETRY_DELAY
        );
    }
}
