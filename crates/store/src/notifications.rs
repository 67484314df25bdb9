//! Alert notifications: an organization's settings (email recipients, Slack incoming-webhook
//! URL), the outbox of alert events, and the email/Slack delivery log.
//!
//! Every committed alert change leaves a row in `alert_events` (written in the same transaction,
//! see `alerts.rs`). A dispatcher takes each row and, in one transaction, deletes it and queues
//! what it calls for: a delivery per subscribed webhook and a notification per channel. So no
//! committed change goes unannounced, none is announced twice, and several nodes may dispatch
//! side by side (the delete decides who does).

use plantd_model::event::EventType;
use plantd_model::{Timestamp, new_id};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::{Result, Store, event_column};

/// An organization's notification settings (defaults: nobody, no Slack).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NotificationSettings {
    pub email_recipients: Vec<String>,
    pub slack_webhook_url: Option<String>,
    pub updated_at: Option<Timestamp>,
}

/// A committed alert change waiting to be dispatched.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertEvent {
    pub id: String,
    pub org_id: String,
    pub alert_id: String,
    /// `None` for an alert created through the API (it has its own channels).
    pub rule_id: Option<String>,
    pub event: EventType,
    /// The alert as JSON, as it was after the change.
    pub payload: String,
    pub created_at: Timestamp,
}

/// A notification to queue: pending, or failed at once with `error` (nothing to send it with).
#[derive(Clone, Debug, PartialEq)]
pub struct NewNotification {
    pub channel: String,
    /// Email: the recipients, comma-separated; Slack: the URL posted to.
    pub target: String,
    pub subject: String,
    pub body: String,
    pub error: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    pub id: String,
    pub org_id: String,
    pub alert_id: String,
    pub event: EventType,
    pub channel: String,
    pub target: String,
    pub subject: String,
    pub body: String,
    /// pending, delivered or failed
    pub status: String,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub next_attempt_at: Timestamp,
    pub created_at: Timestamp,
    pub delivered_at: Option<Timestamp>,
}

/// Filters of the notification log.
#[derive(Clone, Debug, Default)]
pub struct NotificationFilter {
    pub alert_id: Option<String>,
    pub channel: Option<String>,
    pub status: Option<String>,
}

fn notification_from_row(row: &AnyRow) -> Result<Notification> {
    Ok(Notification {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        alert_id: row.try_get("alert_id")?,
        event: event_column(row, "event")?,
        channel: row.try_get("channel")?,
        target: row.try_get("target")?,
        subject: row.try_get("subject")?,
        body: row.try_get("body")?,
        status: row.try_get("status")?,
        attempts: row.try_get("attempts")?,
        last_error: row.try_get("last_error")?,
        next_attempt_at: Timestamp::from_millis(row.try_get("next_attempt_at")?),
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        delivered_at: row
            .try_get::<Option<i64>, _>("delivered_at")?
            .map(Timestamp::from_millis),
    })
}

impl Store {
    pub async fn notification_settings(&self, org_id: &str) -> Result<NotificationSettings> {
        let row = sqlx::query("SELECT * FROM notification_settings WHERE org_id = $1")
            .bind(org_id)
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else {
            return Ok(NotificationSettings::default());
        };
        let recipients: String = row.try_get("email_recipients")?;
        Ok(NotificationSettings {
            email_recipients: serde_json::from_str(&recipients)?,
            slack_webhook_url: row.try_get("slack_webhook_url")?,
            updated_at: Some(Timestamp::from_millis(row.try_get("updated_at")?)),
        })
    }

    pub async fn put_notification_settings(
        &self,
        org_id: &str,
        email_recipients: &[String],
        slack_webhook_url: Option<&str>,
    ) -> Result<NotificationSettings> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO notification_settings (org_id, email_recipients, slack_webhook_url, updated_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (org_id) DO UPDATE SET \
             email_recipients = excluded.email_recipients, slack_webhook_url = excluded.slack_webhook_url, \
             updated_at = excluded.updated_at",
        )
        .bind(org_id)
        .bind(serde_json::to_string(email_recipients).unwrap_or_default())
        .bind(slack_webhook_url)
        .bind(Timestamp::now().millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.notification_settings(org_id).await
    }

    /// Alert changes in the outbox, not yet handed to webhooks and notifications.
    pub async fn outbox_depth(&self) -> Result<u64> {
        let n: i64 = sqlx::query("SELECT COUNT(*) AS n FROM alert_events")
            .fetch_one(self.pool())
            .await?
            .try_get("n")?;
        Ok(n as u64)
    }

    /// Webhook deliveries and notifications still to be sent (pending, retries included).
    pub async fn pending_deliveries(&self) -> Result<(u64, u64)> {
        let mut counts = [0u64; 2];
        for (i, table) in ["webhook_deliveries", "notifications"].iter().enumerate() {
            let sql = format!("SELECT COUNT(*) AS n FROM {table} WHERE status = 'pending'");
            let n: i64 = sqlx::query(sqlx::AssertSqlSafe(sql))
                .fetch_one(self.pool())
                .await?
                .try_get("n")?;
            counts[i] = n as u64;
        }
        Ok((counts[0], counts[1]))
    }

    /// The oldest alert events not dispatched yet.
    pub async fn pending_alert_events(&self, limit: i64) -> Result<Vec<AlertEvent>> {
        let rows = sqlx::query("SELECT * FROM alert_events ORDER BY created_at, id LIMIT $1")
            .bind(limit)
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| {
                Ok(AlertEvent {
                    id: row.try_get("id")?,
                    org_id: row.try_get("org_id")?,
                    alert_id: row.try_get("alert_id")?,
                    rule_id: row.try_get("rule_id")?,
                    event: event_column(row, "event")?,
                    payload: row.try_get("payload")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            })
            .collect()
    }

    /// Takes `event` out of the outbox and, in the same transaction, queues a delivery for
    /// every webhook of the organization subscribed to it (`payload` makes its body from the
    /// delivery id) and the given notifications. `false`: another dispatcher took it first.
    pub async fn dispatch_alert_event(
        &self,
        event: &AlertEvent,
        payload: impl Fn(&str) -> String,
        notifications: &[NewNotification],
    ) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let taken = sqlx::query("DELETE FROM alert_events WHERE id = $1")
            .bind(&event.id)
            .execute(&mut *tx)
            .await?;
        if taken.rows_affected() == 0 {
            return Ok(false);
        }
        crate::webhooks::queue_deliveries(&mut tx, &event.org_id, event.event, payload).await?;
        let now = Timestamp::now().millis();
        for n in notifications {
            sqlx::query(
                "INSERT INTO notifications (id, org_id, alert_id, event, channel, target, subject, body, status, attempts, \
                 last_error, next_attempt_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, $10, $11, $12)",
            )
            .bind(new_id())
            .bind(&event.org_id)
            .bind(&event.alert_id)
            .bind(event.event.as_str())
            .bind(&n.channel)
            .bind(&n.target)
            .bind(&n.subject)
            .bind(&n.body)
            .bind(if n.error.is_some() { "failed" } else { "pending" })
            .bind(n.error.as_deref())
            .bind(now)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Pending rows of `table` due by `now`, each claimed for `lease_ms` (an optimistic update
    /// of `next_attempt_at`, so that no other sender takes it meanwhile).
    pub(crate) async fn claim_due(
        &self,
        table: &'static str,
        now: Timestamp,
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<AnyRow>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT * FROM {table} WHERE status = 'pending' AND next_attempt_at <= $1 \
             ORDER BY next_attempt_at LIMIT $2"
        )))
        .bind(now.millis())
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        let mut claimed = Vec::new();
        for row in rows {
            let id: String = row.try_get("id")?;
            let due: i64 = row.try_get("next_attempt_at")?;
            let mut tx = self.begin_write().await?;
            let won = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE {table} SET next_attempt_at = $1 WHERE id = $2 AND next_attempt_at = $3 AND status = 'pending'"
            )))
            .bind(now.millis() + lease_ms)
            .bind(&id)
            .bind(due)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            if won.rows_affected() == 1 {
                claimed.push(row);
            }
        }
        Ok(claimed)
    }

    /// Pending notifications due by `now`, claimed for `lease_ms`.
    pub async fn claim_due_notifications(
        &self,
        now: Timestamp,
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<Notification>> {
        self.claim_due("notifications", now, lease_ms, limit)
            .await?
            .iter()
            .map(notification_from_row)
            .collect()
    }

    /// Records an attempt: `Ok` delivered; `Err((error, retry_at))` failed, to be tried again
    /// at `retry_at`, or given up when `None`.
    pub async fn record_notification_attempt(
        &self,
        id: &str,
        outcome: std::result::Result<(), (String, Option<Timestamp>)>,
    ) -> Result<()> {
        let now = Timestamp::now().millis();
        let mut tx = self.begin_write().await?;
        match outcome {
            Ok(()) => sqlx::query(
                "UPDATE notifications SET status = 'delivered', attempts = attempts + 1, last_error = NULL, \
                 delivered_at = $1 WHERE id = $2",
            )
            .bind(now)
            .bind(id)
            .execute(&mut *tx)
            .await?,
            Err((error, retry_at)) => sqlx::query(
                "UPDATE notifications SET status = $1, attempts = attempts + 1, last_error = $2, \
                 next_attempt_at = $3 WHERE id = $4",
            )
            .bind(if retry_at.is_some() { "pending" } else { "failed" })
            .bind(error)
            .bind(retry_at.map_or(now, |t| t.millis()))
            .bind(id)
            .execute(&mut *tx)
            .await?,
        };
        tx.commit().await?;
        Ok(())
    }

    /// An organization's notifications, newest first, and how many match.
    pub async fn notifications(
        &self,
        org_id: &str,
        f: &NotificationFilter,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<Notification>, u64)> {
        let mut cond = String::from("org_id = $1");
        let mut values = Vec::new();
        for (column, value) in [
            ("alert_id", &f.alert_id),
            ("channel", &f.channel),
            ("status", &f.status),
        ] {
            if let Some(v) = value {
                values.push(v.clone());
                cond.push_str(&format!(" AND {column} = ${}", values.len() + 1));
            }
        }
        let bind = |sql: String| {
            values.iter().fold(
                sqlx::query(sqlx::AssertSqlSafe(sql)).bind(org_id.to_string()),
                |q, v| q.bind(v.clone()),
            )
        };
        let total: i64 = bind(format!(
            "SELECT COUNT(*) AS n FROM notifications WHERE {cond}"
        ))
        .fetch_one(self.pool())
        .await?
        .try_get("n")?;
        let rows = bind(format!(
            "SELECT * FROM notifications WHERE {cond} ORDER BY created_at DESC, id DESC LIMIT {limit} OFFSET {offset}"
        ))
        .fetch_all(self.pool())
        .await?;
        Ok((
            rows.iter()
                .map(notification_from_row)
                .collect::<Result<_>>()?,
            total as u64,
        ))
    }
}
