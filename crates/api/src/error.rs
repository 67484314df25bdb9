//! The one API error type: every refusal in SPEC 7's envelope and status, made from the
//! application's errors in one place ([`From<AppError>`]). Internal errors are logged here,
//! once, with their whole cause chain, and answered with an opaque `internal_error`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use plantd_app::AppError;
use plantd_model::FieldError;
use serde::Serialize;

#[derive(Debug)]
pub enum ApiError {
    Validation(Vec<FieldError>),
    Authentication(String),
    Authorization(String),
    NotFound(String),
    MethodNotAllowed,
    Conflict(String),
    /// A 409 with a domain code of its own (`too_many_activations`, `license_expired`, ...).
    Refused {
        code: &'static str,
        message: String,
    },
    RateLimited {
        message: String,
        retry_after: u64,
    },
    /// A 409 `conflict` with `Retry-After`: the organization's region migration runs.
    Migrating {
        message: String,
        retry_after: u64,
    },
    /// SPEC 7's second shape (`error`, `error_description`): bearer access tokens and the
    /// OAuth endpoints, with the `WWW-Authenticate` challenge where one is due.
    OAuth {
        status: StatusCode,
        error: &'static str,
        description: String,
        challenge: Option<String>,
    },
    Internal(Box<dyn std::error::Error + Send + Sync>),
    /// The organization's resident data is served by its primary region's instance (issue
    /// 33): a 307 to the same path there, so clients follow it with the same method and body.
    WrongRegion {
        location: String,
        message: String,
    },
}

/// SPEC 7's second error shape.
#[derive(Serialize, utoipa::ToSchema)]
pub struct OAuthErrorBody {
    /// invalid_token, insufficient_scope, invalid_client, invalid_grant, invalid_request,
    /// unauthorized_client, unsupported_grant_type, invalid_scope.
    pub error: &'static str,
    pub error_description: String,
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
    /// rate_limited, internal_error (and method_not_allowed); license activation's own 409
    /// codes are listed in docs/api.md ("Licenses").
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

    /// A bearer access token refused (RFC 6750 3.1): 401 `invalid_token`.
    pub fn invalid_token(description: impl Into<String>) -> Self {
        let description = description.into();
        ApiError::OAuth {
            status: StatusCode::UNAUTHORIZED,
            error: "invalid_token",
            challenge: Some(bearer_challenge("invalid_token", &description, None)),
            description,
        }
    }

    /// A bearer access token without the scope an operation needs: 403 `insufficient_scope`.
    pub fn insufficient_scope(required: &str) -> Self {
        let description =
            format!("this access token lacks the '{required}' scope this operation needs");
        ApiError::OAuth {
            status: StatusCode::FORBIDDEN,
            error: "insufficient_scope",
            challenge: Some(bearer_challenge(
                "insufficient_scope",
                &description,
                Some(required),
            )),
            description,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Validation(_) => "validation_error",
            ApiError::Authentication(_) => "authentication_error",
            ApiError::Authorization(_) => "authorization_error",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::Conflict(_) | ApiError::Migrating { .. } => "conflict",
            ApiError::Refused { code, .. } => code,
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::OAuth { error, .. } => error,
            ApiError::Internal(_) => "internal_error",
            ApiError::WrongRegion { .. } => "wrong_region",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Validation(_) => StatusCode::BAD_REQUEST,
            ApiError::Authentication(_) => StatusCode::UNAUTHORIZED,
            ApiError::Authorization(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) | ApiError::Refused { .. } | ApiError::Migrating { .. } => {
                StatusCode::CONFLICT
            }
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::OAuth { status, .. } => *status,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::WrongRegion { .. } => StatusCode::TEMPORARY_REDIRECT,
        }
    }
}

/// The one mapping from the application's errors to HTTP.
impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        match e {
            AppError::Invalid(details) => ApiError::Validation(details),
            AppError::Unauthenticated(m) => ApiError::Authentication(m),
            AppError::InvalidToken(m) => ApiError::invalid_token(m),
            AppError::OAuth(e) => ApiError::OAuth {
                // RFC 6749 5.2: a client that failed to authenticate is 401, the rest 400.
                status: if e.error == "invalid_client" {
                    StatusCode::UNAUTHORIZED
                } else {
                    StatusCode::BAD_REQUEST
                },
                error: e.error,
                challenge: e
                    .basic_challenge
                    .then(|| "Basic realm=\"plantd\", charset=\"UTF-8\"".to_string()),
                description: e.description,
            },
            AppError::Forbidden(m) => ApiError::Authorization(m),
            AppError::MissingScope {
                required, token, ..
            } if token => ApiError::insufficient_scope(required.as_str()),
            AppError::MissingScope { message, .. } => ApiError::Authorization(message),
            AppError::NotFound(what) => ApiError::NotFound(format!("{what} not found")),
            AppError::NoUser => ApiError::NotFound(AppError::NoUser.to_string()),
            AppError::Conflict(m) => ApiError::Conflict(m),
            AppError::Refused { code, message } => ApiError::Refused { code, message },
            AppError::Migrating {
                message,
                retry_after,
            } => ApiError::Migrating {
                message,
                retry_after,
            },
            AppError::LimitReached {
                message,
                retry_after,
            } => ApiError::RateLimited {
                message,
                retry_after,
            },
            other => ApiError::Internal(Box::new(other)),
        }
    }
}

/// `Bearer error="...", error_description="..."` (RFC 6750 3), quotes and backslashes dropped.
fn bearer_challenge(error: &str, description: &str, scope: Option<&str>) -> String {
    let clean: String = description
        .chars()
        .filter(|c| *c != '"' && *c != '\\' && (' '..='~').contains(c))
        .collect();
    let mut v =
        format!("Bearer realm=\"plantd\", error=\"{error}\", error_description=\"{clean}\"");
    if let Some(s) = scope {
        v.push_str(&format!(", scope=\"{s}\""));
    }
    v
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let code = self.code();
        if let ApiError::OAuth {
            description,
            challenge,
            ..
        } = self
        {
            let mut response = (
                status,
                [(header::CACHE_CONTROL, "no-store")],
                Json(OAuthErrorBody {
                    error: code,
                    error_description: description,
                }),
            )
                .into_response();
            if let Some(c) = challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, c);
            }
            response.extensions_mut().insert(ErrorCode(code));
            return response;
        }
        let mut location = None;
        let (message, details, retry_after) = match self {
            ApiError::WrongRegion {
                location: to,
                message,
            } => {
                location = Some(to);
                (message, Vec::new(), None)
            }
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
            | ApiError::Conflict(m)
            | ApiError::Refused { message: m, .. } => (m, Vec::new(), None),
            ApiError::MethodNotAllowed => (
                "this method is not allowed on this path".into(),
                Vec::new(),
                None,
            ),
            ApiError::RateLimited {
                message,
                retry_after,
            }
            | ApiError::Migrating {
                message,
                retry_after,
            } => (message, Vec::new(), Some(retry_after)),
            ApiError::OAuth { description, .. } => (description, Vec::new(), None),
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
        if let Some(v) = location.and_then(|l| HeaderValue::from_str(&l).ok()) {
            response.headers_mut().insert(header::LOCATION, v);
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
