//! The application layer's error: what a use case refuses (invalid input, a missing or
//! conflicting resource, a quota) and what failed beneath it (storage), with its source kept.
//! The API maps it to HTTP in one place (`plantd_api::error`).

use plantd_model::FieldError;
use plantd_store::StoreError;
use plantd_tsdb::TsdbError;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The input is refused; each detail names its field.
    #[error("{}", plantd_model::validation::describe(.0))]
    Invalid(Vec<FieldError>),
    /// The caller presented no usable credentials.
    #[error("{0}")]
    Unauthenticated(String),
    /// A bearer access token is invalid, expired or revoked (answered in the OAuth shape).
    #[error("{0}")]
    InvalidToken(String),
    /// An OAuth endpoint refuses the request (RFC 6749 5.2, 7009, 7662).
    #[error("{0}")]
    OAuth(#[from] crate::oauth_error::OAuthError),
    /// The caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// The caller's credential lacks the scope an operation needs (`token`: an OAuth access
    /// token, refused in the OAuth shape).
    #[error("{message}")]
    MissingScope {
        required: plantd_model::Scope,
        token: bool,
        message: String,
    },
    /// The named resource does not exist in the caller's organization.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The API key was created for the organization and acts for no user (`/users/me`).
    #[error("this API key does not act for a user (it was created for the organization)")]
    NoUser,
    /// The request conflicts with the resource's state.
    #[error("{0}")]
    Conflict(String),
    /// The request conflicts with the resource's state, with a code of its own that a device
    /// can act on (`too_many_activations`, `license_expired`, ...; docs/api.md).
    #[error("{message}")]
    Refused { code: &'static str, message: String },
    /// The organization is moving to another region: its data is read-only for now (a 409
    /// with `Retry-After`).
    #[error("{message}")]
    Migrating { message: String, retry_after: u64 },
    /// A quota or ingestion limit refuses the request for now.
    #[error("{message}")]
    LimitReached { message: String, retry_after: u64 },
    /// The store failed (a missing row or a broken constraint became `NotFound` or `Conflict`).
    #[error(transparent)]
    Store(StoreError),
    #[error(transparent)]
    Tsdb(#[from] TsdbError),
    /// Something beneath the use case failed (a task, a serializer, the file system).
    #[error("{context}")]
    Internal {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl AppError {
    /// A failure of the server's own (the database unreachable, a failed write), not of the
    /// request: answered 500, and worth trying again.
    pub fn is_server_fault(&self) -> bool {
        matches!(self, Self::Store(_) | Self::Tsdb(_) | Self::Internal { .. })
    }

    /// A refusal naming one field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        AppError::Invalid(vec![FieldError::new(field, message)])
    }

    /// A failure beneath the use case, with what was being done.
    pub fn internal(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        AppError::Internal {
            context: context.into(),
            source: source.into(),
        }
    }

    /// Maps a store error, naming what is missing: `.map_err(AppError::missing("data source"))`.
    pub fn missing(what: &'static str) -> impl Fn(StoreError) -> AppError {
        move |e| match e {
            StoreError::NotFound => AppError::NotFound(what),
            other => other.into(),
        }
    }
}

/// A store error as the use case's: a row that is not there is a missing resource, a broken
/// constraint a conflict; anything else keeps its source.
impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => AppError::NotFound("resource"),
            StoreError::Conflict(m) => AppError::Conflict(m),
            other => AppError::Store(other),
        }
    }
}

impl From<Vec<FieldError>> for AppError {
    fn from(details: Vec<FieldError>) -> Self {
        AppError::Invalid(details)
    }
}

pub type AppResult<T> = Result<T, AppError>;
