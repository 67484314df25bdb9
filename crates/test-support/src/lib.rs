//! Test fixtures: [`spawn_app`] starts the real API server on port 0 with a fresh database (a
//! SQLite file in a temporary directory, or a new PostgreSQL database on the server named by
//! `PLANTD_TEST_DATABASE_URL`) and talks HTTP to it; [`ServerProcess`] runs the real binary;
//! waiting, WebSocket and TLS helpers.

mod latency;
mod mail;
pub mod mqtt;
mod process;
pub mod relay;
pub mod stream;
mod tls;
mod wait;

pub use latency::{DelayedRelay, delayed_relay};
pub use mail::SmtpSink;
pub use plantd_store::testing::{TEST_DATABASE_ENV, fresh_database};
pub use process::ServerProcess;
pub use tls::private_ca;
pub use wait::{temp_dir, unique_name, wait_for};
mod app;

pub use app::{
    Reply, TestApp, bind_loopback, client, peer, printed_every, run_interop, spawn_app,
    spawn_app_on, spawn_app_with, spawn_empty_on,
};
