//! BI's records: each organization's configuration (no row: the defaults), saved queries, the
//! history of executions and row-level-security rules.

use plantd_model::bi::{
    BiConfig, QueryRun, Report, ReportFormat, ReportRun, ReportRunStatus, ReportTrigger, RlsRule,
    RunStatus, SavedQuery,
};
use plantd_model::page::{Page, Paged};
use plantd_model::{Timestamp, new_id};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::rows::OrgTable;
use crate::sql::{json_column, opt_ts};
use crate::{Arg, Result, Store, StoreError, Where};

const SAVED: OrgTable = OrgTable {
    name: "bi_saved_queries",
    columns: "*",
    order: "name, id",
};

const RULES: OrgTable = OrgTable {
    name: "bi_rls_rules",
    columns: "*",
    order: "name, id",
};

/// What a saved query is made of (create, and the whole of an update).
#[derive(Clone, Debug)]
pub struct SavedQueryFields {
    pub name: String,
    pub sql: String,
    pub database: String,
    pub description: String,
}

/// What a rule is made of (create, and the whole of an update).
#[derive(Clone, Debug)]
pub struct RlsRuleFields {
    pub name: String,
    pub table: String,
    pub clause: String,
    pub roles: Vec<plantd_model::org::Role>,
}

fn saved_from_row(row: &AnyRow) -> Result<SavedQuery> {
    Ok(SavedQuery {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        sql: row.try_get("sql_text")?,
        database: row.try_get("database_name")?,
        description: row.try_get("description")?,
        created_by: row.try_get("created_by")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

fn rule_from_row(row: &AnyRow) -> Result<RlsRule> {
    Ok(RlsRule {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        table: row.try_get("table_name")?,
        clause: row.try_get("clause")?,
        roles: json_column(row, "roles")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

fn run_from_row(row: &AnyRow) -> Result<QueryRun> {
    let status: String = row.try_get("status")?;
    Ok(QueryRun {
        id: row.try_get("id")?,
        executed_by: row.try_get("executed_by")?,
        sql: row.try_get("sql_text")?,
        database: row.try_get("database_name")?,
        status: RunStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("query run status {status}")))?,
        error: row.try_get("error")?,
        row_count: row.try_get::<i64, _>("row_count")? as u64,
        execution_time_ms: row.try_get::<i64, _>("execution_time_ms")? as u64,
        executed_at: Timestamp::from_millis(row.try_get("executed_at")?),
    })
}

impl Store {
    /// The organization's BI configuration (the defaults until an administrator saves one).
    pub async fn bi_config(&self, org_id: &str) -> Result<BiConfig> {
        let row = sqlx::query("SELECT config FROM bi_config WHERE org_id = $1")
            .bind(org_id)
            .fetch_optional(self.pool())
            .await?;
        match row {
            Some(row) => json_column(&row, "config"),
            None => Ok(BiConfig::default()),
        }
    }

    pub async fn put_bi_config(&self, org_id: &str, config: &BiConfig) -> Result<BiConfig> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO bi_config (org_id, config, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (org_id) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at",
        )
        .bind(org_id)
        .bind(serde_json::to_string(config)?)
        .bind(Timestamp::now().millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.bi_config(org_id).await
    }

    pub async fn create_saved_query(
        &self,
        org_id: &str,
        created_by: &str,
        f: &SavedQueryFields,
    ) -> Result<SavedQuery> {
        let id = new_id();
        let now = Timestamp::now().millis();
        self.write_one(
            sqlx::query(
                "INSERT INTO bi_saved_queries (id, org_id, name, sql_text, database_name, description, created_by, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(id.clone())
            .bind(org_id.to_string())
            .bind(f.name.clone())
            .bind(f.sql.clone())
            .bind(f.database.clone())
            .bind(f.description.clone())
            .bind(created_by.to_string())
            .bind(now)
            .bind(now),
        )
        .await?;
        self.saved_query(org_id, &id).await
    }

    pub async fn saved_query(&self, org_id: &str, id: &str) -> Result<SavedQuery> {
        self.org_row(&SAVED, org_id, id, saved_from_row).await
    }

    pub async fn saved_queries(&self, org_id: &str, page: Page) -> Result<Paged<SavedQuery>> {
        let (items, total) = self
            .org_page(
                &SAVED,
                org_id,
                (page.limit(), page.offset()),
                saved_from_row,
            )
            .await?;
        Ok(Paged { items, total })
    }

    pub async fn update_saved_query(
        &self,
        org_id: &str,
        id: &str,
        f: &SavedQueryFields,
    ) -> Result<SavedQuery> {
        self.write_one(
            sqlx::query(
                "UPDATE bi_saved_queries SET name = $1, sql_text = $2, database_name = $3, description = $4, \
                 updated_at = $5 WHERE org_id = $6 AND id = $7",
            )
            .bind(f.name.clone())
            .bind(f.sql.clone())
            .bind(f.database.clone())
            .bind(f.description.clone())
            .bind(Timestamp::now().millis())
            .bind(org_id.to_string())
            .bind(id.to_string()),
        )
        .await?;
        self.saved_query(org_id, id).await
    }

    pub async fn delete_saved_query(&self, org_id: &str, id: &str) -> Result<()> {
        self.delete_org_row(&SAVED, org_id, id).await
    }

    /// Records one execution.
    pub async fn insert_query_run(&self, org_id: &str, run: &QueryRun) -> Result<()> {
        self.write_one(
            sqlx::query(
                "INSERT INTO bi_query_runs (id, org_id, executed_by, sql_text, database_name, status, error, row_count, \
                 execution_time_ms, executed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .bind(run.id.clone())
            .bind(org_id.to_string())
            .bind(run.executed_by.clone())
            .bind(run.sql.clone())
            .bind(run.database.clone())
            .bind(run.status.as_str())
            .bind(run.error.clone())
            .bind(run.row_count as i64)
            .bind(run.execution_time_ms as i64)
            .bind(run.executed_at.millis()),
        )
        .await
    }

    /// A page of the organization's executions, newest first; only `executed_by`'s when given.
    pub async fn query_runs(
        &self,
        org_id: &str,
        executed_by: Option<&str>,
        page: Page,
    ) -> Result<Paged<QueryRun>> {
        let mut w = Where::new();
        w.push("org_id = ?", [Arg::Text(org_id.to_string())]);
        if let Some(who) = executed_by {
            w.push("executed_by = ?", [Arg::Text(who.to_string())]);
        }
        let count = format!("SELECT COUNT(*) AS n FROM bi_query_runs{}", w.sql());
        let total: i64 = w
            .bind(sqlx::query(sqlx::AssertSqlSafe(count)))
            .fetch_one(self.pool())
            .await?
            .try_get("n")?;
        let sql = format!(
            "SELECT * FROM bi_query_runs{} ORDER BY executed_at DESC, id DESC LIMIT {} OFFSET {}",
            w.sql(),
            page.limit(),
            page.offset()
        );
        let rows = w
            .bind(sqlx::query(sqlx::AssertSqlSafe(sql)))
            .fetch_all(self.pool())
            .await?;
        Ok(Paged {
            items: rows.iter().map(run_from_row).collect::<Result<_>>()?,
            total: total as u64,
        })
    }

    pub async fn create_rls_rule(&self, org_id: &str, f: &RlsRuleFields) -> Result<RlsRule> {
        let id = new_id();
        let now = Timestamp::now().millis();
        self.write_one(
            sqlx::query(
                "INSERT INTO bi_rls_rules (id, org_id, name, table_name, clause, roles, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(id.clone())
            .bind(org_id.to_string())
            .bind(f.name.clone())
            .bind(f.table.clone())
            .bind(f.clause.clone())
            .bind(serde_json::to_string(&f.roles)?)
            .bind(now)
            .bind(now),
        )
        .await?;
        self.rls_rule(org_id, &id).await
    }

    pub async fn rls_rule(&self, org_id: &str, id: &str) -> Result<RlsRule> {
        self.org_row(&RULES, org_id, id, rule_from_row).await
    }

    /// Every rule of the organization, by name.
    pub async fn rls_rules(&self, org_id: &str) -> Result<Vec<RlsRule>> {
        self.org_rows(&RULES, org_id, rule_from_row).await
    }

    pub async fn update_rls_rule(
        &self,
        org_id: &str,
        id: &str,
        f: &RlsRuleFields,
    ) -> Result<RlsRule> {
        self.write_one(
            sqlx::query(
                "UPDATE bi_rls_rules SET name = $1, table_name = $2, clause = $3, roles = $4, updated_at = $5 \
                 WHERE org_id = $6 AND id = $7",
            )
            .bind(f.name.clone())
            .bind(f.table.clone())
            .bind(f.clause.clone())
            .bind(serde_json::to_string(&f.roles)?)
            .bind(Timestamp::now().millis())
            .bind(org_id.to_string())
            .bind(id.to_string()),
        )
        .await?;
        self.rls_rule(org_id, id).await
    }

    pub async fn delete_rls_rule(&self, org_id: &str, id: &str) -> Result<()> {
        self.delete_org_row(&RULES, org_id, id).await
    }
}

const REPORTS: OrgTable = OrgTable {
    name: "bi_reports",
    columns: "*",
    order: "name, id",
};

/// What a report is made of (create, and the whole of an update), with its next scheduled run.
#[derive(Clone, Debug)]
pub struct ReportFields {
    pub name: String,
    pub dashboard_id: String,
    pub schedule: String,
    pub format: ReportFormat,
    pub recipients: Vec<String>,
    pub enabled: bool,
    pub next_run_at: Option<Timestamp>,
}

fn report_from_row(row: &AnyRow) -> Result<Report> {
    let format: String = row.try_get("format")?;
    Ok(Report {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        dashboard_id: row.try_get("dashboard_id")?,
        schedule: row.try_get("schedule")?,
        format: ReportFormat::parse(&format)
            .ok_or_else(|| StoreError::Corrupt(format!("report format {format}")))?,
        recipients: json_column(row, "recipients")?,
        enabled: row.try_get::<i64, _>("enabled")? != 0,
        created_by: row.try_get("created_by")?,
        run_as: row.try_get("run_as")?,
        next_run_at: opt_ts(row, "next_run_at")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

fn report_run_from_row(row: &AnyRow) -> Result<ReportRun> {
    let trigger: String = row.try_get("trigger_kind")?;
    let status: String = row.try_get("status")?;
    let format: String = row.try_get("format")?;
    Ok(ReportRun {
        id: row.try_get("id")?,
        report_id: row.try_get("report_id")?,
        trigger: ReportTrigger::parse(&trigger)
            .ok_or_else(|| StoreError::Corrupt(format!("report trigger {trigger}")))?,
        scheduled_for: opt_ts(row, "scheduled_for")?,
        status: ReportRunStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("report run status {status}")))?,
        error: row.try_get("error")?,
        format: ReportFormat::parse(&format)
            .ok_or_else(|| StoreError::Corrupt(format!("report format {format}")))?,
        size_bytes: row
            .try_get::<Option<i64>, _>("size_bytes")?
            .map(|n| n.max(0) as u64),
        recipients: json_column(row, "recipients")?,
        started_at: Timestamp::from_millis(row.try_get("started_at")?),
        finished_at: opt_ts(row, "finished_at")?,
    })
}

impl Store {
    /// A report created by `created_by` (a user, else an API key), reading as `run_as`.
    pub async fn create_report(
        &self,
        org_id: &str,
        created_by: &str,
        run_as: Option<&str>,
        f: &ReportFields,
    ) -> Result<Report> {
        let id = new_id();
        let now = Timestamp::now().millis();
        self.write_one(
            sqlx::query(
                "INSERT INTO bi_reports (id, org_id, name, dashboard_id, schedule, format, recipients, enabled, \
                 created_by, run_as, next_run_at, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            )
            .bind(id.clone())
            .bind(org_id.to_string())
            .bind(f.name.clone())
            .bind(f.dashboard_id.clone())
            .bind(f.schedule.clone())
            .bind(f.format.as_str())
            .bind(serde_json::to_string(&f.recipients)?)
            .bind(i64::from(f.enabled))
            .bind(created_by.to_string())
            .bind(run_as.map(str::to_string))
            .bind(f.next_run_at.map(Timestamp::millis))
            .bind(now)
            .bind(now),
        )
        .await?;
        self.report(org_id, &id).await
    }

    pub async fn report(&self, org_id: &str, id: &str) -> Result<Report> {
        self.org_row(&REPORTS, org_id, id, report_from_row).await
    }

    /// Every report of the organization, by name.
    pub async fn reports(&self, org_id: &str) -> Result<Vec<Report>> {
        self.org_rows(&REPORTS, org_id, report_from_row).await
    }

    pub async fn update_report(&self, org_id: &str, id: &str, f: &ReportFields) -> Result<Report> {
        self.write_one(
            sqlx::query(
                "UPDATE bi_reports SET name = $1, dashboard_id = $2, schedule = $3, format = $4, recipients = $5, \
                 enabled = $6, next_run_at = $7, updated_at = $8 WHERE org_id = $9 AND id = $10",
            )
            .bind(f.name.clone())
            .bind(f.dashboard_id.clone())
            .bind(f.schedule.clone())
            .bind(f.format.as_str())
            .bind(serde_json::to_string(&f.recipients)?)
            .bind(i64::from(f.enabled))
            .bind(f.next_run_at.map(Timestamp::millis))
            .bind(Timestamp::now().millis())
            .bind(org_id.to_string())
            .bind(id.to_string()),
        )
        .await?;
        self.report(org_id, id).await
    }

    pub async fn delete_report(&self, org_id: &str, id: &str) -> Result<()> {
        self.delete_org_row(&REPORTS, org_id, id).await
    }

    /// Enabled reports of every organization whose next run is due at `now`, with their
    /// organizations, soonest first.
    pub async fn due_reports(&self, now: Timestamp, limit: u32) -> Result<Vec<(String, Report)>> {
        let rows = sqlx::query(
            "SELECT * FROM bi_reports WHERE enabled = 1 AND next_run_at IS NOT NULL AND next_run_at <= $1 \
             ORDER BY next_run_at, id LIMIT $2",
        )
        .bind(now.millis())
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("org_id")?, report_from_row(r)?)))
            .collect()
    }

    /// Moves a report's next run from `due` to `next`, only if no one moved it since: true
    /// for the one caller (of every node) that claims the run due at `due`.
    pub async fn claim_report_run(
        &self,
        id: &str,
        due: Timestamp,
        next: Option<Timestamp>,
    ) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "UPDATE bi_reports SET next_run_at = $1 WHERE id = $2 AND next_run_at = $3",
        )
        .bind(next.map(Timestamp::millis))
        .bind(id.to_string())
        .bind(due.millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn insert_report_run(&self, org_id: &str, run: &ReportRun) -> Result<()> {
        self.write_one(
            sqlx::query(
                "INSERT INTO bi_report_runs (id, org_id, report_id, trigger_kind, scheduled_for, status, error, format, \
                 size_bytes, recipients, started_at, finished_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            )
            .bind(run.id.clone())
            .bind(org_id.to_string())
            .bind(run.report_id.clone())
            .bind(run.trigger.as_str())
            .bind(run.scheduled_for.map(Timestamp::millis))
            .bind(run.status.as_str())
            .bind(run.error.clone())
            .bind(run.format.as_str())
            .bind(run.size_bytes.map(|n| n as i64))
            .bind(serde_json::to_string(&run.recipients)?)
            .bind(run.started_at.millis())
            .bind(run.finished_at.map(Timestamp::millis)),
        )
        .await
    }

    /// Marks runs still `running` that started before `before` as failed with `error` (their
    /// node stopped during the run); answers how many.
    pub async fn fail_stale_report_runs(&self, before: Timestamp, error: &str) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "UPDATE bi_report_runs SET status = 'error', error = $1, finished_at = $2 \
             WHERE status = 'running' AND started_at < $3",
        )
        .bind(error.to_string())
        .bind(Timestamp::now().millis())
        .bind(before.millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }

    /// Records how a run ended.
    pub async fn finish_report_run(&self, org_id: &str, run: &ReportRun) -> Result<()> {
        self.write_one(
            sqlx::query(
                "UPDATE bi_report_runs SET status = $1, error = $2, size_bytes = $3, finished_at = $4 \
                 WHERE org_id = $5 AND id = $6",
            )
            .bind(run.status.as_str())
            .bind(run.error.clone())
            .bind(run.size_bytes.map(|n| n as i64))
            .bind(run.finished_at.map(Timestamp::millis))
            .bind(org_id.to_string())
            .bind(run.id.clone()),
        )
        .await
    }

    pub async fn report_run(&self, org_id: &str, id: &str) -> Result<ReportRun> {
        let row = sqlx::query("SELECT * FROM bi_report_runs WHERE org_id = $1 AND id = $2")
            .bind(org_id)
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .ok_or(StoreError::NotFound)?;
        report_run_from_row(&row)
    }

    /// A page of a report's runs, newest first.
    pub async fn report_runs(
        &self,
        org_id: &str,
        report_id: &str,
        page: Page,
    ) -> Result<Paged<ReportRun>> {
        let total: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM bi_report_runs WHERE org_id = $1 AND report_id = $2",
        )
        .bind(org_id)
        .bind(report_id)
        .fetch_one(self.pool())
        .await?
        .try_get("n")?;
        let sql = format!(
            "SELECT * FROM bi_report_runs WHERE org_id = $1 AND report_id = $2 \
             ORDER BY started_at DESC, id DESC LIMIT {} OFFSET {}",
            page.limit(),
            page.offset()
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(org_id)
            .bind(report_id)
            .fetch_all(self.pool())
            .await?;
        Ok(Paged {
            items: rows
                .iter()
                .map(report_run_from_row)
                .collect::<Result<_>>()?,
            total: total as u64,
        })
    }
}
