//! Regions (SPEC 2.9, 4.14): the six region ids with their names, locations and
//! certifications, what an instance's region flags say, and which data stays in an
//! organization's primary region and which is replicated to every region.

use serde::Serialize;

/// One of SPEC 2.9's regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RegionId {
    UsEast,
    UsWest,
    EuWest,
    EuCentral,
    ApSoutheast,
    ApNortheast,
}

impl RegionId {
    /// Every region, in the SPEC's order (also the order of the bootstrap rule).
    pub const ALL: [RegionId; 6] = [
        RegionId::UsEast,
        RegionId::UsWest,
        RegionId::EuWest,
        RegionId::EuCentral,
        RegionId::ApSoutheast,
        RegionId::ApNortheast,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RegionId::UsEast => "us-east",
            RegionId::UsWest => "us-west",
            RegionId::EuWest => "eu-west",
            RegionId::EuCentral => "eu-central",
            RegionId::ApSoutheast => "ap-southeast",
            RegionId::ApNortheast => "ap-northeast",
        }
    }

    /// The region's display name.
    pub fn name(self) -> &'static str {
        match self {
            RegionId::UsEast => "US East",
            RegionId::UsWest => "US West",
            RegionId::EuWest => "EU West",
            RegionId::EuCentral => "EU Central",
            RegionId::ApSoutheast => "Asia Pacific Southeast",
            RegionId::ApNortheast => "Asia Pacific Northeast",
        }
    }

    /// Where it is (SPEC 2.9).
    pub fn location(self) -> &'static str {
        match self {
            RegionId::UsEast => "Virginia, USA",
            RegionId::UsWest => "California, USA",
            RegionId::EuWest => "Ireland",
            RegionId::EuCentral => "Germany",
            RegionId::ApSoutheast => "Singapore",
            RegionId::ApNortheast => "Japan",
        }
    }

    /// SPEC 4.14's certifications; the SPEC names none for the other three regions.
    pub fn certifications(self) -> &'static [&'static str] {
        match self {
            RegionId::UsEast => &["SOC 2", "HIPAA", "FedRAMP"],
            RegionId::EuWest => &["GDPR", "ISO 27001", "SOC 2"],
            RegionId::EuCentral => &["GDPR", "ISO 27001", "German data protection"],
            _ => &[],
        }
    }
}

impl std::fmt::Display for RegionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for RegionId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RegionId::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| {
                let ids: Vec<&str> = RegionId::ALL.iter().map(|r| r.as_str()).collect();
                format!("unknown region '{s}': one of {}", ids.join(", "))
            })
    }
}

/// The kinds of replicated records (SPEC 4.14: organization settings, user credentials, role
/// definitions, API key metadata), as named in the replication stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReplicatedKind {
    Organization,
    User,
    Membership,
    ApiKey,
}

impl ReplicatedKind {
    pub const ALL: [ReplicatedKind; 4] = [
        ReplicatedKind::Organization,
        ReplicatedKind::User,
        ReplicatedKind::Membership,
        ReplicatedKind::ApiKey,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReplicatedKind::Organization => "organization",
            ReplicatedKind::User => "user",
            ReplicatedKind::Membership => "membership",
            ReplicatedKind::ApiKey => "api_key",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        ReplicatedKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_unknown_ids_name_the_choices() {
        for r in RegionId::ALL {
            assert_eq!(r.as_str().parse::<RegionId>(), Ok(r));
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
        let e = "mars-1".parse::<RegionId>().unwrap_err();
        assert!(e.contains("us-east") && e.contains("ap-northeast"), "{e}");
        for k in ReplicatedKind::ALL {
            assert_eq!(ReplicatedKind::parse(k.as_str()), Some(k));
        }
    }
}
