//! Domain types of plantd: ids, timestamps, scopes, tiers, validation and records. No I/O here.

pub mod alert;
pub mod api_key;
pub mod audit;
pub mod bi;
pub mod dashboard;
pub mod data_source;
pub mod device;
pub mod discovery;
pub mod edge_regions;
pub mod errors;
pub mod event;
mod id;
pub mod identity;
pub mod json;
pub mod license;
pub mod ml;
pub mod ml_models;
pub mod org;
pub mod ota;
pub mod page;
pub mod provisioning;
pub mod region;
pub mod scope;
pub mod tag;
pub mod telemetry;
pub mod tier;
pub mod timestamp;
pub mod validation;

pub use errors::error_chain;
pub use id::new_id;
pub use scope::Scope;
pub use tier::Tier;
pub use timestamp::Timestamp;
pub use validation::{FieldError, Validator};
