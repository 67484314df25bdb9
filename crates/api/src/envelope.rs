//! Success envelopes (SPEC 2.1): `{"data": ...}` and `{"data": [...], "meta": {page, per_page, total}}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use plantd_model::page::{Page, PageMeta, Paged};
use serde::Serialize;

use crate::pipeline::AuditResource;

#[derive(Serialize, utoipa::ToSchema)]
pub struct Data<T> {
    pub data: T,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct List<T> {
    pub data: Vec<T>,
    pub meta: PageMeta,
}

/// 200 with `{"data": value}`.
pub fn ok<T: Serialize>(data: T) -> Response {
    Json(Data { data }).into_response()
}

/// 201 with `{"data": value}`, recording the new resource's id for the audit trail.
pub fn created<T: Serialize>(id: &str, data: T) -> Response {
    let mut r = (StatusCode::CREATED, Json(Data { data })).into_response();
    r.extensions_mut().insert(AuditResource(id.to_string()));
    r
}

/// 204 without a body.
pub fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// 200 with a page of items mapped to their views.
pub fn list<T, V: Serialize>(page: Page, paged: Paged<T>, view: impl Fn(T) -> V) -> Response {
    Json(List {
        meta: PageMeta::new(page, paged.total),
        data: paged.items.into_iter().map(view).collect(),
    })
    .into_response()
}
