//! Alert rules and alerts. At most one open (active or acknowledged) alert per rule and asset,
//! held by a unique index, so that no race between evaluations opens two.

use plantd_model::alert::{Alert, AlertRule, AlertStatus, Condition, Operator, Severity};
use plantd_model::event::EventType;
use plantd_model::{Timestamp, new_id};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::rows::OrgTable;
use crate::rows::touched;
use crate::{Result, Store, StoreError};

/// Alert rules, oldest first.
const RULES: OrgTable = OrgTable {
    name: "alert_rules",
    columns: "*",
    order: "created_at, id",
};

/// Alerts, newest first.
const ALERTS: OrgTable = OrgTable {
    name: "alerts",
    columns: "*",
    order: "triggered_at DESC, id DESC",
};

/// The fields of a new or replaced rule.
#[derive(Clone, Debug)]
pub struct RuleFields {
    pub name: String,
    pub severity: Severity,
    pub data_source_id: String,
    pub asset_id: Option<String>,
    pub condition: Condition,
    pub notifications: Vec<String>,
    pub enabled: bool,
    pub auto_resolve: bool,
}

/// Filters of `GET /alerts`.
#[derive(Clone, Debug, Default)]
pub struct AlertFilter {
    pub status: Option<AlertStatus>,
    pub severity: Option<Severity>,
    /// Triggered at or after.
    pub start: Option<Timestamp>,
    /// Triggered before.
    pub end: Option<Timestamp>,
}

/// Reads an alert inside the transaction that changed it and records the change in the outbox
/// of alert events (`alert_events`), so that webhooks and notifications learn of every change
/// that is committed, and of no change that is not.
async fn record_event(
    conn: &mut sqlx::AnyConnection,
    org_id: &str,
    alert_id: &str,
    event: EventType,
) -> Result<Alert> {
    let row = sqlx::query("SELECT * FROM alerts WHERE org_id = $1 AND id = $2")
        .bind(org_id)
        .bind(alert_id)
        .fetch_one(&mut *conn)
        .await?;
    let alert = alert_from_row(&row)?;
    sqlx::query(
        "INSERT INTO alert_events (id, org_id, alert_id, rule_id, event, payload, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(new_id())
    .bind(org_id)
    .bind(alert_id)
    .bind(alert.rule_id.as_deref())
    .bind(event.as_str())
    .bind(serde_json::to_string(&alert)?)
    .bind(Timestamp::now().millis())
    .execute(&mut *conn)
    .await?;
    Ok(alert)
}

fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::Corrupt(format!("{what} {value}"))
}

fn rule_from_row(row: &AnyRow) -> Result<AlertRule> {
    let severity: String = row.try_get("severity")?;
    let operator: String = row.try_get("operator")?;
    let notifications: String = row.try_get("notifications")?;
    Ok(AlertRule {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        name: row.try_get("name")?,
        severity: Severity::parse(&severity).ok_or_else(|| corrupt("severity", &severity))?,
        data_source_id: row.try_get("data_source_id")?,
        asset_id: row.try_get("asset_id")?,
        condition: Condition {
            tag_name: row.try_get("tag_name")?,
            operator: Operator::parse(&operator).ok_or_else(|| corrupt("operator", &operator))?,
            value: row.try_get("threshold")?,
            duration_seconds: row.try_get("duration_seconds")?,
            max_gap_seconds: row.try_get("max_gap_seconds")?,
        },
        notifications: serde_json::from_str(&notifications)?,
        enabled: row.try_get::<i64, _>("enabled")? != 0,
        auto_resolve: row.try_get::<i64, _>("auto_resolve")? != 0,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

fn alert_from_row(row: &AnyRow) -> Result<Alert> {
    let severity: String = row.try_get("severity")?;
    let operator: Option<String> = row.try_get("operator")?;
    let status: String = row.try_get("status")?;
    let ts = |col: &str| -> Result<Option<Timestamp>> {
        Ok(row
            .try_get::<Option<i64>, _>(col)?
            .map(Timestamp::from_millis))
    };
    let tags: String = row.try_get("tags")?;
    let notifications: String = row.try_get("notifications")?;
    Ok(Alert {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        rule_id: row.try_get("rule_id")?,
        rule_name: row.try_get("rule_name")?,
        severity: Severity::parse(&severity).ok_or_else(|| corrupt("severity", &severity))?,
        status: AlertStatus::parse(&status).ok_or_else(|| corrupt("status", &status))?,
        data_source_id: row.try_get("data_source_id")?,
        asset_id: row.try_get("asset_id")?,
        tag_name: row.try_get("tag_name")?,
        value: row.try_get("value")?,
        threshold: row.try_get("threshold")?,
        operator: operator
            .map(|o| Operator::parse(&o).ok_or_else(|| corrupt("operator", &o)))
            .transpose()?,
        title: row.try_get("title")?,
        message: row.try_get("message")?,
        source: row.try_get("source")?,
        tags: serde_json::from_str(&tags)?,
        notifications: serde_json::from_str(&notifications)?,
        dedup_key: row.try_get("dedup_key")?,
        triggered_at: Timestamp::from_millis(row.try_get("triggered_at")?),
        acknowledged_at: ts("acknowledged_at")?,
        acknowledged_by: row.try_get("acknowledged_by")?,
        note: row.try_get("note")?,
        resolved_at: ts("resolved_at")?,
        resolved_by: row.try_get("resolved_by")?,
    })
}

/// Binds a rule's fields in the order both the insert and the update list them (name ..
/// auto_resolve).
fn bind_rule_fields<'q>(
    q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    f: &'q RuleFields,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    q.bind(&f.name)
        .bind(f.severity.as_str())
        .bind(&f.data_source_id)
        .bind(f.asset_id.as_deref())
        .bind(&f.condition.tag_name)
        .bind(f.condition.operator.as_str())
        .bind(f.condition.value)
        .bind(f.condition.duration_seconds)
        .bind(f.condition.max_gap_seconds)
        .bind(serde_json::to_string(&f.notifications).unwrap_or_default())
        .bind(i64::from(f.enabled))
        .bind(i64::from(f.auto_resolve))
}

impl Store {
    /// Deletes the alerts resolved before `before`, with their events and notifications (the
    /// edge's alert history retention); open alerts are kept however old. Returns the alerts
    /// deleted.
    pub async fn delete_alert_history(&self, before: Timestamp) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        let old = "SELECT id FROM alerts WHERE status = 'resolved' AND resolved_at < $1";
        for table in ["alert_events", "notifications"] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE alert_id IN ({old})"
            )))
            .bind(before.millis())
            .execute(&mut *tx)
            .await?;
        }
        let gone = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM alerts WHERE id IN ({old})"
        )))
        .bind(before.millis())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(gone)
    }

    pub async fn create_alert_rule(&self, org_id: &str, f: RuleFields) -> Result<AlertRule> {
        let (id, now) = (new_id(), Timestamp::now());
        let mut tx = self.begin_write().await?;
        let q = sqlx::query(
            "INSERT INTO alert_rules (id, org_id, name, severity, data_source_id, asset_id, tag_name, operator, threshold, \
             duration_seconds, max_gap_seconds, notifications, enabled, auto_resolve, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
        )
        .bind(&id)
        .bind(org_id);
        bind_rule_fields(q, &f)
            .bind(now.millis())
            .bind(now.millis())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(AlertRule {
            id,
            org_id: org_id.to_string(),
            name: f.name,
            severity: f.severity,
            data_source_id: f.data_source_id,
            asset_id: f.asset_id,
            condition: f.condition,
            notifications: f.notifications,
            enabled: f.enabled,
            auto_resolve: f.auto_resolve,
            created_at: now,
            updated_at: now,
        })
    }

    pub async fn alert_rule(&self, org_id: &str, id: &str) -> Result<AlertRule> {
        self.org_row(&RULES, org_id, id, rule_from_row).await
    }

    /// Every rule of an organization, oldest first.
    pub async fn alert_rules(&self, org_id: &str) -> Result<Vec<AlertRule>> {
        self.org_rows(&RULES, org_id, rule_from_row).await
    }

    /// Replaces a rule's fields.
    pub async fn update_alert_rule(
        &self,
        org_id: &str,
        id: &str,
        f: RuleFields,
    ) -> Result<AlertRule> {
        let q = sqlx::query(
            "UPDATE alert_rules SET name = $1, severity = $2, data_source_id = $3, asset_id = $4, tag_name = $5, \
             operator = $6, threshold = $7, duration_seconds = $8, max_gap_seconds = $9, notifications = $10, \
             enabled = $11, auto_resolve = $12, updated_at = $13 WHERE org_id = $14 AND id = $15",
        );
        let update = bind_rule_fields(q, &f).bind(Timestamp::now().millis());
        self.write_one(update.bind(org_id).bind(id)).await?;
        self.alert_rule(org_id, id).await
    }

    /// Deletes a rule; its open alerts are resolved (`resolved_by` = `rule_deleted`).
    pub async fn delete_alert_rule(&self, org_id: &str, id: &str) -> Result<Vec<Alert>> {
        let mut tx = self.begin_write().await?;
        touched(
            sqlx::query("DELETE FROM alert_rules WHERE org_id = $1 AND id = $2")
                .bind(org_id)
                .bind(id)
                .execute(&mut *tx)
                .await?,
        )?;
        let open: Vec<String> = sqlx::query(
            "SELECT id FROM alerts WHERE org_id = $1 AND rule_id = $2 AND status <> 'resolved'",
        )
        .bind(org_id)
        .bind(id)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|r| r.try_get("id"))
        .collect::<std::result::Result<_, _>>()?;
        sqlx::query(
            "UPDATE alerts SET status = 'resolved', resolved_at = $1, resolved_by = 'rule_deleted' \
             WHERE org_id = $2 AND rule_id = $3 AND status <> 'resolved'",
        )
        .bind(Timestamp::now().millis())
        .bind(org_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        let mut resolved = Vec::with_capacity(open.len());
        for a in open {
            resolved.push(record_event(&mut tx, org_id, &a, EventType::AlertResolved).await?);
        }
        tx.commit().await?;
        Ok(resolved)
    }

    /// Opens an alert unless one is open for its rule and asset, or (for an alert without a
    /// rule) for its deduplication key (then `None`).
    pub async fn open_alert(&self, alert: &Alert) -> Result<Option<Alert>> {
        // An absent number is written as a literal NULL, not bound: sqlx 0.9's `Any` driver
        // sends a `None` of f64 as a FLOAT4 parameter, and PostgreSQL then refuses the 8-byte
        // doubles that later executions of the cached statement bind.
        let mut next = 16;
        let mut number = |v: Option<f64>| match v {
            Some(_) => {
                next += 1;
                format!("${next}")
            }
            None => "NULL".to_string(),
        };
        let (value, threshold) = (number(alert.value), number(alert.threshold));
        let sql = format!(
            "INSERT INTO alerts (id, org_id, rule_id, rule_name, severity, status, data_source_id, asset_id, tag_name, \
             operator, triggered_at, title, message, source, tags, notifications, dedup_key, value, threshold) \
             VALUES ($1, $2, $3, $4, $5, 'active', $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, {value}, {threshold}) \
             ON CONFLICT DO NOTHING"
        );
        let mut tx = self.begin_write().await?;
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&alert.id)
            .bind(&alert.org_id)
            .bind(alert.rule_id.as_deref())
            .bind(alert.rule_name.as_deref())
            .bind(alert.severity.as_str())
            .bind(alert.data_source_id.as_deref())
            .bind(&alert.asset_id)
            .bind(alert.tag_name.as_deref())
            .bind(alert.operator.map(Operator::as_str))
            .bind(alert.triggered_at.millis())
            .bind(&alert.title)
            .bind(alert.message.as_deref())
            .bind(&alert.source)
            .bind(serde_json::to_string(&alert.tags)?)
            .bind(serde_json::to_string(&alert.notifications)?)
            .bind(alert.dedup_key.as_deref());
        for v in [alert.value, alert.threshold].into_iter().flatten() {
            q = q.bind(v);
        }
        let inserted = q.execute(&mut *tx).await?;
        if inserted.rows_affected() == 0 {
            return Ok(None);
        }
        let opened =
            record_event(&mut tx, &alert.org_id, &alert.id, EventType::AlertTriggered).await?;
        tx.commit().await?;
        Ok(Some(opened))
    }

    /// The open alert of an organization with a deduplication key.
    pub async fn open_alert_by_dedup_key(
        &self,
        org_id: &str,
        dedup_key: &str,
    ) -> Result<Option<Alert>> {
        let row = sqlx::query(
            "SELECT * FROM alerts WHERE org_id = $1 AND dedup_key = $2 AND status <> 'resolved'",
        )
        .bind(org_id)
        .bind(dedup_key)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(alert_from_row).transpose()
    }

    pub async fn alert(&self, org_id: &str, id: &str) -> Result<Alert> {
        self.org_row(&ALERTS, org_id, id, alert_from_row).await
    }

    /// Alerts of an organization, newest first, and how many match.
    pub async fn alerts(
        &self,
        org_id: &str,
        f: &AlertFilter,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<Alert>, u64)> {
        let mut cond = String::from("org_id = $1");
        let mut n = 1;
        let mut next = |cond: &mut String, sql: &str| {
            n += 1;
            cond.push_str(&sql.replace('?', &format!("${n}")));
        };
        if f.status.is_some() {
            next(&mut cond, " AND status = ?");
        }
        if f.severity.is_some() {
            next(&mut cond, " AND severity = ?");
        }
        if f.start.is_some() {
            next(&mut cond, " AND triggered_at >= ?");
        }
        if f.end.is_some() {
            next(&mut cond, " AND triggered_at < ?");
        }
        let bind = |sql: String| {
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(org_id.to_string());
            if let Some(s) = f.status {
                q = q.bind(s.as_str());
            }
            if let Some(s) = f.severity {
                q = q.bind(s.as_str());
            }
            if let Some(t) = f.start {
                q = q.bind(t.millis());
            }
            if let Some(t) = f.end {
                q = q.bind(t.millis());
            }
            q
        };
        let total: i64 = bind(format!("SELECT COUNT(*) AS n FROM alerts WHERE {cond}"))
            .fetch_one(self.pool())
            .await?
            .try_get("n")?;
        let rows = bind(format!(
            "SELECT * FROM alerts WHERE {cond} ORDER BY triggered_at DESC, id DESC LIMIT {limit} OFFSET {offset}"
        ))
        .fetch_all(self.pool())
        .await?;
        Ok((
            rows.iter().map(alert_from_row).collect::<Result<_>>()?,
            total as u64,
        ))
    }

    /// The open (active or acknowledged) alerts of an organization, newest first.
    pub async fn open_alerts_of(&self, org_id: &str) -> Result<Vec<Alert>> {
        let rows = sqlx::query(
            "SELECT * FROM alerts WHERE org_id = $1 AND status <> 'resolved' \
             ORDER BY triggered_at DESC, id DESC",
        )
        .bind(org_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(alert_from_row).collect()
    }

    /// Every open alert (at start, to know which rule and asset pairs have one).
    pub async fn open_alerts(&self) -> Result<Vec<Alert>> {
        let rows = sqlx::query("SELECT * FROM alerts WHERE status <> 'resolved'")
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(alert_from_row).collect()
    }

    /// Moves an alert from one of `from` to `to`: `Ok(None)` when it exists but is in another
    /// state.
    pub async fn transition_alert(
        &self,
        org_id: &str,
        id: &str,
        to: AlertStatus,
        by: &str,
        note: Option<&str>,
    ) -> Result<Option<Alert>> {
        let now = Timestamp::now().millis();
        let mut tx = self.begin_write().await?;
        let done = match to {
            AlertStatus::Acknowledged => sqlx::query(
                "UPDATE alerts SET status = 'acknowledged', acknowledged_at = $1, acknowledged_by = $2, note = $3 \
                 WHERE org_id = $4 AND id = $5 AND status = 'active'",
            )
            .bind(now)
            .bind(by)
            .bind(note)
            .bind(org_id)
            .bind(id)
            .execute(&mut *tx)
            .await?,
            AlertStatus::Resolved => sqlx::query(
                "UPDATE alerts SET status = 'resolved', resolved_at = $1, resolved_by = $2 \
                 WHERE org_id = $3 AND id = $4 AND status <> 'resolved'",
            )
            .bind(now)
            .bind(by)
            .bind(org_id)
            .bind(id)
            .execute(&mut *tx)
            .await?,
            AlertStatus::Active => return Err(StoreError::Corrupt("no way back to active".into())),
        };
        if done.rows_affected() == 0 {
            drop(tx);
            // Not moved: it is in another state, or not there (NotFound).
            self.alert(org_id, id).await?;
            return Ok(None);
        }
        let event = if to == AlertStatus::Acknowledged {
            EventType::AlertAcknowledged
        } else {
            EventType::AlertResolved
        };
        let alert = record_event(&mut tx, org_id, id, event).await?;
        tx.commit().await?;
        Ok(Some(alert))
    }

    /// Resolves the open alert of a rule and asset (the condition cleared).
    pub async fn auto_resolve_alert(
        &self,
        rule_id: &str,
        asset_id: &str,
        at: Timestamp,
    ) -> Result<Option<Alert>> {
        let mut tx = self.begin_write().await?;
        let open = sqlx::query(
            "SELECT org_id, id FROM alerts WHERE rule_id = $1 AND asset_id = $2 AND status <> 'resolved'",
        )
        .bind(rule_id)
        .bind(asset_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = open else {
            return Ok(None);
        };
        let (org_id, id): (String, String) = (row.try_get("org_id")?, row.try_get("id")?);
        sqlx::query(
            "UPDATE alerts SET status = 'resolved', resolved_at = $1, resolved_by = 'auto' WHERE id = $2",
        )
        .bind(at.millis())
        .bind(&id)
        .execute(&mut *tx)
        .await?;
        let alert = record_event(&mut tx, &org_id, &id, EventType::AlertResolved).await?;
        tx.commit().await?;
        Ok(Some(alert))
    }
}
