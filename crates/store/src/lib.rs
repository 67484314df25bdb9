//! Storage of plantd on SQLite (the embedded default, a file in the data directory) or
//! PostgreSQL, chosen by the database URL's scheme. One SQL text with `$N` placeholders serves
//! both through sqlx's `Any` driver; migrations are embedded in the binary, one file per version
//! where both backends take the same SQL. One module per aggregate adds its methods to
//! [`Store`]; this file only declares and re-exports.

mod alerts;
mod api_keys;
mod audit;
mod audit_writer;
mod backend;
mod bi;
mod dashboards;
mod data_source_cache;
mod data_sources;
mod database;
mod device_channel;
mod devices;
mod error;
mod group_writer;
mod heartbeat_writer;
mod identity;
mod lease;
mod licenses;
mod migrate;
mod ml_datasets;
mod ml_models;
mod ml_rows;
mod notifications;
mod notify;
mod oauth;
mod orgs;
mod ota;
mod ota_packages;
mod ota_rollout;
mod provisioning;
mod region_migration;
mod replication;
mod rows;
mod sql;
mod standby;
mod store;
mod tags;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(test)]
mod tests;
mod webhooks;

pub use alerts::{AlertFilter, RuleFields};
pub use api_keys::NewApiKey;
pub use audit::{AuditFilter, AuditSummary, EventTypeCount};
pub use audit_writer::{NewAuditRecord, insert_audit_rows};
pub use backend::{Backend, backend_of, sqlite_file, sqlite_url_for};
pub use bi::{ReportFields, RlsRuleFields, SavedQueryFields};
pub use dashboards::Dashboard;
pub use data_sources::{ConnectorState, DataSourceUpdate, NewDataSource};
pub use database::WriteTx;
pub use device_channel::{DeviceHealthRecord, StatusChanged};
pub use devices::{
    DeviceFields, DeviceFilter, DeviceLogin, NewDevice, NewEnrollmentToken, RegisterError,
};
pub use error::{Result, StoreError};
pub use identity::{AccountTokenKind, NewAccountToken, NewSession, UsedAccountToken};
pub use lease::{CONNECTORS_LEASE, Lease, MIGRATION_LEASE, REPLICATION_LEASE};
pub use licenses::{Activated, LicenseFilter, NewLicense, ProductFields};
pub use ml_datasets::NewDataset;
pub use ml_models::Cancel;
pub use ml_rows::{LabelChange, Span};
pub use notifications::{
    AlertEvent, NewNotification, Notification, NotificationFilter, NotificationSettings,
};
pub use notify::NotifyTarget;
pub use oauth::{ClientRecord, CodeRecord, GrantRecord, NewApplication, NewCode, RefreshUse};
pub use orgs::NewUser;
pub use ota::{NewDeployment, OtaCommand, ReportUpdate};
pub use provisioning::{AssetWrite, Provisioned, ProvisionedAsset, Uplink};
pub use region_migration::{Cell, RESIDENT_TABLES, RegionMigration, ResidentTable, TableRows};
pub use replication::{Change, OutboxEntry};
pub use standby::StandbyCopy;
pub use store::Store;
pub use tags::StoredTag;
pub use webhooks::{AttemptOutcome, Delivery, Webhook};

pub(crate) use error::conflict_on_unique;
pub(crate) use sql::{Arg, Where, event_column, like_pattern};
