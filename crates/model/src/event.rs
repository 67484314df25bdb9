//! The names of events plantd announces (SPEC 6): on the live stream, to webhooks and in
//! notifications. One enum, so that a name is never spelled twice.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An announced event. Webhooks subscribe to these names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub enum EventType {
    #[serde(rename = "alert.triggered")]
    AlertTriggered,
    #[serde(rename = "alert.acknowledged")]
    AlertAcknowledged,
    #[serde(rename = "alert.resolved")]
    AlertResolved,
    #[serde(rename = "license.created")]
    LicenseCreated,
    #[serde(rename = "license.activated")]
    LicenseActivated,
    #[serde(rename = "license.deactivated")]
    LicenseDeactivated,
    #[serde(rename = "license.suspended")]
    LicenseSuspended,
    #[serde(rename = "license.reinstated")]
    LicenseReinstated,
    #[serde(rename = "license.revoked")]
    LicenseRevoked,
    #[serde(rename = "license.renewed")]
    LicenseRenewed,
    #[serde(rename = "device.online")]
    DeviceOnline,
    #[serde(rename = "device.offline")]
    DeviceOffline,
    #[serde(rename = "ota.deployment.created")]
    OtaDeploymentCreated,
    #[serde(rename = "ota.deployment.phase_started")]
    OtaDeploymentPhaseStarted,
    #[serde(rename = "ota.deployment.paused")]
    OtaDeploymentPaused,
    #[serde(rename = "ota.deployment.completed")]
    OtaDeploymentCompleted,
    #[serde(rename = "ota.deployment.failed")]
    OtaDeploymentFailed,
    #[serde(rename = "ota.deployment.cancelled")]
    OtaDeploymentCancelled,
    #[serde(rename = "ota.deployment.rolled_back")]
    OtaDeploymentRolledBack,
}

impl EventType {
    pub const ALL: [EventType; 19] = [
        EventType::AlertTriggered,
        EventType::AlertAcknowledged,
        EventType::AlertResolved,
        EventType::LicenseCreated,
        EventType::LicenseActivated,
        EventType::LicenseDeactivated,
        EventType::LicenseSuspended,
        EventType::LicenseReinstated,
        EventType::LicenseRevoked,
        EventType::LicenseRenewed,
        EventType::DeviceOnline,
        EventType::DeviceOffline,
        EventType::OtaDeploymentCreated,
        EventType::OtaDeploymentPhaseStarted,
        EventType::OtaDeploymentPaused,
        EventType::OtaDeploymentCompleted,
        EventType::OtaDeploymentFailed,
        EventType::OtaDeploymentCancelled,
        EventType::OtaDeploymentRolledBack,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::AlertTriggered => "alert.triggered",
            EventType::AlertAcknowledged => "alert.acknowledged",
            EventType::AlertResolved => "alert.resolved",
            EventType::LicenseCreated => "license.created",
            EventType::LicenseActivated => "license.activated",
            EventType::LicenseDeactivated => "license.deactivated",
            EventType::LicenseSuspended => "license.suspended",
            EventType::LicenseReinstated => "license.reinstated",
            EventType::LicenseRevoked => "license.revoked",
            EventType::LicenseRenewed => "license.renewed",
            EventType::DeviceOnline => "device.online",
            EventType::DeviceOffline => "device.offline",
            EventType::OtaDeploymentCreated => "ota.deployment.created",
            EventType::OtaDeploymentPhaseStarted => "ota.deployment.phase_started",
            EventType::OtaDeploymentPaused => "ota.deployment.paused",
            EventType::OtaDeploymentCompleted => "ota.deployment.completed",
            EventType::OtaDeploymentFailed => "ota.deployment.failed",
            EventType::OtaDeploymentCancelled => "ota.deployment.cancelled",
            EventType::OtaDeploymentRolledBack => "ota.deployment.rolled_back",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        EventType::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// `alert.triggered, alert.acknowledged, ...`, for messages.
    pub fn list() -> String {
        EventType::ALL.map(EventType::as_str).join(", ")
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for e in EventType::ALL {
            assert_eq!(EventType::parse(e.as_str()), Some(e));
            assert_eq!(
                serde_json::to_string(&e).unwrap(),
                format!("\"{}\"", e.as_str())
            );
        }
        assert!(EventType::parse("alert.fired").is_none());
    }
}
