//! API key scopes (SPEC 2.12, 5.1). `admin` grants every operation.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
pub enum Scope {
    #[serde(rename = "read:assets")]
    ReadAssets,
    #[serde(rename = "write:assets")]
    WriteAssets,
    #[serde(rename = "read:telemetry")]
    ReadTelemetry,
    #[serde(rename = "write:telemetry")]
    WriteTelemetry,
    #[serde(rename = "read:alerts")]
    ReadAlerts,
    #[serde(rename = "write:alerts")]
    WriteAlerts,
    #[serde(rename = "admin")]
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 7] = [
        Scope::ReadAssets,
        Scope::WriteAssets,
        Scope::ReadTelemetry,
        Scope::WriteTelemetry,
        Scope::ReadAlerts,
        Scope::WriteAlerts,
        Scope::Admin,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::ReadAssets => "read:assets",
            Scope::WriteAssets => "write:assets",
            Scope::ReadTelemetry => "read:telemetry",
            Scope::WriteTelemetry => "write:telemetry",
            Scope::ReadAlerts => "read:alerts",
            Scope::WriteAlerts => "write:alerts",
            Scope::Admin => "admin",
        }
    }

    /// Whether holding `self` allows an operation that requires `required`. `admin` grants all;
    /// a `write:` scope does not imply its `read:` twin (keys get exactly what they list).
    pub fn grants(self, required: Scope) -> bool {
        self == Scope::Admin || self == required
    }
}

/// Whether a set of granted scopes allows an operation requiring `required`.
pub fn allows(granted: &[Scope], required: Scope) -> bool {
    granted.iter().any(|s| s.grants(required))
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL
            .into_iter()
            .find(|x| x.as_str() == s.trim())
            .ok_or_else(|| {
                format!(
                    "unknown scope '{s}'; expected one of {}",
                    Scope::ALL.map(Scope::as_str).join(", ")
                )
            })
    }
}

/// Parses a comma-separated scope list (as stored and as given on the command line).
pub fn parse_list(text: &str) -> Result<Vec<Scope>, String> {
    let scopes = collect(text.split(',').filter(|p| !p.trim().is_empty()))?;
    if scopes.is_empty() {
        return Err("at least one scope is required".into());
    }
    Ok(scopes)
}

/// The scopes of `parts`, each once, in their order.
fn collect<'a>(parts: impl Iterator<Item = &'a str>) -> Result<Vec<Scope>, String> {
    let mut scopes = Vec::new();
    for part in parts {
        let s: Scope = part.parse()?;
        if !scopes.contains(&s) {
            scopes.push(s);
        }
    }
    Ok(scopes)
}

pub fn join_list(scopes: &[Scope]) -> String {
    scopes
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses an OAuth `scope` parameter (RFC 6749 3.3: space-delimited; may be empty).
pub fn parse_spaced(text: &str) -> Result<Vec<Scope>, String> {
    collect(text.split(' ').filter(|p| !p.is_empty()))
}

/// The OAuth form of a scope list: space-delimited.
pub fn join_spaced(scopes: &[Scope]) -> String {
    join_list(scopes).replace(',', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_grants_everything_and_others_only_themselves() {
        for s in Scope::ALL {
            assert!(Scope::Admin.grants(s));
        }
        assert!(!Scope::WriteTelemetry.grants(Scope::ReadTelemetry));
        assert!(allows(
            &[Scope::ReadAssets, Scope::ReadTelemetry],
            Scope::ReadTelemetry
        ));
        assert!(!allows(&[Scope::ReadAssets], Scope::WriteAssets));
    }

    #[test]
    fn parses_lists() {
        assert_eq!(
            parse_list("read:telemetry, write:telemetry,read:telemetry").unwrap(),
            vec![Scope::ReadTelemetry, Scope::WriteTelemetry]
        );
        assert!(
            parse_list("read:everything")
                .unwrap_err()
                .contains("unknown scope")
        );
        assert!(parse_list("").is_err());
    }
}
