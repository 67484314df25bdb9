//! Domain types of plantd: ids, timestamps, scopes, tiers, validation and records. No I/O here.

pub mod alert;
pub mod api_key;
pub mod audit;
pub mod dashboard;
pub mod data_source;
pub mod errors;
pub mod event;
pub mod identity;
pub mod license;
pub mod org;
pub mod page;
pub mod scope;
pub mod telemetry;
pub mod tier;
pub mod timestamp;
pub mod validation;

pub use errors::error_chain;
pub use scope::Scope;
pub use tier::Tier;
pub use timestamp::Timestamp;
pub use validation::{FieldError, Validator};

/// A new identifier: a UUID v7 string. Time-ordered ids keep `ORDER BY created_at, id` stable
/// and index-friendly on both backends.
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}
