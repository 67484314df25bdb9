//! The one API error type: every refusal in SPEC 7's envelope and status, made from the
//! application's errors in one place ([`From<AppError>`]). Internal errors are logged here,
//! once, with their whole cause chain, and answered with an opaque `internal_error`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use plantd_app::AppError;
use plantd_model::FieldError;
use plantd_store::StoreError;
use serde::Serialize;

#[derive(Debug)]
pub enum ApiError {
    Validation(Vec<FieldError>),
    Authentication(String),
    Authorization(String),
    NotFound(String),
    MethodNotAllowed,
    Conflict(String),
    RateLimited { message: String, retry_after: u64 },
    Internal(Box<dyn std::error::Error + Send + Sync>),
}

/// The error code a response carried, for the audit trail.
#[derive(Clone, Copy, Debug)]
pub struct ErrorCode(pub &'static str);

#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorObject,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorObject {
    /// validation_error, authentication_error, authorization_error, not_found, conflict,
    /// rate_limited, internal_error (and method_not_allowed).
    pub code: &'static str,
    pub message: String,
    pub details: Vec<FieldError>,
    /// Seconds to wait; only on `rate_limited`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn validation(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::Validation(vec![FieldError::new(field, message)])
    }

    /// A failure that is the server's own (logged with its cause chain, answered opaquely).
    pub fn internal(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        ApiError::Internal(e.into())
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Validation(_) => "validation_error",
            ApiError::Authentication(_) => "authentication_error",
            ApiError::Authorization(_) => "authorization_error",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::Conflict(_) => "conflict",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::Internal(_) => "internal_error",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Validation(_) => StatusCode::BAD_REQUEST,
            ApiError::Authentication(_) => StatusCode::UNAUTHORIZED,
            ApiError::Authorization(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// The one mapping from the application's errors to HTTP.
impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        match e {
            AppError::Invalid(details) => ApiError::Validation(details),
            AppError::Unauthenticated(m) => ApiError::Authentication(m),
            AppError::Forbidden(m) => ApiError::Authorization(m),
            AppError::NotFound(what) => ApiError::NotFound(format!("{what} not found")),
            AppError::NoUser => ApiError::NotFound(AppError::NoUser.to_string()),
            AppError::Conflict(m) => ApiError::Conflict(m),
            AppError::LimitReached {
                message,
                retry_after,
            } => ApiError::RateLimited {
                message,
                retry_after,
            },
            AppError::Store(StoreError::NotFound) => {
                ApiError::NotFound("resource not found".into())
            }
            AppError::Store(StoreError::Conflict(m)) => ApiError::Conflict(m),
            other => ApiError::Internal(Box::new(other)),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let code = self.code();
        let (message, details, retry_after) = match self {
            ApiError::Validation(details) => {
                let message = match details.as_slice() {
                    [one] => format!("{}: {}", one.field, one.message),
                    _ => format!("{} fields are invalid", details.len()),
                };
                (message, details, None)
            }
            ApiError::Authentication(m)
            | ApiError::Authorization(m)
            | ApiError::NotFound(m)
            | ApiError::Conflict(m) => (m, Vec::new(), None),
            ApiError::MethodNotAllowed => (
                "this method is not allowed on this path".into(),
                Vec::new(),
                None,
            ),
            ApiError::RateLimited {
                message,
                retry_after,
            } => (message, Vec::new(), Some(retry_after)),
            ApiError::Internal(e) => {
                tracing::error!(error = %plantd_model::error_chain(e.as_ref()), "internal error");
                (
                    "an internal error occurred; it has been logged".into(),
                    Vec::new(),
                    None,
                )
            }
        };
        let body = ErrorBody {
            error: ErrorObject {
                code,
                message,
                details,
                retry_after,
            },
        };
        let mut response = (status, Json(body)).into_response();
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response.extensions_mut().insert(ErrorCode(code));
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
