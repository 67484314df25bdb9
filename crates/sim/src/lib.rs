//! `plantd sim`: a simulated plant (SPEC 2.17, 4.16). Pure simulation here (assets, patterns,
//! scenarios, configuration); the OPC UA server and the control API serve it.

pub mod announce;
pub mod catalog;
pub mod config;
pub mod control;
pub mod engine;
pub mod modbus;
pub mod opcua;
pub mod pattern;
pub mod server;

pub use config::{ConfigError, SimConfig};
pub use engine::{ControlError, Scenario, Simulation, Status, Value};
