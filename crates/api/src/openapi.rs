//! The OpenAPI 3.1 document, generated from the handlers' annotations and completed with each
//! operation's required scope from the policy table.

use serde_json::Value;
use std::sync::OnceLock;
use utoipa::openapi::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

use crate::policy::{self, Access};

static DOCUMENT: OnceLock<Value> = OnceLock::new();

/// The base document: title, version, description and the bearer-key security scheme.
pub fn base() -> OpenApi {
    let mut doc = OpenApi::default();
    doc.info.title = "plantd API".into();
    doc.info.version = crate::routes::system::VERSION.into();
    doc.info.description = Some(
        "REST API of plantd, the open industrial monitoring platform. Send `Authorization: Bearer <API_KEY>`. \
         Successes use `{\"data\": ..., \"meta\": {...}}`, errors `{\"error\": {\"code\", \"message\", \"details\"}}`."
            .into(),
    );
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "api_key",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("pdk_...")
                .description(Some(
                    "An API key created with `plantd keys create` or `POST /v1/api-keys`",
                ))
                .build(),
        ),
    );
    doc
}

/// Adds the required scope of every operation (`x-required-scope` and a line in its
/// description) and keeps the document for `GET /v1/openapi.json`.
pub fn finish(doc: OpenApi) -> Value {
    let mut value = serde_json::to_value(&doc).unwrap_or(Value::Null);
    if let Some(paths) = value.get_mut("paths").and_then(Value::as_object_mut) {
        for (path, item) in paths.iter_mut() {
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            for (method, op) in item.iter_mut() {
                let Ok(m) = method.to_uppercase().parse::<axum::http::Method>() else {
                    continue;
                };
                let Some(p) = policy::lookup(&m, path) else {
                    continue;
                };
                let scope = match p.access {
                    Access::Public => "none (public)".to_string(),
                    Access::AnyKey => "any valid API key".to_string(),
                    Access::Scope(s) => s.to_string(),
                };
                if let Some(op) = op.as_object_mut() {
                    op.insert("x-required-scope".into(), Value::String(scope.clone()));
                    let desc = op
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    let line = format!("Required scope: **{scope}**.");
                    let desc = if desc.is_empty() {
                        line
                    } else {
                        format!("{desc}\n\n{line}")
                    };
                    op.insert("description".into(), Value::String(desc));
                }
            }
        }
    }
    let _ = DOCUMENT.set(value.clone());
    value
}

/// The finished document (built once, when the first router is built).
pub fn document_json() -> &'static Value {
    DOCUMENT.get_or_init(crate::router::build_openapi)
}
