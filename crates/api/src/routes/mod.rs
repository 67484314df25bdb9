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

/// An http:// or https:// URL of at most 2,000 characters that plantd posts to (webhooks,
/// Slack).
pub(crate) fn check_post_url(v: &mut plantd_model::validation::Validator, field: &str, url: &str) {
    match plantd_model::data_source::parse_url(url) {
        Ok(u) if ["http", "https"].contains(&u.scheme.as_str()) && url.len() <= 2000 => {}
        Ok(_) => v.add(
            field,
            "must be an http:// or https:// URL of at most 2000 characters",
        ),
        Err(e) => v.add(field, e),
    }
}
