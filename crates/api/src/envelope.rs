//! Success envelopes (SPEC 2.1): `{"data": ...}` and `{"data": [...], "meta": {page, per_page, total}}`,
//! and the pagination of lists.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use plantd_model::page::{Page, PageMeta, PageQuery, Paged};
use serde::Serialize;

use crate::audit_record::AuditResource;
use crate::error::ApiError;

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

/// Checks the pagination parameters of a list route.
pub fn page_of(page: Option<i64>, per_page: Option<i64>) -> Result<Page, ApiError> {
    Page::new(page, per_page).map_err(ApiError::Validation)
}

/// Checks `?page=&per_page=` of a list route without other parameters.
pub fn page_of_query(q: PageQuery) -> Result<Page, ApiError> {
    page_of(q.page, q.per_page)
}

/// One page of a list held whole in memory.
pub fn page_in_memory<T>(page: Page, all: Vec<T>) -> Paged<T> {
    let total = all.len() as u64;
    let items = all
        .into_iter()
        .skip(page.offset() as usize)
        .take(page.limit() as usize)
        .collect();
    Paged { items, total }
}

/// A client-controlled text as a CSV cell that spreadsheets will not run as a formula (CSV
/// injection): one starting with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading
/// `'`. Every export writes names and texts through it.
pub fn csv_cell(text: &str) -> String {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}")
    } else {
        text.to_string()
    }
}

/// Declares the query parameters of a list route with the pagination parameters every list
/// takes (`page`, `per_page`), and `page()`, which checks them:
/// `paged_query! { pub struct AlertQuery { pub status: Option<AlertStatus>, } }`.
macro_rules! paged_query {
    ($(#[$attr:meta])* pub struct $name:ident { $($(#[$fattr:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$attr])*
        #[derive(serde::Deserialize, utoipa::IntoParams)]
        #[into_params(parameter_in = Query)]
        pub struct $name {
            $($(#[$fattr])* pub $field: $ty,)*
            /// Page number, from 1 (default 1).
            #[param(minimum = 1, maximum = 4294967295_i64)]
            #[serde(default, deserialize_with = "plantd_model::page::opt_i64")]
            pub page: Option<i64>,
            /// Items per page, 1 to 100 (default 20); larger values are clamped to 100.
            #[param(minimum = 1)]
            #[serde(default, deserialize_with = "plantd_model::page::opt_i64")]
            pub per_page: Option<i64>,
        }

        impl $name {
            /// The page asked for, checked.
            pub fn page(&self) -> Result<plantd_model::page::Page, $crate::error::ApiError> {
                $crate::envelope::page_of(self.page, self.per_page)
            }
        }
    };
}
pub(crate) use paged_query;
