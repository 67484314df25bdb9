//! The refusals of the OAuth endpoints (RFC 6749 5.2), answered in SPEC 7's second shape. How
//! a door answers one (HTTP: 401 for `invalid_client`, else 400) is the door's.

/// A refusal of an OAuth endpoint (RFC 6749 5.2): `error`, `error_description`, and whether to
/// challenge for HTTP Basic client authentication (`invalid_client` after a Basic attempt,
/// RFC 6749 5.2).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{error}: {description}")]
pub struct OAuthError {
    pub error: &'static str,
    pub description: String,
    pub basic_challenge: bool,
}

impl OAuthError {
    fn new(error: &'static str, description: impl Into<String>) -> Self {
        Self {
            error,
            description: description.into(),
            basic_challenge: false,
        }
    }
    pub fn invalid_request(d: impl Into<String>) -> Self {
        Self::new("invalid_request", d)
    }
    pub fn invalid_client(d: impl Into<String>, basic: bool) -> Self {
        Self {
            basic_challenge: basic,
            ..Self::new("invalid_client", d)
        }
    }
    pub fn invalid_grant(d: impl Into<String>) -> Self {
        Self::new("invalid_grant", d)
    }
    pub fn unauthorized_client(d: impl Into<String>) -> Self {
        Self::new("unauthorized_client", d)
    }
    pub fn unsupported_grant_type(d: impl Into<String>) -> Self {
        Self::new("unsupported_grant_type", d)
    }
    pub fn invalid_scope(d: impl Into<String>) -> Self {
        Self::new("invalid_scope", d)
    }
}
