//! The dashboards: the list (create, import, duplicate, export, delete), one dashboard drawn
//! and kept live by `dashboard.js`, and the editor (`dashboard_edit.js`).

use axum::extract::State;
use axum::response::Response;
use maud::html;
use plantd_app::dashboards::Dashboard;
use plantd_model::Scope;

use super::browser::Browser;
use super::kit::{ALL, OrPage, PathId, time};
use super::layout::{shell, shell_titled};
use crate::state::AppState;

/// The dashboards, with create, import, duplicate, export and delete.
pub(crate) async fn list(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let list = state
        .app
        .dashboards(browser.org_id(), ALL)
        .await
        .or_page(&browser)?;
    let write = browser.may(Scope::WriteAssets);
    let body = html! {
        h1 { "Dashboards" }
        @if list.items.is_empty() {
            p class="quiet" { "No dashboards yet." }
        } @else {
            table class="list" {
                thead { tr { th scope="col" { "Name" } th scope="col" { "Description" } th scope="col" { "Widgets" } th scope="col" { "Updated" } th scope="col" { "Actions" } } }
                tbody {
                    @for d in &list.items {
                        tr {
                            td { a href=(format!("/dashboards/{}", d.id)) { (d.name) } }
                            td { (d.description) }
                            td class="num" { (d.layout.widgets.len()) }
                            td { (time(d.updated_at)) }
                            td class="actions" {
                                a href=(format!("/v1/dashboards/{}/export", d.id)) download { "Export" }
                                @if write {
                                    " "
                                    a href=(format!("/dashboards/{}/edit", d.id)) { "Edit" }
                                    form class="api-form inline" data-method="POST" data-action=(format!("/v1/dashboards/{}/duplicate", d.id)) data-redirect="/dashboards" {
                                        button type="submit" { "Duplicate" }
                                    }
                                    form class="api-form inline" data-method="DELETE" data-action=(format!("/v1/dashboards/{}", d.id)) data-confirm=(format!("Delete the dashboard “{}”?", d.name)) {
                                        button type="submit" class="danger" { "Delete" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if write {
            div class="forms" {
                section {
                    h2 { "New dashboard" }
                    form class="api-form" data-method="POST" data-action="/v1/dashboards" data-redirect="/dashboards/{id}/edit" {
                        label for="new-name" { "Name" }
                        input id="new-name" name="name" required maxlength="200";
                        p class="field-error" data-error-for="name" {}
                        label for="new-description" { "Description" }
                        input id="new-description" name="description" maxlength="2000";
                        p class="field-error" data-error-for="description" {}
                        button type="submit" class="primary" { "Create and edit" }
                        p class="form-error" role="alert" {}
                    }
                }
                section {
                    h2 { "Import" }
                    form class="api-form" data-method="POST" data-action="/v1/dashboards/import" data-body="document" data-redirect="/dashboards/{id}" {
                        label for="import-document" { "Exported dashboard (JSON)" }
                        textarea id="import-document" name="document" rows="6" required {}
                        p class="field-error" data-error-for="document" {}
                        button type="submit" { "Import" }
                        p class="form-error" role="alert" {}
                    }
                }
            }
        }
    };
    Ok(shell(&browser, body, &[]))
}

/// The dashboard a page shows, or the page saying why it cannot.
async fn shown(state: &AppState, browser: &Browser, id: &str) -> Result<Dashboard, Response> {
    state
        .app
        .dashboard(browser.org_id(), id)
        .await
        .or_page(browser)
}

/// One dashboard, drawn and kept live by `dashboard.js`.
pub(crate) async fn view(
    State(state): State<AppState>,
    browser: Browser,
    PathId(id): PathId,
) -> Result<Response, Response> {
    let d = shown(&state, &browser, &id).await?;
    let body = html! {
        div class="page-head" {
            h1 { (d.name) }
            @if browser.may(Scope::WriteAssets) {
                a class="button" href=(format!("/dashboards/{}/edit", d.id)) { "Edit" }
            }
        }
        @if !d.description.is_empty() { p class="quiet" { (d.description) } }
        div id="dashboard" data-dashboard-id=(d.id) {
            div class="dash-toolbar" id="toolbar" {}
            p class="error" id="dash-error" role="alert" hidden {}
            div class="grid" id="grid" {}
        }
    };
    Ok(shell_titled(
        &browser,
        &d.name,
        body,
        &["vendor/uplot/uPlot.iife.min.js", "dashboard.js"],
    ))
}

/// The editor: add, move, resize and configure widgets, then save (`dashboard_edit.js`).
pub(crate) async fn editor(
    State(state): State<AppState>,
    browser: Browser,
    PathId(id): PathId,
) -> Result<Response, Response> {
    let d = shown(&state, &browser, &id).await?;
    let assets = state.app.assets(browser.org_id()).await.unwrap_or_default();
    let body = html! {
        div class="page-head" {
            h1 { "Edit: " (d.name) }
            a class="button" href=(format!("/dashboards/{}", d.id)) { "View" }
        }
        div id="editor" data-dashboard-id=(d.id) {
            p class="error" id="editor-error" role="alert" hidden {}
            div class="editor-toolbar" id="editor-toolbar" {}
            div class="editor-body" {
                div class="grid editing" id="editor-grid" {}
                aside id="widget-form" aria-label="Widget settings" {}
            }
        }
        datalist id="asset-list" {
            @for (asset, _) in &assets { option value=(asset) {} }
        }
        @for (asset, tags) in &assets {
            datalist id=(format!("tags-{asset}")) class="tag-list" data-asset=(asset) {
                @for t in tags { option value=(t) {} }
            }
        }
    };
    Ok(shell_titled(
        &browser,
        &format!("Edit {}", d.name),
        body,
        &["dashboard_edit.js"],
    ))
}
