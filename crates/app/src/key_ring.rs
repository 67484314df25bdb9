//! The signing keys of access tokens as this node loaded them, and the tokens it has verified;
//! used by `signing.rs`.

use plantd_auth::jwt::{AccessClaims, SigningKey};
use plantd_model::Tier;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::RwLock;

/// Whether a token stands (with its organization's tier), or why not.
pub(crate) type Standing = Result<Tier, String>;

/// A token whose signature, issuer and audience this node has checked: its claims hold until
/// they expire; its standing (revocation, membership) is trusted for the key cache's time.
#[derive(Clone)]
pub(crate) struct KnownToken {
    pub(crate) claims: Arc<AccessClaims>,
    pub(crate) standing: Standing,
    pub(crate) checked: Instant,
}

/// The loaded keys, newest (the signing one) first, and when they were read.
#[derive(Default)]
pub(crate) struct KeyRing {
    pub(crate) keys: RwLock<Option<(Arc<Vec<SigningKey>>, Instant)>>,
    /// Verified tokens by the SHA-256 of the token, so that a client's requests with the same
    /// token pay for one RSA verification, not one each.
    pub(crate) known: Mutex<HashMap<String, KnownToken>>,
}
