//! One module per feature of the API.

pub mod alerts;
pub mod api_keys;
pub mod audit;
pub mod data_sources;
pub mod notifications;
pub mod orgs;
pub mod stream;
pub mod system;
pub mod telemetry;
pub mod users;
pub mod webhooks;

use plantd_model::page::{Page, PageQuery, Paged};

use crate::error::ApiError;

/// Checks the pagination parameters of a list route.
pub fn page_of(q: PageQuery) -> Result<Page, ApiError> {
    Page::new(q.page, q.per_page).map_err(ApiError::Validation)
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
