//! The application layer of plantd: every use case of the platform as a method of [`App`] (one
//! module per domain, named as its store and API modules are), and the background workers
//! (telemetry intake with its quotas, the connector supervisor, the alert engine, the delivery
//! worker with its webhook, email and Slack sending, retention and usage). It knows no HTTP: the
//! API, the command line and tests call it alike. This file only declares and re-exports.

pub mod access;
pub mod accounts;
mod alert_engine;
pub mod alerts;
pub mod api_keys;
mod app;
pub mod audit;
pub mod bi;
pub mod bi_embed;
pub mod bi_reports;
mod bi_source;
mod bi_widgets;
mod caller;
mod config;
mod connectors;
pub mod dashboards;
pub mod data_sources;
mod deliveries;
pub mod demo;
pub mod device_channel;
mod device_seen;
pub mod edge_clone;
pub mod edge_forward;
pub mod edge_uplink;
mod error;
pub mod events;
pub mod fleet;
mod key_cache;
mod key_ring;
pub mod licenses;
mod metrics;
mod migration_copy;
mod migration_target;
pub mod ml_datasets;
pub mod ml_labels;
pub mod ml_models;
pub mod ml_training;
pub mod ml_versions;
mod node_events;
pub mod notifications;
pub mod oauth;
pub mod oauth_apps;
mod oauth_error;
pub mod operator;
pub mod orgs;
pub mod ota;
pub mod ota_packages;
pub mod overview;
mod password_work;
pub mod products;
pub mod provisioning;
mod query_slots;
pub mod rate_limit;
pub mod region_migration;
mod regional;
pub mod regions;
pub mod replication;
pub mod sessions;
mod signing;
mod standby;
pub mod system;
pub mod tags;
pub mod telemetry;
#[cfg(test)]
mod tests;
mod uplink_state;
mod usage;
mod usb_state;
pub mod usb_watch;
pub mod users;
pub mod webhooks;
mod worker_board;
mod workers;

pub use app::App;
pub use caller::{Caller, Credential};
pub use config::{AppConfig, EdgeSettings};
pub use error::{AppError, AppResult};
pub use oauth_error::OAuthError;
pub use uplink_state::{FailoverEvent, ForwardingView};
pub use usage::RequestCounter;
pub use worker_board::WorkerState;
pub use workers::Workers;
