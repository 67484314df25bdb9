//! Who is calling a use case: the authenticated API key, its organization, user and tier.
//! Every use case that reads or changes an organization's data takes the caller's
//! organization, so tenancy is decided here and not by the caller's input.

use plantd_model::{Scope, Tier};

#[derive(Clone, Debug)]
pub struct Caller {
    pub key_id: String,
    pub org_id: String,
    /// The user the key acts for, when it has one.
    pub user_id: Option<String>,
    pub scopes: Vec<Scope>,
    pub tier: Tier,
}

impl Caller {
    /// Who did something, as recorded on the resource (`acknowledged_by`, ...): the user, else
    /// the key.
    pub fn actor(&self) -> &str {
        self.user_id.as_deref().unwrap_or(&self.key_id)
    }
}
