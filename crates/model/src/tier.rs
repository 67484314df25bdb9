//! Organization tiers and their limits (SPEC 8.1, 8.2, 8.3). Enterprise limits are "custom": they
//! come from configuration and default to unlimited (`None`).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Trial,
    Starter,
    Professional,
    Enterprise,
}

impl Tier {
    pub const ALL: [Tier; 4] = [
        Tier::Trial,
        Tier::Starter,
        Tier::Professional,
        Tier::Enterprise,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Trial => "trial",
            Tier::Starter => "starter",
            Tier::Professional => "professional",
            Tier::Enterprise => "enterprise",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Tier {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Tier::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| {
                format!("unknown tier '{s}'; expected trial, starter, professional or enterprise")
            })
    }
}

/// How an open limit ("custom", unlimited by default) is counted and shown: the largest value
/// every client's integer type reads (2^31 - 1), so rate-limit headers and usage figures are
/// always integers (SPEC 8.4).
pub const UNLIMITED: u64 = 2_147_483_647;

/// Request limits per window; `None` is unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestLimits {
    pub per_minute: Option<u64>,
    pub per_hour: Option<u64>,
    pub per_day: Option<u64>,
}

/// Telemetry ingestion limits (SPEC 8.3); `None` is unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryLimits {
    pub points_per_minute: Option<u64>,
    pub points_per_hour: Option<u64>,
    pub storage_gb: Option<u64>,
}

/// WebSocket limits (SPEC 8.2); `None` is unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSocketLimits {
    pub connections: Option<u64>,
    pub messages_in_per_second: Option<u64>,
    pub messages_out_per_second: Option<u64>,
}

/// The operator's limit policy: enterprise's custom limits and the size of the per-organization
/// aggregate relative to the per-key limits (the spec does not give its numbers).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitPolicy {
    pub enterprise_requests: RequestLimits,
    pub enterprise_telemetry: TelemetryLimits,
    pub enterprise_websocket: WebSocketLimits,
    /// Organization aggregate = this many times the per-key limit of its tier.
    pub org_aggregate_multiplier: u64,
    /// An enterprise organization's endpoint limits (SPEC 8.5, e.g. 100 `GET /telemetry` per
    /// minute) are this many times the SPEC's (SPEC 8.6: limit increases on request).
    pub enterprise_endpoint_multiplier: u64,
}

impl Default for LimitPolicy {
    fn default() -> Self {
        Self {
            enterprise_requests: RequestLimits::default(),
            enterprise_telemetry: TelemetryLimits::default(),
            enterprise_websocket: WebSocketLimits {
                connections: None,
                messages_in_per_second: Some(200),
                messages_out_per_second: Some(2000),
            },
            org_aggregate_multiplier: 5,
            enterprise_endpoint_multiplier: 1,
        }
    }
}

impl LimitPolicy {
    /// REST limits of one API key of an organization of `tier` (SPEC 8.1).
    pub fn key_requests(&self, tier: Tier) -> RequestLimits {
        let (m, h, d) = match tier {
            Tier::Trial => (60, 1_000, 10_000),
            Tier::Starter => (300, 10_000, 100_000),
            Tier::Professional => (1_000, 50_000, 500_000),
            Tier::Enterprise => return self.enterprise_requests,
        };
        RequestLimits {
            per_minute: Some(m),
            per_hour: Some(h),
            per_day: Some(d),
        }
    }

    /// Aggregate REST limits of a whole organization of `tier`.
    pub fn org_requests(&self, tier: Tier) -> RequestLimits {
        let k = self.key_requests(tier);
        let x = |v: Option<u64>| v.map(|v| v.saturating_mul(self.org_aggregate_multiplier.max(1)));
        RequestLimits {
            per_minute: x(k.per_minute),
            per_hour: x(k.per_hour),
            per_day: x(k.per_day),
        }
    }

    /// An endpoint limit of SPEC 8.5 (`limit` per window) as it applies to `tier`.
    pub fn endpoint(&self, tier: Tier, limit: u64) -> u64 {
        match tier {
            Tier::Enterprise => limit.saturating_mul(self.enterprise_endpoint_multiplier.max(1)),
            _ => limit,
        }
    }

    pub fn telemetry(&self, tier: Tier) -> TelemetryLimits {
        let (m, h, gb) = match tier {
            Tier::Trial => (1_000, 10_000, 1),
            Tier::Starter => (10_000, 100_000, 10),
            Tier::Professional => (100_000, 1_000_000, 100),
            Tier::Enterprise => return self.enterprise_telemetry,
        };
        TelemetryLimits {
            points_per_minute: Some(m),
            points_per_hour: Some(h),
            storage_gb: Some(gb),
        }
    }

    pub fn websocket(&self, tier: Tier) -> WebSocketLimits {
        let (c, i, o) = match tier {
            Tier::Trial => (2, 5, 50),
            Tier::Starter => (5, 10, 100),
            Tier::Professional => (20, 50, 500),
            Tier::Enterprise => return self.enterprise_websocket,
        };
        WebSocketLimits {
            connections: Some(c),
            messages_in_per_second: Some(i),
            messages_out_per_second: Some(o),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_follow_the_spec_tables() {
        let p = LimitPolicy::default();
        assert_eq!(p.key_requests(Tier::Trial).per_minute, Some(60));
        assert_eq!(p.key_requests(Tier::Professional).per_day, Some(500_000));
        assert_eq!(p.key_requests(Tier::Enterprise), RequestLimits::default());
        assert_eq!(p.org_requests(Tier::Trial).per_minute, Some(300));
        assert_eq!(p.telemetry(Tier::Starter).points_per_hour, Some(100_000));
        assert_eq!(p.websocket(Tier::Trial).connections, Some(2));
        assert_eq!(p.endpoint(Tier::Enterprise, 100), 100);
        let raised = LimitPolicy {
            enterprise_endpoint_multiplier: 10,
            ..LimitPolicy::default()
        };
        assert_eq!(raised.endpoint(Tier::Enterprise, 100), 1_000);
        assert_eq!(raised.endpoint(Tier::Professional, 100), 100);
        assert_eq!("professional".parse::<Tier>().unwrap(), Tier::Professional);
        assert!("gold".parse::<Tier>().is_err());
    }
}
