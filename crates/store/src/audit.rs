//! Audit records: written for every mutating request, read with the filters of SPEC 4.13.

use plantd_model::audit::{AuditRecord, Severity};
use plantd_model::page::{Page, Paged};
use plantd_model::{Timestamp, new_id};
use serde::Serialize;
use sqlx::Row;
use sqlx::any::AnyRow;
use std::collections::BTreeMap;

use crate::audit_writer::{AuditGroup, NewAuditRecord};
use crate::group_writer;
use crate::rows::OrgTable;
use crate::{Arg, Result, Store, StoreError, Where, like_pattern};

/// Audit records, newest first.
const AUDIT_LOGS: OrgTable = OrgTable {
    name: "audit_logs",
    columns: "*",
    order: "timestamp DESC, id DESC",
};

/// Filters of `GET /audit/logs`; empty lists and `None` filter nothing.
#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    pub start: Option<Timestamp>,
    pub end: Option<Timestamp>,
    pub categories: Vec<String>,
    pub event_types: Vec<String>,
    pub severities: Vec<Severity>,
    pub user_id: Option<String>,
    pub resource_type: Option<String>,
    pub search: Option<String>,
}

#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct AuditSummary {
    pub start: Option<Timestamp>,
    pub end: Option<Timestamp>,
    pub total: u64,
    pub by_severity: BTreeMap<String, u64>,
    pub by_outcome: BTreeMap<String, u64>,
    pub by_category: BTreeMap<String, u64>,
    /// The ten most frequent event types, most frequent first.
    pub top_event_types: Vec<EventTypeCount>,
}

#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct EventTypeCount {
    pub event_type: String,
    pub count: u64,
}

fn record_from_row(row: &AnyRow) -> Result<AuditRecord> {
    let severity: String = row.try_get("severity")?;
    Ok(AuditRecord {
        id: row.try_get("id")?,
        timestamp: Timestamp::from_millis(row.try_get("ts")?),
        actor_type: row.try_get("actor_type")?,
        actor_id: row.try_get("actor_id")?,
        user_id: row.try_get("user_id")?,
        category: row.try_get("category")?,
        event_type: row.try_get("event_type")?,
        severity: Severity::parse(&severity)
            .ok_or_else(|| StoreError::Corrupt(format!("severity {severity}")))?,
        outcome: row.try_get("outcome")?,
        resource_type: row.try_get("resource_type")?,
        resource_id: row.try_get("resource_id")?,
        method: row.try_get("method")?,
        path: row.try_get("path")?,
        status_code: row.try_get::<i32, _>("status_code")? as u16,
        error_code: row.try_get("error_code")?,
        client_ip: row.try_get("client_ip")?,
        user_agent: row.try_get("user_agent")?,
        request_id: row.try_get("request_id")?,
    })
}

fn filter_where(org_id: &str, f: &AuditFilter) -> Where {
    let mut w = Where::new();
    w.push("org_id = ?", [Arg::Text(org_id.into())]);
    if let Some(s) = f.start {
        w.push("ts >= ?", [Arg::Int(s.millis())]);
    }
    if let Some(e) = f.end {
        w.push("ts <= ?", [Arg::Int(e.millis())]);
    }
    let mut any_of = |col: &str, values: Vec<String>| {
        if !values.is_empty() {
            let marks = vec!["?"; values.len()].join(", ");
            w.push(
                &format!("{col} IN ({marks})"),
                values.into_iter().map(Arg::Text),
            );
        }
    };
    any_of("category", f.categories.clone());
    any_of("event_type", f.event_types.clone());
    any_of(
        "severity",
        f.severities
            .iter()
            .map(|s| s.as_str().to_string())
            .collect(),
    );
    if let Some(u) = &f.user_id {
        w.push("user_id = ?", [Arg::Text(u.clone())]);
    }
    if let Some(r) = &f.resource_type {
        w.push("resource_type = ?", [Arg::Text(r.clone())]);
    }
    if let Some(s) = f.search.as_deref().filter(|s| !s.trim().is_empty()) {
        let cols = [
            "event_type",
            "category",
            "resource_type",
            "resource_id",
            "actor_id",
            "user_id",
            "path",
            "error_code",
            "client_ip",
            "user_agent",
            "outcome",
        ];
        let clause = cols
            .iter()
            .map(|c| format!("LOWER(COALESCE({c}, '')) LIKE ? ESCAPE '\\'"))
            .collect::<Vec<_>>()
            .join(" OR ");
        let pattern = like_pattern(s.trim());
        w.push(
            &format!("({clause})"),
            cols.iter().map(|_| Arg::Text(pattern.clone())),
        );
    }
    w
}

/// The most rows one export returns.
pub const MAX_EXPORT_ROWS: i64 = 100_000;

impl Store {
    /// Stores an audit record durably and returns its id. Records of concurrent requests are
    /// written together by one writer task, in one transaction (one fsync for all of them),
    /// so that auditing every mutation does not put a commit of its own on each request.
    pub async fn insert_audit(&self, r: &NewAuditRecord) -> Result<String> {
        // The writer holds the database only, so it ends when the last handle's queue is gone.
        let queue = self
            .audit_writer
            .get_or_init(|| group_writer::spawn::<AuditGroup>(self.db.clone()));
        let id = new_id();
        group_writer::write::<AuditGroup>(
            queue,
            (id.clone(), r.clone(), Timestamp::now().millis()),
        )
        .await?;
        Ok(id)
    }

    /// Audit records of an organization, newest first.
    pub async fn audit_logs(
        &self,
        org_id: &str,
        f: &AuditFilter,
        page: Page,
    ) -> Result<Paged<AuditRecord>> {
        let w = filter_where(org_id, f);
        let count_sql = format!("SELECT COUNT(*) AS n FROM audit_logs{}", w.sql());
        let total: i64 = w
            .bind(sqlx::query(sqlx::AssertSqlSafe(count_sql)))
            .fetch_one(self.pool())
            .await?
            .try_get("n")?;
        let sql = format!(
            "SELECT * FROM audit_logs{} ORDER BY ts DESC, id DESC LIMIT {} OFFSET {}",
            w.sql(),
            w.next_placeholder(1),
            w.next_placeholder(2)
        );
        let rows = w
            .bind(sqlx::query(sqlx::AssertSqlSafe(sql)))
            .bind(page.limit())
            .bind(page.offset())
            .fetch_all(self.pool())
            .await?;
        Ok(Paged {
            items: rows.iter().map(record_from_row).collect::<Result<_>>()?,
            total: total as u64,
        })
    }

    /// Every matching record, oldest first, at most [`MAX_EXPORT_ROWS`].
    pub async fn audit_export(&self, org_id: &str, f: &AuditFilter) -> Result<Vec<AuditRecord>> {
        let w = filter_where(org_id, f);
        let sql = format!(
            "SELECT * FROM audit_logs{} ORDER BY ts, id LIMIT {MAX_EXPORT_ROWS}",
            w.sql()
        );
        let rows = w
            .bind(sqlx::query(sqlx::AssertSqlSafe(sql)))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(record_from_row).collect()
    }

    pub async fn audit_log(&self, org_id: &str, id: &str) -> Result<AuditRecord> {
        self.org_row(&AUDIT_LOGS, org_id, id, record_from_row).await
    }

    pub async fn audit_summary(&self, org_id: &str, f: &AuditFilter) -> Result<AuditSummary> {
        let w = filter_where(org_id, f);
        let group = |col: &str| {
            format!(
                "SELECT {col} AS k, COUNT(*) AS n FROM audit_logs{} GROUP BY {col} ORDER BY n DESC, k",
                w.sql()
            )
        };
        let mut maps = Vec::new();
        for col in ["severity", "outcome", "category", "event_type"] {
            let rows = w
                .bind(sqlx::query(sqlx::AssertSqlSafe(group(col))))
                .fetch_all(self.pool())
                .await?;
            let mut pairs = Vec::new();
            for r in &rows {
                pairs.push((
                    r.try_get::<String, _>("k")?,
                    r.try_get::<i64, _>("n")? as u64,
                ));
            }
            maps.push(pairs);
        }
        let event_types = maps.pop().unwrap_or_default();
        let by_category: BTreeMap<_, _> = maps.pop().unwrap_or_default().into_iter().collect();
        let by_outcome: BTreeMap<_, _> = maps.pop().unwrap_or_default().into_iter().collect();
        let mut by_severity: BTreeMap<String, u64> = Severity::ALL
            .iter()
            .map(|s| (s.as_str().to_string(), 0))
            .collect();
        by_severity.extend(maps.pop().unwrap_or_default());
        Ok(AuditSummary {
            start: f.start,
            end: f.end,
            total: by_severity.values().sum(),
            by_severity,
            by_outcome,
            by_category,
            top_event_types: event_types
                .into_iter()
                .take(10)
                .map(|(event_type, count)| EventTypeCount { event_type, count })
                .collect(),
        })
    }
}
