//! BI (SPEC 2.10, 4.11; docs/api.md, "BI"): SQL over the organization's data on the engine of
//! `plantd_bi`, with the caller's row-level-security rules applied inside its scans; the
//! configuration, saved queries, the history of executions and the rules themselves.

use plantd_bi::{BiError, Limits, Rls, Table};
use plantd_model::bi::{BiConfig, DATABASE, QueryRun, RlsRule, RunStatus, SavedQuery};
use plantd_model::org::Role;
use plantd_model::page::{Page, Paged};
use plantd_model::validation::Validator;
use plantd_model::{Scope, Timestamp, new_id};
use plantd_store::{RlsRuleFields, SavedQueryFields};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use plantd_bi::{ColumnInfo, TableInfo};

use crate::app::App;
use crate::bi_source::OrgSource;
use crate::caller::Caller;
use crate::error::{AppError, AppResult};

/// Memory one query's sorts, aggregates and joins may hold (docs/api.md, "BI").
const QUERY_MEMORY: usize = 512 * 1024 * 1024;
/// The longest SQL text accepted.
const MAX_SQL: usize = 100_000;

/// A partial update of the configuration: absent fields keep their value.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BiConfigUpdate {
    pub bi_embed_enabled: Option<bool>,
    pub sql_lab_enabled: Option<bool>,
    pub chart_builder_enabled: Option<bool>,
    /// 1 to 50.
    pub max_concurrent_queries: Option<u32>,
    /// 1 to 3,600.
    pub query_timeout_seconds: Option<u32>,
    /// 1 to 1,000,000.
    pub row_limit: Option<u32>,
    /// Origins that may frame embedded dashboards (`https://host[:port]`), at most 20.
    pub embed_allowed_origins: Option<Vec<String>>,
}

/// SQL to run (SPEC 2.10).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteSql {
    pub sql: String,
    /// `plantd`, the only database (may be omitted).
    pub database: Option<String>,
    /// Rows to answer at most; the organization's `row_limit` caps it.
    pub limit: Option<i64>,
}

/// The answer to SQL (SPEC 2.10).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct SqlAnswer {
    pub columns: Vec<String>,
    #[schema(value_type = Vec<Vec<Object>>)]
    pub rows: Vec<Vec<serde_json::Value>>,
    pub row_count: u64,
    pub execution_time_ms: u64,
    /// Present (true) when the row limit cut the answer.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// A saved query (SPEC 2.10); also the whole of an update.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSavedQuery {
    pub name: String,
    pub sql: String,
    #[serde(default)]
    pub database: Option<String>,
    #[serde(default)]
    pub description: String,
}

/// A partial update of a saved query.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SavedQueryUpdate {
    pub name: Option<String>,
    pub sql: Option<String>,
    pub database: Option<String>,
    pub description: Option<String>,
}

/// A new row-level-security rule.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRlsRule {
    pub name: String,
    /// One of the BI tables (docs/api.md, "BI tables").
    pub table: String,
    /// A SQL condition over the table's columns, e.g. `asset_id IN ('pump-1', 'pump-2')`.
    pub clause: String,
    /// The member roles it applies to (default: every role).
    #[serde(default)]
    pub roles: Option<Vec<Role>>,
}

/// A partial update of a rule.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RlsRuleUpdate {
    pub name: Option<String>,
    pub table: Option<String>,
    pub clause: Option<String>,
    pub roles: Option<Vec<Role>>,
}

/// SQL to run as another caller would see it: under one rule, a role's rules or a user's.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RlsTest {
    pub sql: Option<String>,
    pub database: Option<String>,
    pub rule_id: Option<String>,
    pub role: Option<Role>,
    pub user_id: Option<String>,
}

/// The answer to an RLS test.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct RlsTestAnswer {
    /// The conditions applied, per table (`table: (clause) AND (clause)`, tables separated by
    /// `; `); empty when none applies.
    pub effective_filter: String,
    pub columns: Vec<String>,
    #[schema(value_type = Vec<Vec<Object>>)]
    pub rows: Vec<Vec<serde_json::Value>>,
    pub row_count: u64,
}

fn all_roles() -> Vec<Role> {
    vec![Role::Owner, Role::Admin, Role::Member]
}

/// A dashboard's id given as a string or, as SPEC 2.10 writes it, a number.
pub(crate) fn dashboard_id_of(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Whether `text` is a web origin: `http` or `https`, a host name or address, an optional
/// port, and nothing else (it goes into a CSP, whose host names have no `_`).
fn is_origin(text: &str) -> bool {
    let Some(rest) = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
    else {
        return false;
    };
    !rest.contains(['/', '?', '#', '@', '_']) && plantd_model::data_source::parse_url(text).is_ok()
}

/// The table `name` names, else a refusal on `field` listing the tables.
pub(crate) fn table_named(v: &mut Validator, field: &str, name: &str) -> Option<Table> {
    let table = Table::parse(name);
    if table.is_none() {
        v.add(
            field,
            format!(
                "unknown table '{name}': one of {}",
                plantd_bi::TABLES.map(Table::name).join(", ")
            ),
        );
    }
    table
}

fn check_database(v: &mut Validator, database: Option<&str>) {
    if let Some(d) = database {
        v.check(
            d == DATABASE,
            "database",
            format!("unknown database '{d}': SQL runs against the database '{DATABASE}'"),
        );
    }
}

fn check_sql(v: &mut Validator, sql: &str) {
    v.check(!sql.trim().is_empty(), "sql", "must not be empty");
    v.check(
        sql.len() <= MAX_SQL,
        "sql",
        format!("must be at most {MAX_SQL} bytes"),
    );
}

fn check_saved(f: &SavedQueryFields) -> AppResult<()> {
    let mut v = Validator::new();
    v.text("name", &f.name, 200);
    check_sql(&mut v, &f.sql);
    check_database(&mut v, Some(&f.database));
    v.check(
        f.description.chars().count() <= 2000,
        "description",
        "must be at most 2000 characters",
    );
    Ok(v.finish()?)
}

fn check_rule(f: &RlsRuleFields) -> AppResult<()> {
    let mut v = Validator::new();
    v.text("name", &f.name, 200);
    if let Some(table) = table_named(&mut v, "table", &f.table) {
        if f.clause.trim().is_empty() {
            v.add("clause", "must not be empty");
        } else if let Err(e) = plantd_bi::check_clause(table, &f.clause) {
            v.add("clause", e.to_string());
        }
    }
    v.check(!f.roles.is_empty(), "roles", "must name at least one role");
    Ok(v.finish()?)
}

/// The rules' conditions as the engine takes them (a rule of an unknown table is skipped: the
/// table list only grows).
pub(crate) fn conditions(rules: &[RlsRule]) -> Vec<Rls> {
    rules
        .iter()
        .filter_map(|r| {
            Some(Rls {
                table: Table::parse(&r.table)?,
                clause: r.clause.clone(),
            })
        })
        .collect()
}

pub(crate) fn effective_filter(rls: &[Rls]) -> String {
    let mut parts = Vec::new();
    for table in plantd_bi::TABLES {
        let clauses: Vec<String> = rls
            .iter()
            .filter(|r| r.table == table)
            .map(|r| format!("({})", r.clause))
            .collect();
        if !clauses.is_empty() {
            parts.push(format!("{}: {}", table.name(), clauses.join(" AND ")));
        }
    }
    parts.join("; ")
}

impl App {
    /// The tables SQL can name, with their columns (SQL Lab's list).
    pub fn bi_tables(&self) -> Vec<TableInfo> {
        plantd_bi::TABLES.map(Table::info).to_vec()
    }

    pub async fn bi_config(&self, org_id: &str) -> AppResult<BiConfig> {
        Ok(self.store().bi_config(org_id).await?)
    }

    pub async fn update_bi_config(&self, org_id: &str, u: BiConfigUpdate) -> AppResult<BiConfig> {
        let c = self.bi_config(org_id).await?;
        let next = BiConfig {
            bi_embed_enabled: u.bi_embed_enabled.unwrap_or(c.bi_embed_enabled),
            sql_lab_enabled: u.sql_lab_enabled.unwrap_or(c.sql_lab_enabled),
            chart_builder_enabled: u.chart_builder_enabled.unwrap_or(c.chart_builder_enabled),
            max_concurrent_queries: u.max_concurrent_queries.unwrap_or(c.max_concurrent_queries),
            query_timeout_seconds: u.query_timeout_seconds.unwrap_or(c.query_timeout_seconds),
            row_limit: u.row_limit.unwrap_or(c.row_limit),
            embed_allowed_origins: u
                .embed_allowed_origins
                .map(|o| {
                    o.iter()
                        .map(|x| x.trim().trim_end_matches('/').to_string())
                        .collect()
                })
                .unwrap_or(c.embed_allowed_origins),
        };
        let mut v = Validator::new();
        v.check(
            (1..=50).contains(&next.max_concurrent_queries),
            "max_concurrent_queries",
            "must be from 1 to 50",
        );
        v.check(
            (1..=3600).contains(&next.query_timeout_seconds),
            "query_timeout_seconds",
            "must be from 1 to 3600",
        );
        v.check(
            (1..=1_000_000).contains(&next.row_limit),
            "row_limit",
            "must be from 1 to 1000000",
        );
        v.check(
            next.embed_allowed_origins.len() <= 20,
            "embed_allowed_origins",
            "must list at most 20 origins",
        );
        for (i, origin) in next.embed_allowed_origins.iter().enumerate() {
            v.check(
                is_origin(origin),
                &format!("embed_allowed_origins[{i}]"),
                format!("'{origin}' is not an origin such as https://portal.example.com (scheme, host and port only)"),
            );
        }
        v.finish()?;
        Ok(self.store().put_bi_config(org_id, &next).await?)
    }

    /// The organization's dashboard a BI request names (embedding, reports): one that is not
    /// there is a 400 on `field`.
    pub(crate) async fn dashboard_named(
        &self,
        org_id: &str,
        id: &str,
        field: &str,
    ) -> AppResult<crate::dashboards::Dashboard> {
        match self.dashboard(org_id, id).await {
            Err(AppError::NotFound(_)) => Err(AppError::invalid(
                field,
                format!("no dashboard '{id}' in this organization"),
            )),
            other => other,
        }
    }

    /// The rules that apply to a caller: those naming its member role (an API key acts with
    /// its user's role; a credential without a user is under no role's rules).
    async fn rules_of_caller(&self, caller: &Caller) -> AppResult<Vec<RlsRule>> {
        let Some(user) = &caller.user_id else {
            return Ok(Vec::new());
        };
        let role = self
            .store()
            .member(&caller.org_id, user)
            .await
            .map_err(AppError::missing("member"))?
            .role;
        self.rules_of_role(&caller.org_id, role).await
    }

    pub(crate) async fn rules_of_role(&self, org_id: &str, role: Role) -> AppResult<Vec<RlsRule>> {
        let rules = self.store().rls_rules(org_id).await?;
        Ok(rules
            .into_iter()
            .filter(|r| r.roles.contains(&role))
            .collect())
    }

    /// A slot among the organization's `max_concurrent_queries` on this node, else a 429.
    pub(crate) fn query_slot(
        &self,
        org_id: &str,
        config: &BiConfig,
    ) -> AppResult<crate::query_slots::Slot> {
        self.query_slots()
            .take(org_id, config.max_concurrent_queries)
            .ok_or_else(|| AppError::LimitReached {
                message: format!(
                    "the organization already runs {} queries at once (BI configuration max_concurrent_queries)",
                    config.max_concurrent_queries
                ),
                retry_after: 1,
            })
    }

    /// Runs `sql` for the organization under `rls`, within the configuration's limits.
    pub(crate) async fn run_sql(
        &self,
        org_id: &str,
        config: &BiConfig,
        rls: &[Rls],
        sql: &str,
        rows: usize,
    ) -> Result<plantd_bi::QueryOutput, BiError> {
        let source = Arc::new(OrgSource {
            app: self.clone(),
            org_id: org_id.to_string(),
        });
        let limits = Limits {
            rows,
            timeout: Duration::from_secs(config.query_timeout_seconds.into()),
            memory_bytes: QUERY_MEMORY,
            partitions: std::thread::available_parallelism().map_or(2, |n| n.get()),
        };
        plantd_bi::run(source, rls, sql, limits).await
    }

    /// `POST /v1/bi/query/execute`: runs the caller's SQL under the caller's rules and records
    /// the execution in the history, whatever its outcome.
    pub async fn execute_sql(&self, caller: &Caller, req: ExecuteSql) -> AppResult<SqlAnswer> {
        let mut v = Validator::new();
        check_sql(&mut v, &req.sql);
        check_database(&mut v, req.database.as_deref());
        if let Some(limit) = req.limit {
            v.check(limit >= 1, "limit", "must be at least 1");
        }
        v.finish()?;
        let config = self.bi_config(&caller.org_id).await?;
        if !config.sql_lab_enabled {
            return Err(AppError::Forbidden(
                "SQL Lab is turned off for this organization (BI configuration sql_lab_enabled)"
                    .into(),
            ));
        }
        let rows = req.limit.map_or(config.row_limit as usize, |l| {
            l.min(config.row_limit.into()) as usize
        });
        let _slot = self.query_slot(&caller.org_id, &config)?;
        let rls = conditions(&self.rules_of_caller(caller).await?);
        let started = Instant::now();
        let executed_at = Timestamp::now();
        let outcome = self
            .run_sql(&caller.org_id, &config, &rls, &req.sql, rows)
            .await;
        let execution_time_ms = started.elapsed().as_millis() as u64;
        let (status, error, row_count) = match &outcome {
            Ok(out) => (RunStatus::Success, None, out.rows.len() as u64),
            Err(e @ BiError::Timeout(_)) => (RunStatus::Timeout, Some(e.to_string()), 0),
            Err(e) => (RunStatus::Error, Some(e.to_string()), 0),
        };
        self.store()
            .insert_query_run(
                &caller.org_id,
                &QueryRun {
                    id: new_id(),
                    executed_by: caller.actor().to_string(),
                    sql: req.sql.clone(),
                    database: DATABASE.to_string(),
                    status,
                    error,
                    row_count,
                    execution_time_ms,
                    executed_at,
                },
            )
            .await?;
        let out = outcome.map_err(refusal)?;
        Ok(SqlAnswer {
            row_count: out.rows.len() as u64,
            columns: out.columns,
            rows: out.rows,
            execution_time_ms,
            truncated: out.truncated,
        })
    }

    /// The history, newest first: an administrator's is the organization's, anyone else's
    /// their own.
    pub async fn query_history(&self, caller: &Caller, page: Page) -> AppResult<Paged<QueryRun>> {
        let who = (!caller.scopes.contains(&Scope::Admin)).then(|| caller.actor());
        Ok(self.store().query_runs(&caller.org_id, who, page).await?)
    }

    pub async fn save_query(&self, caller: &Caller, new: NewSavedQuery) -> AppResult<SavedQuery> {
        let f = SavedQueryFields {
            name: new.name.trim().to_string(),
            sql: new.sql,
            database: new.database.unwrap_or_else(|| DATABASE.to_string()),
            description: new.description,
        };
        check_saved(&f)?;
        Ok(self
            .store()
            .create_saved_query(&caller.org_id, caller.actor(), &f)
            .await?)
    }

    pub async fn saved_queries(&self, org_id: &str, page: Page) -> AppResult<Paged<SavedQuery>> {
        Ok(self.store().saved_queries(org_id, page).await?)
    }

    pub async fn saved_query(&self, org_id: &str, id: &str) -> AppResult<SavedQuery> {
        self.store()
            .saved_query(org_id, id)
            .await
            .map_err(AppError::missing("saved query"))
    }

    pub async fn update_saved_query(
        &self,
        org_id: &str,
        id: &str,
        u: SavedQueryUpdate,
    ) -> AppResult<SavedQuery> {
        let c = self.saved_query(org_id, id).await?;
        let f = SavedQueryFields {
            name: u.name.map_or(c.name, |n| n.trim().to_string()),
            sql: u.sql.unwrap_or(c.sql),
            database: u.database.unwrap_or(c.database),
            description: u.description.unwrap_or(c.description),
        };
        check_saved(&f)?;
        self.store()
            .update_saved_query(org_id, id, &f)
            .await
            .map_err(AppError::missing("saved query"))
    }

    pub async fn delete_saved_query(&self, org_id: &str, id: &str) -> AppResult<()> {
        self.store()
            .delete_saved_query(org_id, id)
            .await
            .map_err(AppError::missing("saved query"))
    }

    pub async fn rls_rules(&self, org_id: &str) -> AppResult<Vec<RlsRule>> {
        Ok(self.store().rls_rules(org_id).await?)
    }

    pub async fn create_rls_rule(&self, org_id: &str, new: NewRlsRule) -> AppResult<RlsRule> {
        let f = RlsRuleFields {
            name: new.name.trim().to_string(),
            table: new.table.trim().to_string(),
            clause: new.clause,
            roles: new.roles.unwrap_or_else(all_roles),
        };
        check_rule(&f)?;
        Ok(self.store().create_rls_rule(org_id, &f).await?)
    }

    pub async fn update_rls_rule(
        &self,
        org_id: &str,
        id: &str,
        u: RlsRuleUpdate,
    ) -> AppResult<RlsRule> {
        let c = self
            .store()
            .rls_rule(org_id, id)
            .await
            .map_err(AppError::missing("RLS rule"))?;
        let f = RlsRuleFields {
            name: u.name.map_or(c.name, |n| n.trim().to_string()),
            table: u.table.map_or(c.table, |t| t.trim().to_string()),
            clause: u.clause.unwrap_or(c.clause),
            roles: u.roles.unwrap_or(c.roles),
        };
        check_rule(&f)?;
        self.store()
            .update_rls_rule(org_id, id, &f)
            .await
            .map_err(AppError::missing("RLS rule"))
    }

    pub async fn delete_rls_rule(&self, org_id: &str, id: &str) -> AppResult<()> {
        self.store()
            .delete_rls_rule(org_id, id)
            .await
            .map_err(AppError::missing("RLS rule"))
    }

    /// Runs SQL under one rule, a role's rules or a user's (exactly one of them), as that
    /// caller would see it.
    pub async fn test_rls(&self, org_id: &str, t: RlsTest) -> AppResult<RlsTestAnswer> {
        let mut v = Validator::new();
        match &t.sql {
            None => v.add("sql", "is required: the query to run under the rules"),
            Some(sql) => check_sql(&mut v, sql),
        }
        check_database(&mut v, t.database.as_deref());
        let named = [t.rule_id.is_some(), t.role.is_some(), t.user_id.is_some()];
        v.check(
            named.iter().filter(|x| **x).count() == 1,
            "rule_id",
            "name exactly one of rule_id, role or user_id",
        );
        v.finish()?;
        let rules = if let Some(id) = &t.rule_id {
            vec![
                self.store()
                    .rls_rule(org_id, id)
                    .await
                    .map_err(AppError::missing("RLS rule"))?,
            ]
        } else if let Some(role) = t.role {
            self.rules_of_role(org_id, role).await?
        } else {
            let user = t.user_id.as_deref().unwrap_or_default();
            let role = self
                .store()
                .member(org_id, user)
                .await
                .map_err(AppError::missing("member"))?
                .role;
            self.rules_of_role(org_id, role).await?
        };
        let rls = conditions(&rules);
        let config = self.bi_config(org_id).await?;
        let _slot = self.query_slot(org_id, &config)?;
        let out = self
            .run_sql(
                org_id,
                &config,
                &rls,
                t.sql.as_deref().unwrap_or_default(),
                config.row_limit as usize,
            )
            .await
            .map_err(refusal)?;
        Ok(RlsTestAnswer {
            effective_filter: effective_filter(&rls),
            row_count: out.rows.len() as u64,
            columns: out.columns,
            rows: out.rows,
        })
    }
}

/// What the engine's refusal is to the caller: the SQL's fault (400 on `sql`), or storage's.
pub(crate) fn refusal(e: BiError) -> AppError {
    match e {
        BiError::Query(_) | BiError::Timeout(_) => AppError::invalid("sql", e.to_string()),
        BiError::Source(_) => AppError::internal("a BI query's read of storage failed", e),
    }
}
