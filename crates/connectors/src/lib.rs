//! Protocol connectors of plantd: an OPC UA client with subscriptions, a Modbus TCP poller and
//! an MQTT subscriber. Each turns what it reads into telemetry points in a [`Sink`]; whoever
//! runs the connector (the server's supervisor) stores them and records the connection state.
//! No storage or API here (DESIGN: protocol crates never depend on them).
//!
//! A connector is [`run`] until told to stop: it opens a session, reports `connected`, streams
//! points, and when the session fails reports `disconnected` with the reason and tries again
//! after a delay that doubles from [`BACKOFF_FIRST`] to [`BACKOFF_MAX`].

mod browse;
pub mod discovery;
pub mod mdns;
pub mod modbus;
pub mod mqtt;
pub mod net;
pub mod opcua;
pub mod sparkplug;
// Generated (see its first lines): not formatted, not linted.
#[rustfmt::skip]
#[allow(clippy::all, clippy::pedantic)]
mod sparkplug_proto;
mod opcua_browse;
mod opcua_properties;
mod sink;

pub use browse::{MAX_LISTEN, browse};
pub use net::PROBE_TIMEOUT;
pub use plantd_model::data_source::BrowseError;
pub use sink::{ConnectionState, MAX_BUFFERED_POINTS, Sink};
mod protocol;

pub use protocol::{
    BACKOFF_FIRST, BACKOFF_MAX, BACKOFF_RESET_AFTER, ConfigError, Probe, Protocol, probe, run,
};
