//! Simulation server configuration (SPEC 2.17): YAML with the server keys, assets and custom
//! variables. A bad file is refused with the key and line at fault. The types are here; reading
//! and checking a file is in `load.rs`.

use serde::Deserialize;
use std::path::PathBuf;

use crate::catalog::{AssetType, DataType};
use crate::pattern::Pattern;

mod load;

/// OPC UA message security of the endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum SecurityMode {
    None,
    Sign,
    SignAndEncrypt,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum SecurityPolicy {
    Basic256Sha256,
}

/// The whole configuration, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    pub port: u16,
    pub security_mode: SecurityMode,
    pub security_policy: SecurityPolicy,
    /// User names and passwords the server accepts; none: anonymous clients only. With users,
    /// anonymous clients are refused.
    pub users: Vec<SimUser>,
    pub max_sessions: u32,
    pub max_subscriptions: u32,
    pub assets: Vec<AssetConfig>,
    /// Where relative replay files are looked up (the configuration file's folder).
    pub base_dir: PathBuf,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AssetConfig {
    pub id: String,
    pub kind: AssetType,
    pub enabled: bool,
    pub update_rate_ms: u32,
    pub initial_state_running: bool,
    pub linked_to: Option<String>,
    pub variables: Vec<CustomVariable>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomVariable {
    pub name: String,
    /// OPC UA node id (default `ns=<n>;s=<asset_id>.<name>`).
    #[serde(default)]
    pub node_id: Option<String>,
    #[serde(default = "float")]
    pub data_type: DataType,
    #[serde(default)]
    pub initial_value: Option<f64>,
    /// Engineering range `[low, high]` (extension): values are kept inside it.
    #[serde(default)]
    pub range: Option<(f64, f64)>,
    /// Engineering unit (extension).
    #[serde(default)]
    pub unit: Option<String>,
    #[serde(default)]
    pub simulation: Option<CheckedPattern>,
}

fn float() -> DataType {
    DataType::Float
}

/// A pattern whose parameters were checked while reading (so errors carry their line).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "Pattern")]
pub struct CheckedPattern(pub Pattern);

impl TryFrom<Pattern> for CheckedPattern {
    type Error = String;
    fn try_from(p: Pattern) -> Result<Self, String> {
        p.check().map(|()| CheckedPattern(p))
    }
}

impl std::ops::Deref for CheckedPattern {
    type Target = Pattern;
    fn deref(&self) -> &Pattern {
        &self.0
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    security: RawSecurity,
    #[serde(default = "ten")]
    max_sessions: u32,
    #[serde(default = "hundred")]
    max_subscriptions: u32,
    #[serde(default)]
    assets: Vec<RawAsset>,
}

fn ten() -> u32 {
    10
}
fn hundred() -> u32 {
    100
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    #[serde(default = "default_port")]
    port: u16,
}

impl Default for RawServer {
    fn default() -> Self {
        Self {
            port: default_port(),
        }
    }
}

fn default_port() -> u16 {
    4840
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSecurity {
    #[serde(default = "no_security")]
    mode: SecurityMode,
    #[serde(default = "basic256sha256")]
    policy: SecurityPolicy,
    #[serde(default)]
    users: Vec<SimUser>,
}

/// A user name and password the OPC UA server accepts.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimUser {
    pub username: String,
    pub password: String,
}

impl Default for RawSecurity {
    fn default() -> Self {
        Self {
            mode: SecurityMode::None,
            policy: SecurityPolicy::Basic256Sha256,
            users: Vec::new(),
        }
    }
}

fn no_security() -> SecurityMode {
    SecurityMode::None
}
fn basic256sha256() -> SecurityPolicy {
    SecurityPolicy::Basic256Sha256
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum InitialState {
    Running,
    Stopped,
}

/// Milliseconds between updates: 10 ms .. 1 hour.
#[derive(Clone, Copy, Deserialize)]
#[serde(try_from = "u32")]
struct UpdateRate(u32);

impl TryFrom<u32> for UpdateRate {
    type Error = String;
    fn try_from(ms: u32) -> Result<Self, String> {
        if (10..=3_600_000).contains(&ms) {
            Ok(UpdateRate(ms))
        } else {
            Err(format!(
                "update_rate_ms must be between 10 and 3600000, not {ms}"
            ))
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAsset {
    id: String,
    #[serde(rename = "type")]
    kind: AssetType,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    update_rate_ms: Option<UpdateRate>,
    #[serde(default)]
    initial_state: Option<InitialState>,
    #[serde(default)]
    linked_to: Option<String>,
    #[serde(default)]
    variables: Vec<CustomVariable>,
}

fn yes() -> bool {
    true
}

/// A refused configuration: what is wrong, naming the key and, where known, the line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);
