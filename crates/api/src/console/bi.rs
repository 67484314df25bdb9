//! The BI pages: SQL Lab (the tables and their columns beside an editor that runs with
//! Ctrl+Enter, the answer as a table and a chart, saved queries and the history; kept by
//! `assets/bi.js`) and, for administrators, the row-level-security rules with their test.
//! Every change and every query goes through `/v1` from the forms, as on the other pages.

use axum::extract::State;
use axum::response::Response;
use maud::{Markup, html};
use plantd_model::page::Page;

use super::browser::Browser;
use super::kit::{ALL, OrPage, action_button, field, time};
use super::layout::shell;
use crate::state::AppState;

const SCRIPTS: &[&str] = &["vendor/uplot/uPlot.iife.min.js", "bi.js"];

/// Where `bi.js` draws an answer: a summary, the chart and the table (SQL Lab and the RLS
/// test alike).
fn answer_box() -> Markup {
    html! {
        div id="sql-answer" hidden {
            p id="sql-summary" aria-live="polite" {}
            div id="sql-chart" {}
            div class="table-scroll" { table id="sql-table" class="list" {} }
        }
    }
}

/// A button that puts a query's SQL into the editor.
fn load_button(sql: &str, label: &str) -> Markup {
    html! { button type="button" class="link load-sql" data-sql=(sql) title=(sql) { (label) } }
}

pub(crate) async fn sql_lab(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let caller = &browser.caller;
    let config = state.app.bi_config(org).await.or_page(&browser)?;
    let saved = state
        .app
        .saved_queries(org, ALL)
        .await
        .or_page(&browser)?
        .items;
    let history = state
        .app
        .query_history(
            caller,
            Page {
                page: 1,
                per_page: 20,
            },
        )
        .await
        .or_page(&browser)?
        .items;
    let tables = state.app.bi_tables();
    let body = html! {
        h1 { "SQL Lab" }
        @if !config.sql_lab_enabled {
            p class="notice" { "SQL Lab is turned off for this organization (BI configuration " code { "sql_lab_enabled" } ")." }
        }
        div class="sql-lab" {
            aside class="sql-tables" aria-label="Tables" {
                h2 { "Tables" }
                p class="hint" { "Database " code { "plantd" } ". Click a name to insert it." }
                @for t in &tables {
                    details {
                        summary { button type="button" class="link insert-name" data-insert=(t.name) { (t.name) } }
                        ul {
                            @for c in &t.columns {
                                li { button type="button" class="link insert-name" data-insert=(c.name) { (c.name) } " " span class="hint" { (c.kind) } }
                            }
                        }
                    }
                }
            }
            section class="sql-main" {
                form id="sql-run" class="api-form" data-method="POST" data-action="/v1/bi/query/execute" {
                    label for="sql-editor" { "SQL (Ctrl+Enter runs)" }
                    textarea id="sql-editor" name="sql" rows="8" spellcheck="false" required {
                        "SELECT asset_id, tag_name, count(*) AS points, avg(value) AS average\nFROM telemetry_1h\nGROUP BY asset_id, tag_name\nORDER BY asset_id, tag_name"
                    }
                    p class="field-error" data-error-for="sql" {}
                    (field("sql-limit", "limit", "Row limit", html! { input id="sql-limit" name="limit" type="number" data-type="number" min="1" max=(config.row_limit) placeholder=(config.row_limit); }))
                    button type="submit" class="primary" { "Run" }
                    p class="form-error" role="alert" {}
                }
                (answer_box())
                form id="sql-save" class="api-form" data-method="POST" data-action="/v1/bi/query/save" {
                    h2 { "Save this query" }
                    input type="hidden" name="sql";
                    (field("save-name", "name", "Name", html! { input id="save-name" name="name" required maxlength="200"; }))
                    (field("save-description", "description", "Description", html! { input id="save-description" name="description" maxlength="2000"; }))
                    button type="submit" { "Save" }
                    p class="form-error" role="alert" {}
                }
                h2 { "Saved queries" }
                @if saved.is_empty() { p class="hint" { "None yet." } }
                ul class="saved-queries" {
                    @for s in &saved {
                        li {
                            (load_button(&s.sql, &s.name))
                            @if !s.description.is_empty() { " " span class="hint" { (s.description) } }
                            " "
                            (action_button("DELETE", &format!("/v1/bi/query/saved/{}", s.id), "Delete", "danger",
                                Some(format!("Delete the saved query “{}”?", s.name))))
                        }
                    }
                }
                h2 { "History" }
                table class="list" id="sql-history" {
                    thead { tr { th scope="col" { "When" } th scope="col" { "SQL" } th scope="col" { "Status" } th scope="col" { "Rows" } th scope="col" { "Time" } } }
                    tbody {
                        @for r in &history {
                            tr {
                                td { (time(r.executed_at)) }
                                td { (load_button(&r.sql, &r.sql.chars().take(80).collect::<String>())) }
                                td {
                                    span class=(format!("badge {}", if r.status.as_str() == "success" { "ok" } else { "critical" })) { (r.status.as_str()) }
                                    @if let Some(e) = &r.error { " " span class="hint" { (e) } }
                                }
                                td { (r.row_count) }
                                td { (r.execution_time_ms) " ms" }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(shell(&browser, body, SCRIPTS))
}

pub(crate) async fn rls(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let rules = state.app.rls_rules(org).await.or_page(&browser)?;
    let tables = state.app.bi_tables();
    let roles = ["owner", "admin", "member"];
    let body = html! {
        h1 { "Row-level security" }
        p class="hint" {
            "A rule limits the rows of one table that people of the roles it names see, in SQL Lab, saved queries and reports; the member role's rules also hold for embedded dashboards. "
            "Several rules on a table for a role must all hold. API keys without a user are under no rule."
        }
        table class="list" {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Table" } th scope="col" { "Condition" } th scope="col" { "Roles" } th scope="col" { "Actions" } } }
            tbody {
                @for r in &rules {
                    tr {
                        td { (r.name) }
                        td { code { (r.table) } }
                        td { code { (r.clause) } }
                        td { (r.roles.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(", ")) }
                        td class="actions" {
                            (action_button("DELETE", &format!("/v1/bi/rls/rules/{}", r.id), "Delete", "danger",
                                Some(format!("Delete the rule “{}”? Its roles then see every row of {}.", r.name, r.table))))
                        }
                    }
                }
            }
        }
        section {
            h2 { "New rule" }
            form class="api-form" data-method="POST" data-action="/v1/bi/rls/rules" {
                (field("rule-name", "name", "Name", html! { input id="rule-name" name="name" required maxlength="200"; }))
                label for="rule-table" { "Table" }
                select id="rule-table" name="table" {
                    @for t in &tables { option value=(t.name) { (t.name) } }
                }
                p class="field-error" data-error-for="table" {}
                (field("rule-clause", "clause", "Condition (SQL over the table's columns)", html! { input id="rule-clause" name="clause" required placeholder="asset_id IN ('pump-1', 'pump-2')"; }))
                fieldset {
                    legend { "Roles" }
                    @for role in roles {
                        label { input type="checkbox" name="roles" value=(role) data-type="list" checked; " " (role) }
                    }
                }
                p class="field-error" data-error-for="roles" {}
                button type="submit" class="primary" { "Add rule" }
                p class="form-error" role="alert" {}
            }
        }
        section {
            h2 { "Test" }
            form id="rls-test" class="api-form" data-method="POST" data-action="/v1/bi/rls/test" {
                label for="test-sql" { "SQL" }
                textarea id="test-sql" name="sql" rows="4" spellcheck="false" required { "SELECT asset_id, count(*) FROM telemetry GROUP BY asset_id ORDER BY asset_id" }
                p class="field-error" data-error-for="sql" {}
                label for="test-role" { "As role" }
                select id="test-role" name="role" {
                    @for role in roles { option value=(role) selected[role == "member"] { (role) } }
                }
                button type="submit" { "Run as this role" }
                p class="form-error" role="alert" {}
            }
            (answer_box())
        }
    };
    Ok(shell(&browser, body, SCRIPTS))
}
