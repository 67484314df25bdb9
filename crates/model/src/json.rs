//! JSON bodies read the way every door reads them: a malformed body, a wrong type, a missing or
//! unknown field, or a NUL character is refused naming the field (`inner.port`, `data[3]`).

use serde::de::DeserializeOwned;

use crate::FieldError;

/// Parses JSON text into `T`, naming the failing field.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Vec<FieldError>> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(one("body", "a JSON body is required"));
    }
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| one("body", format!("malformed JSON: {e}")))?;
    if !value.is_object() {
        // Every body of this API is an object; serde would otherwise read an array as a struct.
        return Err(one("body", "must be a JSON object"));
    }
    if let Some(field) = nul_path(&value, "") {
        return Err(one(field, NUL_MESSAGE));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        vec![field_error(&path, &inner)]
    })
}

pub const NUL_MESSAGE: &str = "must not contain the NUL character (U+0000)";

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
pub fn field_error(path: &str, message: &str) -> FieldError {
    let parent = if path == "." { "" } else { path };
    let join = |name: &str| {
        if parent.is_empty() {
            name.to_string()
        } else {
            format!("{parent}.{name}")
        }
    };
    if let Some(name) = between(message, "missing field `", "`") {
        return FieldError::new(join(name), "is required");
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
        return FieldError::new(field, format!("is not a known field{expected}"));
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
    FieldError::new(field, message)
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = &text[text.find(start)? + start.len()..];
    Some(&rest[..rest.find(end)?])
}

fn one(field: impl Into<String>, message: impl Into<String>) -> Vec<FieldError> {
    vec![FieldError::new(field, message)]
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
        match parse::<Body>(json.as_bytes()) {
            Err(v) => (v[0].field.clone(), v[0].message.clone()),
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
