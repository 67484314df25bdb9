//! The signing keys of access tokens as this node loaded them, and what it knows of tokens'
//! standing; used by `signing.rs`.

use plantd_auth::jwt::SigningKey;
use plantd_model::Tier;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::RwLock;

/// Whether a token stands (with its organization's tier), or why not.
pub(crate) type Standing = Result<Tier, String>;

/// The loaded keys, newest (the signing one) first, and when they were read.
#[derive(Default)]
pub(crate) struct KeyRing {
    pub(crate) keys: RwLock<Option<(Arc<Vec<SigningKey>>, Instant)>>,
    /// Whether an access token (by `jti`) still stands, trusted for the key cache's time.
    pub(crate) standing: Mutex<HashMap<String, (Standing, Instant)>>,
}
