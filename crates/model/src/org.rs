//! Organizations, users and memberships (SPEC 4.9; fields "not shown" there, decided in docs/api.md).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

use crate::{Tier, Timestamp};

#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct Organization {
    pub id: String,
    pub name: String,
    pub tier: Tier,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Owner,
    Admin,
    Member,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Member => "member",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "owner" => Ok(Role::Owner),
            "admin" => Ok(Role::Admin),
            "member" => Ok(Role::Member),
            _ => Err(format!(
                "unknown role '{s}'; expected owner, admin or member"
            )),
        }
    }
}

/// A person. Email is unique across the installation; a user belongs to organizations through
/// memberships.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct User {
    pub id: String,
    pub email: String,
    pub name: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Membership state: `invited` until the person has a password, then `active`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MemberStatus {
    Active,
    Invited,
}

impl MemberStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MemberStatus::Active => "active",
            MemberStatus::Invited => "invited",
        }
    }
    pub fn parse(s: &str) -> Self {
        if s == "invited" {
            MemberStatus::Invited
        } else {
            MemberStatus::Active
        }
    }
}

/// A user seen as a member of one organization. `id` is the user's id.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct Member {
    pub id: String,
    pub email: String,
    pub name: String,
    pub role: Role,
    pub status: MemberStatus,
    pub joined_at: Timestamp,
}
