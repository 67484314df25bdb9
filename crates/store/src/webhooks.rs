//! Webhook subscriptions and their delivery log. Deliveries are rows: queued when an alert
//! event is dispatched (`notifications.rs`), claimed by one sender at a time (an optimistic
//! update of `next_attempt_at`), and kept with their attempts and last answer.

use plantd_model::event::EventType;
use plantd_model::{Timestamp, new_id};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::rows::touched;
use crate::rows::{OrgTable, delete_in};
use crate::{Result, Store, event_column};

/// Webhooks, oldest first.
const WEBHOOKS: OrgTable = OrgTable {
    name: "webhooks",
    columns: "*",
    order: "created_at, id",
};

#[derive(Clone, Debug, PartialEq)]
pub struct Webhook {
    pub id: String,
    pub org_id: String,
    pub url: String,
    pub events: Vec<EventType>,
    pub secret: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    pub id: String,
    pub org_id: String,
    pub webhook_id: String,
    pub event: EventType,
    pub payload: String,
    /// pending, delivered or failed
    pub status: String,
    pub attempts: i64,
    pub last_status_code: Option<i64>,
    pub last_error: Option<String>,
    pub next_attempt_at: Timestamp,
    pub created_at: Timestamp,
    pub delivered_at: Option<Timestamp>,
}

/// What one attempt came to.
pub enum AttemptOutcome {
    Delivered {
        status_code: i64,
    },
    /// Failed; try again at `retry_at`, or give up when `None`.
    Failed {
        status_code: Option<i64>,
        error: String,
        retry_at: Option<Timestamp>,
    },
}

fn webhook_from_row(row: &AnyRow) -> Result<Webhook> {
    let events: String = row.try_get("events")?;
    Ok(Webhook {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        url: row.try_get("url")?,
        events: serde_json::from_str(&events)?,
        secret: row.try_get("secret")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

fn delivery_from_row(row: &AnyRow) -> Result<Delivery> {
    Ok(Delivery {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        webhook_id: row.try_get("webhook_id")?,
        event: event_column(row, "event")?,
        payload: row.try_get("payload")?,
        status: row.try_get("status")?,
        attempts: row.try_get("attempts")?,
        last_status_code: row.try_get("last_status_code")?,
        last_error: row.try_get("last_error")?,
        next_attempt_at: Timestamp::from_millis(row.try_get("next_attempt_at")?),
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        delivered_at: row
            .try_get::<Option<i64>, _>("delivered_at")?
            .map(Timestamp::from_millis),
    })
}

/// Queues, in the caller's transaction, a delivery of `event` for every webhook of the
/// organization subscribed to it (`payload` makes the body from the delivery id). A change and
/// its deliveries commit together: none is announced that did not happen, none is lost.
pub(crate) async fn queue_deliveries(
    conn: &mut sqlx::AnyConnection,
    org_id: &str,
    event: EventType,
    payload: impl Fn(&str) -> String,
) -> Result<()> {
    let now = Timestamp::now().millis();
    let hooks = sqlx::query("SELECT id, events FROM webhooks WHERE org_id = $1")
        .bind(org_id)
        .fetch_all(&mut *conn)
        .await?;
    for hook in &hooks {
        let events: String = hook.try_get("events")?;
        let events: Vec<EventType> = serde_json::from_str(&events)?;
        if !events.contains(&event) {
            continue;
        }
        let id = new_id();
        sqlx::query(
            "INSERT INTO webhook_deliveries (id, org_id, webhook_id, event, payload, status, attempts, next_attempt_at, created_at) \
             VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $7)",
        )
        .bind(&id)
        .bind(org_id)
        .bind(hook.try_get::<String, _>("id")?)
        .bind(event.as_str())
        .bind(payload(&id))
        .bind(now)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

impl Store {
    pub async fn create_webhook(
        &self,
        org_id: &str,
        url: &str,
        events: &[EventType],
        secret: &str,
    ) -> Result<Webhook> {
        let now = Timestamp::now();
        let hook = Webhook {
            id: new_id(),
            org_id: org_id.to_string(),
            url: url.to_string(),
            events: events.to_vec(),
            secret: secret.to_string(),
            created_at: now,
            updated_at: now,
        };
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO webhooks (id, org_id, url, events, secret, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&hook.id)
        .bind(&hook.org_id)
        .bind(&hook.url)
        .bind(serde_json::to_string(&hook.events).unwrap_or_default())
        .bind(&hook.secret)
        .bind(now.millis())
        .bind(now.millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(hook)
    }

    pub async fn webhook(&self, org_id: &str, id: &str) -> Result<Webhook> {
        self.org_row(&WEBHOOKS, org_id, id, webhook_from_row).await
    }

    /// Every webhook of an organization, oldest first.
    pub async fn webhooks(&self, org_id: &str) -> Result<Vec<Webhook>> {
        self.org_rows(&WEBHOOKS, org_id, webhook_from_row).await
    }

    pub async fn update_webhook(
        &self,
        org_id: &str,
        id: &str,
        url: &str,
        events: &[EventType],
        secret: &str,
    ) -> Result<Webhook> {
        let mut tx = self.begin_write().await?;
        touched(sqlx::query(
            "UPDATE webhooks SET url = $1, events = $2, secret = $3, updated_at = $4 WHERE org_id = $5 AND id = $6",
        )
        .bind(url)
        .bind(serde_json::to_string(events).unwrap_or_default())
        .bind(secret)
        .bind(Timestamp::now().millis())
        .bind(org_id)
        .bind(id)
        .execute(&mut *tx)
        .await?)?;
        tx.commit().await?;
        self.webhook(org_id, id).await
    }

    /// Deletes a webhook and its delivery log.
    pub async fn delete_webhook(&self, org_id: &str, id: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM webhook_deliveries WHERE org_id = $1 AND webhook_id = $2")
            .bind(org_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        delete_in(&mut tx, &WEBHOOKS, org_id, id).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Pending deliveries due by `now`, each claimed for `lease_ms` (so that no other sender
    /// takes it meanwhile), with the webhook's URL and secret.
    pub async fn claim_due_deliveries(
        &self,
        now: Timestamp,
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<(Delivery, Webhook)>> {
        let mut claimed = Vec::new();
        for row in self
            .claim_due("webhook_deliveries", now, lease_ms, limit)
            .await?
        {
            let d = delivery_from_row(&row)?;
            if let Ok(h) = self.webhook(&d.org_id, &d.webhook_id).await {
                claimed.push((d, h));
            }
        }
        Ok(claimed)
    }

    pub async fn record_attempt(&self, id: &str, outcome: AttemptOutcome) -> Result<()> {
        let now = Timestamp::now().millis();
        let mut tx = self.begin_write().await?;
        match outcome {
            AttemptOutcome::Delivered { status_code } => sqlx::query(
                "UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, last_status_code = $1, \
                 last_error = NULL, delivered_at = $2 WHERE id = $3",
            )
            .bind(status_code)
            .bind(now)
            .bind(id)
            .execute(&mut *tx)
            .await?,
            AttemptOutcome::Failed {
                status_code,
                error,
                retry_at,
            } => sqlx::query(
                "UPDATE webhook_deliveries SET status = $1, attempts = attempts + 1, last_status_code = $2, \
                 last_error = $3, next_attempt_at = $4 WHERE id = $5",
            )
            .bind(if retry_at.is_some() { "pending" } else { "failed" })
            .bind(status_code)
            .bind(error)
            .bind(retry_at.map_or(now, |t| t.millis()))
            .bind(id)
            .execute(&mut *tx)
            .await?,
        };
        tx.commit().await?;
        Ok(())
    }

    /// A webhook's deliveries, newest first, and how many there are.
    pub async fn deliveries(
        &self,
        org_id: &str,
        webhook_id: &str,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<Delivery>, u64)> {
        let total: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE org_id = $1 AND webhook_id = $2",
        )
        .bind(org_id)
        .bind(webhook_id)
        .fetch_one(self.pool())
        .await?
        .try_get("n")?;
        let rows = sqlx::query(
            "SELECT * FROM webhook_deliveries WHERE org_id = $1 AND webhook_id = $2 \
             ORDER BY created_at DESC, id DESC LIMIT $3 OFFSET $4",
        )
        .bind(org_id)
        .bind(webhook_id)
        .bind(limit)
        .bind(offset)
        .fetch_all(self.pool())
        .await?;
        Ok((
            rows.iter().map(delivery_from_row).collect::<Result<_>>()?,
            total as u64,
        ))
    }
}
