//! The integration tests of plantd in one binary (one link of the whole stack, not one per
//! file): HTTP against the server in-process (`spawn_app`), and the real `plantd` binary where
//! the command line, a crash or the simulator are tested. One module per domain; shared helpers
//! are in `plantd-test-support`.

mod alerts;
mod auth;
mod bi;
mod bi_embed;
mod bi_reports;
mod browser;
mod cli;
mod connectors;
mod console;
mod conventions;
mod crash;
mod dashboards;
mod data_sources;
mod discovery;
mod edge;
mod edge_setup;
mod edge_update;
mod edge_uplink;
mod fleet;
mod identity;
mod licenses;
mod metrics;
mod ml_datasets;
mod ml_models;
mod oauth;
mod orgs_users_audit;
mod ota;
mod rate_limits;
mod region_migration;
mod regions;
mod security;
mod sim;
mod sim_control;
mod stream;
mod telemetry;
mod tenancy;
