//! Request extractors that refuse bad input in the API's envelope, naming the field: JSON bodies
//! (malformed, wrong types, missing fields, unknown enum values) and query strings; and the
//! authenticated caller.

use axum::body::Bytes;
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

/// Parses JSON text into `T`, naming the failing field.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::validation("body", "a JSON body is required"));
    }
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::validation("body", format!("malformed JSON: {e}")))?;
    if !value.is_object() {
        // Every body of this API is an object; serde would otherwise read an array as a struct.
        return Err(ApiError::validation("body", "must be a JSON object"));
    }
    if let Some(field) = nul_path(&value, "") {
        return Err(ApiError::validation(field, NUL_MESSAGE));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        ApiError::Validation(vec![field_error(&path, &inner)])
    })
}

const NUL_MESSAGE: &str = "must not contain the NUL character (U+0000)";

/// The path of the first string (or key) holding U+0000: never meaningful here, and refused by
/// PostgreSQL, so it is refused at the door.
fn nul_path(value: &serde_json::Value, path: &str) -> Option<String> {
    use serde_json::Value;
    let here = || {
        if path.is_empty() {
            "body".to_string()
        } else {
            path.to_string()
        }
    };
    match value {
        Value::String(s) if s.contains('\0') => Some(here()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| nul_path(v, &format!("{path}[{i}]"))),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            let p = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            if k.contains('\0') {
                Some(p)
            } else {
                nul_path(v, &p)
            }
        }),
        _ => None,
    }
}

/// Turns serde's message and path into a field error; a missing field is named by itself rather
/// than by its parent.
fn field_error(path: &str, message: &str) -> plantd_model::FieldError {
    let parent = if path == "." { "" } else { path };
    let join = |name: &str| {
        if parent.is_empty() {
            name.to_string()
        } else {
            format!("{parent}.{name}")
        }
    };
    if let Some(name) = between(message, "missing field `", "`") {
        return plantd_model::FieldError::new(join(name), "is required");
    }
    if let Some(name) = between(message, "unknown field `", "`") {
        let expected = message
            .split_once(", expected ")
            .map(|(_, e)| format!("; expected {e}"))
            .unwrap_or_default();
        // serde_path_to_error's path already ends with the unknown field.
        let field = if parent.ends_with(name) {
            parent.to_string()
        } else {
            join(name)
        };
        return plantd_model::FieldError::new(field, format!("is not a known field{expected}"));
    }
    let field = if parent.is_empty() {
        "body".to_string()
    } else {
        parent.to_string()
    };
    let message = message
        .split(" at line ")
        .next()
        .unwrap_or(message)
        .to_string();
    plantd_model::FieldError::new(field, message)
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = &text[text.find(start)? + start.len()..];
    Some(&rest[..rest.find(end)?])
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
            return Err(ApiError::validation(name.replace('\0', ""), NUL_MESSAGE));
        }
        let de = serde_urlencoded::Deserializer::new(form_urlencoded_parse(query));
        serde_path_to_error::deserialize(de)
            .map(ValidQuery)
            .map_err(|e| {
                let path = e.path().to_string();
                let inner = e.into_inner().to_string();
                ApiError::Validation(vec![field_error(&path, &inner)])
            })
    }
}

fn form_urlencoded_parse(query: &str) -> form_urlencoded::Parse<'_> {
    form_urlencoded::parse(query.as_bytes())
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        name: String,
        kind: Kind,
        inner: Option<Inner>,
    }
    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        Modbus,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        port: u16,
    }

    fn err(json: &str) -> (String, String) {
        match parse_json::<Body>(json.as_bytes()) {
            Err(ApiError::Validation(v)) => (v[0].field.clone(), v[0].message.clone()),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn names_the_field() {
        assert_eq!(err(r#"{"kind": "modbus"}"#).0, "name");
        assert_eq!(err(r#"{"name": 5, "kind": "modbus"}"#).0, "name");
        let (f, m) = err(r#"{"name": "a", "kind": "opc"}"#);
        assert_eq!(f, "kind");
        assert!(m.contains("unknown variant"), "{m}");
        assert_eq!(
            err(r#"{"name": "a", "kind": "modbus", "inner": {"port": "x"}}"#).0,
            "inner.port"
        );
        assert_eq!(
            err(r#"{"name": "a", "kind": "modbus", "inner": {}}"#).0,
            "inner.port"
        );
        assert_eq!(
            err(r#"{"name": "a", "kind": "modbus", "colour": 1}"#).0,
            "colour"
        );
        assert_eq!(err(r#"{"name": "a""#).0, "body");
        assert_eq!(err("").0, "body");
        assert_eq!(err("[1]").0, "body");
        assert_eq!(err(r#"{"name": "a\u0000b", "kind": "modbus"}"#).0, "name");
        assert_eq!(
            err(r#"{"name": "a", "kind": "modbus", "inner": {"tags": ["ok", "\u0000"]}}"#).0,
            "inner.tags[1]"
        );
        assert_eq!(err(r#"["a", "modbus", null]"#).0, "body");
    }
}
