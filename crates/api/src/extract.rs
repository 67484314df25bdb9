//! Request extractors that refuse bad input in the API's envelope, naming the field: JSON bodies
//! (malformed, wrong types, missing fields, unknown enum values) and query strings; and the
//! authenticated caller.

use axum::body::Bytes;
use axum::extract::Multipart;
use axum::extract::multipart::{Field, MultipartError, MultipartRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header;
use axum::http::request::Parts;
use plantd_app::Caller;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body deserialized into `T`; failures are `validation_error` naming the field.
pub struct ValidJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ValidJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let JsonBytes(bytes) = JsonBytes::from_request(req, state).await?;
        parse_json(&bytes).map(ValidJson)
    }
}

/// The bytes of a body declared as JSON (or undeclared), for handlers that parse it themselves.
pub struct JsonBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for JsonBytes {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if let Some(ct) = req.headers().get(header::CONTENT_TYPE) {
            let ct = ct.to_str().unwrap_or_default().to_ascii_lowercase();
            if !(ct.starts_with("application/json") || ct.contains("+json")) {
                return Err(ApiError::validation(
                    "Content-Type",
                    "must be application/json",
                ));
            }
        }
        Bytes::from_request(req, state)
            .await
            .map(JsonBytes)
            .map_err(|e| {
                ApiError::validation(
                    "body",
                    format!("could not read the request body: {}", e.body_text()),
                )
            })
    }
}

/// Parses JSON text into `T`, naming the failing field ([`plantd_model::json::parse`]).
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    plantd_model::json::parse(bytes).map_err(ApiError::Validation)
}

/// A query string deserialized into `T`; failures are `validation_error` naming the parameter.
pub struct ValidQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ValidQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        if let Some((name, _)) =
            form_urlencoded_parse(query).find(|(k, v)| k.contains('\0') || v.contains('\0'))
        {
            return Err(ApiError::validation(
                name.replace('\0', ""),
                plantd_model::json::NUL_MESSAGE,
            ));
        }
        let de = serde_urlencoded::Deserializer::new(form_urlencoded_parse(query));
        serde_path_to_error::deserialize(de)
            .map(ValidQuery)
            .map_err(|e| {
                let path = e.path().to_string();
                let inner = e.into_inner().to_string();
                ApiError::Validation(vec![plantd_model::json::field_error(&path, &inner)])
            })
    }
}

fn form_urlencoded_parse(query: &str) -> form_urlencoded::Parse<'_> {
    form_urlencoded::parse(query.as_bytes())
}

/// The caller and the `{id}` of the path: what a handler of one resource of the caller's
/// organization takes (`state.app.thing(r.org(), &r.id)`).
pub struct ById {
    pub caller: Caller,
    pub id: String,
}

impl ById {
    /// The caller's organization, the only one whose resources the id can name.
    pub fn org(&self) -> &str {
        &self.caller.org_id
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ById {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Auth(caller) = Auth::from_request_parts(parts, state).await?;
        let axum::extract::Path(id) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|e| {
                    ApiError::NotFound(format!("resource not found: {}", e.body_text()))
                })?;
        Ok(ById { caller, id })
    }
}

/// The parameters of a path (`Path<(String, String)>`); a path that cannot be read (not text:
/// `%FF`) names nothing that exists: `404` in the envelope, never axum's plain-text refusal.
pub struct PathOf<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathOf<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(v)| PathOf(v))
            .map_err(|e| ApiError::NotFound(format!("resource not found: {}", e.body_text())))
    }
}

/// An optional RFC 3339 time of a query string (blank counts as absent); a bad one is added to
/// `errors`, naming `field`.
pub fn query_time(
    errors: &mut Vec<plantd_model::FieldError>,
    field: &str,
    text: &Option<String>,
) -> Option<plantd_model::Timestamp> {
    let t = text.as_deref().filter(|t| !t.trim().is_empty())?;
    plantd_model::Timestamp::parse(t)
        .map_err(|m| errors.push(plantd_model::FieldError::new(field, m)))
        .ok()
}

/// The authenticated caller, as the pipeline admitted it.
pub struct Auth(pub Caller);

impl std::ops::Deref for Auth {
    type Target = Caller;
    fn deref(&self) -> &Caller {
        &self.0
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Auth {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .map(Auth)
            .ok_or_else(|| ApiError::Authentication("authentication required".into()))
    }
}

/// The largest text field of a multipart form.
const MAX_FIELD_BYTES: usize = 64 * 1024;

/// A multipart/form-data body, or `400` on `body` saying which fields the form takes.
pub fn multipart_form(
    form: Result<Multipart, MultipartRejection>,
    fields: &str,
) -> Result<Multipart, ApiError> {
    form.map_err(|e| {
        ApiError::validation(
            "body",
            format!(
                "must be multipart/form-data with {fields}: {}",
                e.body_text()
            ),
        )
    })
}

/// A multipart body that breaks off or is malformed: `400` on `file`.
pub fn form_error(e: MultipartError) -> ApiError {
    ApiError::validation(
        "file",
        format!(
            "the multipart body is malformed or cut short: {}",
            e.body_text()
        ),
    )
}

/// A field's bytes, at most `max` of them (else `400` on the field).
pub async fn field_bytes(field: Field<'_>, name: &str, max: usize) -> Result<Vec<u8>, ApiError> {
    let mut field = field;
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(form_error)? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > max {
            return Err(ApiError::validation(
                name,
                format!("must be at most {max} bytes"),
            ));
        }
    }
    Ok(bytes)
}

/// A text field of a multipart form (UTF-8, at most 64 KiB).
pub async fn text_field(field: Field<'_>, name: &str) -> Result<String, ApiError> {
    let bytes = field_bytes(field, name, MAX_FIELD_BYTES).await?;
    String::from_utf8(bytes).map_err(|_| ApiError::validation(name, "must be UTF-8 text"))
}
