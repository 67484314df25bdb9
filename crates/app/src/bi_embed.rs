//! Embedded dashboards (SPEC 2.10, 4.11; docs/api.md, "Embedded dashboards"): an
//! administrator issues a guest token, an RS256 JWT of type `guest+jwt` from the identity's
//! keys, scoped to dashboards and carrying row-level-security clauses of its own; a page
//! elsewhere frames the dashboard with it. A guest token opens nothing but its dashboards'
//! widget data, read through the BI engine under the `member` role's rules and its own
//! clauses; it is never an access token, and once expired it opens nothing.

use plantd_auth::jwt::{GuestClaims, GuestResource, GuestRls};
use plantd_bi::{Rls, Table};
use plantd_model::bi::BiConfig;
use plantd_model::org::Role;
use plantd_model::validation::Validator;
use plantd_model::{Timestamp, new_id};
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::bi::{conditions, dashboard_id_of, table_named};
use crate::caller::Caller;
use crate::dashboards::Dashboard;
use crate::error::{AppError, AppResult};
use plantd_model::bi::DashboardData;

/// Resources and clauses a guest token may carry.
const MAX_RESOURCES: usize = 20;
const MAX_CLAUSES: usize = 20;
/// The tables a guest token's clause without a table applies to: those a dashboard reads.
const DASHBOARD_TABLES: [Table; 5] = [
    Table::Telemetry,
    Table::Telemetry1m,
    Table::Telemetry1h,
    Table::Telemetry1d,
    Table::Alerts,
];

/// A dashboard that may be embedded.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct EmbeddableDashboard {
    pub id: String,
    pub name: String,
}

/// `POST /v1/bi-embed/guest-token`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GuestTokenRequest {
    /// The console dashboard's id (SPEC 2.10's integer is read as the id).
    #[schema(value_type = String)]
    pub dashboard_id: serde_json::Value,
    /// The dashboards the token opens (`{type: "dashboard", id}`); `dashboard_id` is always
    /// among them.
    #[serde(default)]
    pub resources: Vec<ResourceIn>,
    /// Row-level-security clauses of the token, ANDed with the rules of the `member` role.
    #[serde(default)]
    pub rls: Vec<GuestRlsIn>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceIn {
    #[serde(rename = "type")]
    pub kind: String,
    #[schema(value_type = String)]
    pub id: serde_json::Value,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GuestRlsIn {
    /// A BI table; absent: every table a dashboard reads (`telemetry`, its rollups and
    /// `alerts`), where the clause must hold on each.
    pub table: Option<String>,
    /// A SQL boolean expression over the table's columns.
    pub clause: String,
}

#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct GuestToken {
    pub token: String,
    pub expires_at: Timestamp,
}

/// A guest token's dashboard, opened.
pub struct GuestView {
    pub dashboard: Dashboard,
    pub config: BiConfig,
    pub claims: GuestClaims,
}

/// The tables a guest clause applies to: the one it names (none if unknown), else every table
/// a dashboard reads.
fn clause_tables(table: Option<&str>) -> Vec<Table> {
    match table {
        Some(name) => Table::parse(name).into_iter().collect(),
        None => DASHBOARD_TABLES.to_vec(),
    }
}

/// A guest token's clauses as the engine takes them.
fn guest_conditions(rls: &[GuestRls]) -> Vec<Rls> {
    rls.iter()
        .flat_map(|r| {
            clause_tables(r.table.as_deref())
                .into_iter()
                .map(|table| Rls {
                    table,
                    clause: r.clause.clone(),
                })
        })
        .collect()
}

impl App {
    async fn embedding_config(&self, org_id: &str) -> AppResult<BiConfig> {
        let config = self.bi_config(org_id).await?;
        if !config.bi_embed_enabled {
            return Err(AppError::Forbidden(
                "embedding is turned off for this organization (BI configuration bi_embed_enabled)"
                    .into(),
            ));
        }
        Ok(config)
    }

    /// `GET /v1/bi-embed/dashboards`: every console dashboard, while embedding is on.
    pub async fn embeddable_dashboards(&self, org_id: &str) -> AppResult<Vec<EmbeddableDashboard>> {
        self.embedding_config(org_id).await?;
        let all = self
            .dashboards(
                org_id,
                plantd_model::page::Page {
                    page: 1,
                    per_page: 10_000,
                },
            )
            .await?;
        Ok(all
            .items
            .into_iter()
            .map(|d| EmbeddableDashboard {
                id: d.id,
                name: d.name,
            })
            .collect())
    }

    /// `POST /v1/bi-embed/guest-token`: a token opening the named dashboards, living
    /// `[bi] guest_token_ttl_secs`.
    pub async fn issue_guest_token(
        &self,
        caller: &Caller,
        req: GuestTokenRequest,
    ) -> AppResult<GuestToken> {
        let mut v = Validator::new();
        let dashboard_id = dashboard_id_of(&req.dashboard_id);
        v.check(
            dashboard_id.is_some(),
            "dashboard_id",
            "must be a dashboard's id (a string, or a number)",
        );
        v.check(
            req.resources.len() <= MAX_RESOURCES,
            "resources",
            format!("must list at most {MAX_RESOURCES} resources"),
        );
        let mut ids: Vec<String> = dashboard_id.iter().cloned().collect();
        for (i, r) in req.resources.iter().enumerate() {
            v.check(
                r.kind == "dashboard",
                &format!("resources[{i}].type"),
                "must be 'dashboard' (the only resource a guest token opens)",
            );
            match dashboard_id_of(&r.id) {
                Some(id) if !ids.contains(&id) => ids.push(id),
                Some(_) => {}
                None => v.add(format!("resources[{i}].id"), "must be a dashboard's id"),
            }
        }
        v.check(
            req.rls.len() <= MAX_CLAUSES,
            "rls",
            format!("must hold at most {MAX_CLAUSES} clauses"),
        );
        for (i, r) in req.rls.iter().enumerate() {
            let field = format!("rls[{i}]");
            if r.clause.trim().is_empty() {
                v.add(format!("{field}.clause"), "must not be empty");
                continue;
            }
            if let Some(name) = r.table.as_deref()
                && table_named(&mut v, &format!("{field}.table"), name).is_none()
            {
                continue;
            }
            for t in clause_tables(r.table.as_deref()) {
                if let Err(e) = plantd_bi::check_clause(t, &r.clause) {
                    let hint = if r.table.is_none() {
                        " (a clause without a table must hold on telemetry, its rollups and alerts: name a table)"
                    } else {
                        ""
                    };
                    v.add(
                        format!("{field}.clause"),
                        format!("on {}: {e}{hint}", t.name()),
                    );
                    break;
                }
            }
        }
        v.finish()?;
        self.embedding_config(&caller.org_id).await?;
        for (i, id) in ids.iter().enumerate() {
            let field = if i == 0 { "dashboard_id" } else { "resources" };
            self.dashboard_named(&caller.org_id, id, field).await?;
        }
        let now = Timestamp::now().unix_seconds();
        let exp = now + self.config().guest_token_ttl.as_secs() as i64;
        let token = self
            .sign_guest_token(GuestClaims {
                iss: String::new(),
                aud: String::new(),
                sub: caller.actor().to_string(),
                exp,
                iat: now,
                jti: new_id(),
                org: caller.org_id.clone(),
                resources: ids
                    .into_iter()
                    .map(|id| GuestResource {
                        kind: "dashboard".into(),
                        id,
                    })
                    .collect(),
                rls: req
                    .rls
                    .into_iter()
                    .map(|r| GuestRls {
                        table: r.table,
                        clause: r.clause,
                    })
                    .collect(),
            })
            .await?;
        Ok(GuestToken {
            token,
            expires_at: Timestamp::from_millis(exp * 1000),
        })
    }

    /// The dashboard a guest token opens: the token is valid now, names the dashboard, and its
    /// organization still allows embedding.
    pub async fn guest_view(&self, token: &str, dashboard_id: &str) -> AppResult<GuestView> {
        let claims = self.verify_guest_token(token).await?;
        if !claims
            .resources
            .iter()
            .any(|r| r.kind == "dashboard" && r.id == dashboard_id)
        {
            return Err(AppError::Forbidden(format!(
                "the guest token does not open the dashboard '{dashboard_id}'"
            )));
        }
        let config = self.embedding_config(&claims.org).await?;
        let dashboard = self.dashboard(&claims.org, dashboard_id).await?;
        Ok(GuestView {
            dashboard,
            config,
            claims,
        })
    }

    /// What a guest token's dashboard shows now, with the `variables` chosen (`var-<name>`):
    /// its widgets' queries under the `member` role's rules and the token's clauses, in one of
    /// the organization's query slots.
    pub async fn guest_dashboard_data(
        &self,
        token: &str,
        dashboard_id: &str,
        variables: &std::collections::HashMap<String, String>,
    ) -> AppResult<DashboardData> {
        let view = self.guest_view(token, dashboard_id).await?;
        let org = &view.claims.org;
        let mut rls = conditions(&self.rules_of_role(org, Role::Member).await?);
        rls.extend(guest_conditions(&view.claims.rls));
        let _slot = self.query_slot(org, &view.config)?;
        self.dashboard_data(org, &view.config, &rls, &view.dashboard, variables)
            .await
    }
}
