//! Products and licenses (SPEC 2.11, 3, 4.12): license types, states and the codes of a
//! validation, with the rules that need no storage. States and codes beyond SPEC's "active" are
//! decided in docs/api.md ("Licenses").

use serde::{Deserialize, Serialize};

use crate::Timestamp;
use crate::validation::Validator;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LicenseType {
    Perpetual,
    Subscription,
}

impl LicenseType {
    pub const ALL: [LicenseType; 2] = [LicenseType::Perpetual, LicenseType::Subscription];
    pub fn as_str(self) -> &'static str {
        match self {
            LicenseType::Perpetual => "perpetual",
            LicenseType::Subscription => "subscription",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        LicenseType::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// The stored state of a license. `expired` is not stored: an active license whose
/// `expires_at` has passed reads as expired ([`LicenseStatus::effective`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LicenseStatus {
    Active,
    Expired,
    Suspended,
    Revoked,
}

impl LicenseStatus {
    pub const ALL: [LicenseStatus; 4] = [
        LicenseStatus::Active,
        LicenseStatus::Expired,
        LicenseStatus::Suspended,
        LicenseStatus::Revoked,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            LicenseStatus::Active => "active",
            LicenseStatus::Expired => "expired",
            LicenseStatus::Suspended => "suspended",
            LicenseStatus::Revoked => "revoked",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        LicenseStatus::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// What clients see at `now`: a stored `active` past its expiry is `expired`.
    pub fn effective(self, expires_at: Option<Timestamp>, now: Timestamp) -> LicenseStatus {
        match (self, expires_at) {
            (LicenseStatus::Active, Some(e)) if e <= now => LicenseStatus::Expired,
            (s, _) => s,
        }
    }
}

/// The answer code of `POST /v1/licenses/validate` (docs/api.md, "Licenses").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ValidationCode {
    /// The license is in force (and activated on the device, when one was named).
    Valid,
    /// The text is not a plantd license key at all (prefix, encoding, length).
    InvalidKey,
    /// No license of this server matches the key (unknown, deleted, or its signature fails).
    NotFound,
    Expired,
    Suspended,
    Revoked,
    /// The named device holds no activation of this license.
    NotActivatedOnDevice,
    /// The device is activated with another hardware fingerprint.
    FingerprintMismatch,
}

impl ValidationCode {
    pub fn is_valid(self) -> bool {
        self == ValidationCode::Valid
    }
}

/// A product a license is issued for (SPEC 2.11).
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Product {
    pub id: String,
    #[serde(skip)]
    pub org_id: String,
    pub name: String,
    /// Unique within the organization.
    pub sku: String,
    pub description: String,
    pub price: f64,
    pub license_type: LicenseType,
    pub features: Vec<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A license as clients see it (SPEC 2.11), its `status` as of the time it was read.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct License {
    pub id: String,
    #[serde(skip)]
    pub org_id: String,
    /// The signed key (`pdl_...`), checked offline with the organization's public key.
    pub license_key: String,
    pub product_id: String,
    pub license_type: LicenseType,
    /// active, expired, suspended or revoked.
    pub status: LicenseStatus,
    pub max_activations: i64,
    pub current_activations: i64,
    /// Days a subscription runs from its issue (and the default of a renewal); null for a
    /// perpetual license.
    pub validity_days: Option<i64>,
    /// The product's features when the license was issued (carried in the key).
    pub features: Vec<String>,
    pub customer_email: String,
    /// Null for a perpetual license.
    pub expires_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A device's activation of a license.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Activation {
    pub id: String,
    pub license_id: String,
    pub device_id: String,
    pub hardware_fingerprint: String,
    pub activated_at: Timestamp,
}

/// The longest name of a feature, and how many a product may list.
pub const MAX_FEATURE_LEN: usize = 32;
pub const MAX_FEATURES: usize = 32;
/// Features plantd itself knows (SPEC 2.11); the list is open (docs/api.md).
pub const KNOWN_FEATURES: [&str; 3] = ["mqtt", "opcua", "modbus"];

/// Checks a product's feature names: lowercase identifiers (`a-z`, `0-9`, `_ . -`, starting
/// with a letter or digit), each once.
pub fn check_features(v: &mut Validator, field: &str, features: &[String]) {
    if features.len() > MAX_FEATURES {
        v.add(field, format!("must list at most {MAX_FEATURES} features"));
        return;
    }
    for (i, f) in features.iter().enumerate() {
        let ok = !f.is_empty()
            && f.len() <= MAX_FEATURE_LEN
            && f.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && f.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c));
        if !ok {
            v.add(
                format!("{field}[{i}]"),
                format!(
                    "must be 1 to {MAX_FEATURE_LEN} characters of a-z, 0-9, '_', '.' or '-' (such as {})",
                    KNOWN_FEATURES.join(", ")
                ),
            );
        } else if features[..i].contains(f) {
            v.add(format!("{field}[{i}]"), "is listed twice");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_reads_as_expired_only_when_active() {
        let now = Timestamp::from_millis(10_000);
        let past = Some(Timestamp::from_millis(9_000));
        assert_eq!(
            LicenseStatus::Active.effective(past, now),
            LicenseStatus::Expired
        );
        assert_eq!(
            LicenseStatus::Active.effective(Some(now), now),
            LicenseStatus::Expired,
            "expires_at is the first instant it no longer holds"
        );
        assert_eq!(
            LicenseStatus::Suspended.effective(past, now),
            LicenseStatus::Suspended
        );
        assert_eq!(
            LicenseStatus::Active.effective(None, now),
            LicenseStatus::Active
        );
        assert_eq!(
            serde_json::to_string(&ValidationCode::NotActivatedOnDevice).unwrap(),
            "\"NOT_ACTIVATED_ON_DEVICE\""
        );
    }

    #[test]
    fn feature_names() {
        let mut v = Validator::new();
        let f = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        check_features(
            &mut v,
            "features",
            &f(&["mqtt", "opcua", "ml.v2", "edge-4"]),
        );
        assert!(v.is_empty());
        check_features(&mut v, "features", &f(&["MQTT", "", "mqtt", "mqtt", "-x"]));
        let errors = v.finish().unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            ["features[0]", "features[1]", "features[3]", "features[4]"]
        );
    }
}
