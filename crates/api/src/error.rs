//! The one API error type: maps every refusal to SPEC 7's envelope and status. Internal errors
//! are logged with the request and answered with an opaque `internal_error`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
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
    Internal(String),
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

    pub fn not_found(what: &str) -> Self {
        ApiError::NotFound(format!("{what} not found"))
    }

    /// Maps a store error, naming what is missing: `.map_err(ApiError::missing("data source"))`.
    pub fn missing(what: &'static str) -> impl Fn(StoreError) -> ApiError {
        move |e| match e {
            StoreError::NotFound => ApiError::not_found(what),
            other => other.into(),
        }
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

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => ApiError::NotFound("resource not found".into()),
            StoreError::Conflict(m) => ApiError::Conflict(m),
            other => ApiError::Internal(other.to_string()),
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
            ApiError::Internal(m) => {
                tracing::error!(error = %m, "internal error");
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
