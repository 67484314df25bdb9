//! Dashboards (SPEC 2.4, 4.3): CRUD, duplicate, and export/import as a JSON document.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use plantd_app::dashboards::Dashboard;
use plantd_app::dashboards::{DashboardDocument, DashboardUpdate, NewDashboard};
use plantd_model::Scope::{ReadAssets, WriteAssets};
use plantd_model::Timestamp;
use plantd_model::audit::AuditEvent;
use plantd_model::dashboard::Layout;
use plantd_model::page::PageQuery;
use serde::Serialize;

use crate::envelope::{Data, List, created, list, no_content, ok, page_of_query};
use crate::error::ApiResult;
use crate::extract::{Auth, ById, ValidJson, ValidQuery};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(
            list_dashboards,
            Policy::scope(ReadAssets, AuditEvent::DashboardList)
        ),
        route!(
            create_dashboard,
            Policy::scope(WriteAssets, AuditEvent::DashboardCreate)
        ),
        route!(
            import_dashboard,
            Policy::scope(WriteAssets, AuditEvent::DashboardImport)
        ),
        route!(
            get_dashboard,
            Policy::scope(ReadAssets, AuditEvent::DashboardRead)
        ),
        route!(
            update_dashboard,
            Policy::scope(WriteAssets, AuditEvent::DashboardUpdate)
        ),
        route!(
            delete_dashboard,
            Policy::scope(WriteAssets, AuditEvent::DashboardDelete)
        ),
        route!(
            duplicate_dashboard,
            Policy::scope(WriteAssets, AuditEvent::DashboardDuplicate)
        ),
        route!(
            export_dashboard,
            Policy::scope(ReadAssets, AuditEvent::DashboardExport)
        ),
    ]
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DashboardView {
    pub id: String,
    pub name: String,
    pub description: String,
    pub layout: Layout,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<Dashboard> for DashboardView {
    fn from(d: Dashboard) -> Self {
        Self {
            id: d.id,
            name: d.name,
            description: d.description,
            layout: d.layout,
            created_at: d.created_at,
            updated_at: d.updated_at,
        }
    }
}

/// The organization's dashboards by name.
#[utoipa::path(get, path = "/dashboards", tag = "dashboards", params(PageQuery),
    responses((status = 200, body = List<DashboardView>)))]
async fn list_dashboards(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.dashboards(&caller.org_id, page).await?;
    Ok(list(page, paged, DashboardView::from))
}

/// Create a dashboard: name, description, layout (columns, widgets, variables).
#[utoipa::path(post, path = "/dashboards", tag = "dashboards", request_body = NewDashboard,
    responses((status = 201, body = Data<DashboardView>)))]
async fn create_dashboard(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewDashboard>,
) -> ApiResult<Response> {
    let d = state.app.create_dashboard(&caller.org_id, body).await?;
    Ok(created(&d.id.clone(), DashboardView::from(d)))
}

/// Create a dashboard from an exported document (`format` `plantd.dashboard/1`).
#[utoipa::path(post, path = "/dashboards/import", tag = "dashboards", request_body = DashboardDocument,
    responses((status = 201, body = Data<DashboardView>)))]
async fn import_dashboard(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<DashboardDocument>,
) -> ApiResult<Response> {
    let d = state.app.import_dashboard(&caller.org_id, body).await?;
    Ok(created(&d.id.clone(), DashboardView::from(d)))
}

#[utoipa::path(get, path = "/dashboards/{id}", tag = "dashboards", params(("id" = String, Path)),
    responses((status = 200, body = Data<DashboardView>)))]
async fn get_dashboard(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(DashboardView::from(
        state.app.dashboard(r.org(), &r.id).await?,
    )))
}

/// Partial update; a `layout` replaces the whole layout.
#[utoipa::path(put, path = "/dashboards/{id}", tag = "dashboards", params(("id" = String, Path)), request_body = DashboardUpdate,
    responses((status = 200, body = Data<DashboardView>)))]
async fn update_dashboard(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<DashboardUpdate>,
) -> ApiResult<Response> {
    let d = state.app.update_dashboard(r.org(), &r.id, body).await?;
    Ok(ok(DashboardView::from(d)))
}

#[utoipa::path(delete, path = "/dashboards/{id}", tag = "dashboards", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted")))]
async fn delete_dashboard(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    state.app.delete_dashboard(r.org(), &r.id).await?;
    Ok(no_content())
}

/// A copy named `<name> (copy)` with the same layout.
#[utoipa::path(post, path = "/dashboards/{id}/duplicate", tag = "dashboards", params(("id" = String, Path)),
    responses((status = 201, body = Data<DashboardView>)))]
async fn duplicate_dashboard(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    let d = state.app.duplicate_dashboard(r.org(), &r.id).await?;
    Ok(created(&d.id.clone(), DashboardView::from(d)))
}

/// The dashboard as a document to save and import elsewhere (an attachment, not enveloped).
#[utoipa::path(get, path = "/dashboards/{id}/export", tag = "dashboards", params(("id" = String, Path)),
    responses((status = 200, body = DashboardDocument)))]
async fn export_dashboard(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    let doc = state.app.export_dashboard(r.org(), &r.id).await?;
    let file: String = doc
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Ok((
        [(
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{file}.json\""),
        )],
        axum::Json(doc),
    )
        .into_response())
}
