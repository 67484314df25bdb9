//! The tags of an asset and what each measures (SPEC 2.17 units and ranges; decided in
//! docs/api.md, "Tags"): list, read, and a person's description.

use axum::extract::State;
use axum::response::Response;
use plantd_app::tags::TagUpdate;
use plantd_model::Scope::{ReadAssets, WriteAssets};
use plantd_model::audit::AuditEvent;
use plantd_model::page::PageQuery;
use plantd_model::tag::Tag;

use crate::audit_record::AuditResource;
use crate::envelope::{Data, List, list, ok, page_in_memory, page_of_query};
use crate::error::ApiResult;
use crate::extract::{Auth, PathOf, ValidJson, ValidQuery};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(list_tags, Policy::scope(ReadAssets, AuditEvent::TagList)),
        route!(get_tag, Policy::scope(ReadAssets, AuditEvent::TagRead)),
        route!(
            update_tag,
            Policy::scope(WriteAssets, AuditEvent::TagUpdate)
        ),
    ]
}

/// The tags of an asset by name: every tag with points, and those described before their
/// first point, with their unit, description and engineering range.
#[utoipa::path(get, path = "/assets/{asset_id}/tags", tag = "assets",
    params(("asset_id" = String, Path), PageQuery),
    responses((status = 200, body = List<Tag>)))]
async fn list_tags(
    State(state): State<AppState>,
    caller: Auth,
    PathOf(asset_id): PathOf<String>,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let all = state.app.asset_tags(&caller.org_id, &asset_id).await?;
    Ok(list(page, page_in_memory(page, all), |t| t))
}

/// One tag of an asset (404 when it has neither points nor a description).
#[utoipa::path(get, path = "/assets/{asset_id}/tags/{tag_name}", tag = "assets",
    params(("asset_id" = String, Path), ("tag_name" = String, Path)),
    responses((status = 200, body = Data<Tag>)))]
async fn get_tag(
    State(state): State<AppState>,
    caller: Auth,
    PathOf((asset_id, tag_name)): PathOf<(String, String)>,
) -> ApiResult<Response> {
    let tag = state
        .app
        .asset_tag(&caller.org_id, &asset_id, &tag_name)
        .await?;
    Ok(ok(tag))
}

/// Describe a tag: unit, description, engineering range (absent fields keep their value,
/// `null` clears one). A person's description is kept: what the device says no longer
/// replaces it.
#[utoipa::path(put, path = "/assets/{asset_id}/tags/{tag_name}", tag = "assets",
    params(("asset_id" = String, Path), ("tag_name" = String, Path)), request_body = TagUpdate,
    responses((status = 200, body = Data<Tag>)))]
async fn update_tag(
    State(state): State<AppState>,
    caller: Auth,
    PathOf((asset_id, tag_name)): PathOf<(String, String)>,
    ValidJson(body): ValidJson<TagUpdate>,
) -> ApiResult<Response> {
    let tag = state
        .app
        .describe_tag(&caller.org_id, &asset_id, &tag_name, body)
        .await?;
    let mut r = ok(tag);
    r.extensions_mut()
        .insert(AuditResource(format!("{asset_id}/{tag_name}")));
    Ok(r)
}
