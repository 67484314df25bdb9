//! The OpenAPI 3.1 document, assembled from the route declarations: each handler's operation,
//! completed from its policy with the required scope, the security requirement (none on public
//! routes) and the error responses it can give, all in the error envelope; and the
//! authorization server's operations at the root (`/oauth/*`, `/.well-known/*`), declared with
//! their own responses (SPEC 7's OAuth error shape).

use serde_json::{Map, Value, json};
use utoipa::openapi::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{PartialSchema, ToSchema};

use crate::error::{ErrorBody, OAuthErrorBody};
use crate::routing::{Access, Route};

/// The base document: title, version, description and the bearer-key security scheme.
fn base() -> OpenApi {
    let mut doc = OpenApi::default();
    doc.info.title = "plantd API".into();
    doc.info.version = plantd_app::system::VERSION.into();
    doc.info.description = Some(
        "REST API of plantd, the open industrial monitoring platform. Send `Authorization: Bearer <API_KEY>`. \
         Successes use `{\"data\": ..., \"meta\": {...}}`, errors `{\"error\": {\"code\", \"message\", \"details\"}}`. \
         Every response carries `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` and `X-RateLimit-Window` (integers)."
            .into(),
    );
    let components = doc.components.get_or_insert_with(Default::default);
    let mut schemas = Vec::new();
    <ErrorBody as ToSchema>::schemas(&mut schemas);
    schemas.push((ErrorBody::name().into_owned(), ErrorBody::schema()));
    // The OAuth endpoints' second shape (their refusals are declared as `ClientRefusals`).
    schemas.push((
        OAuthErrorBody::name().into_owned(),
        OAuthErrorBody::schema(),
    ));
    components.schemas.extend(schemas);
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

/// The error responses every operation may refer to: (status, component name, description).
const ERRORS: [(&str, &str, &str); 7] = [
    (
        "400",
        "ValidationError",
        "`validation_error`: the request is invalid; `details` name each field",
    ),
    (
        "401",
        "AuthenticationError",
        "`authentication_error`: the API key is missing, unknown, revoked or expired",
    ),
    (
        "403",
        "AuthorizationError",
        "`authorization_error`: the API key lacks the scope this operation needs",
    ),
    (
        "404",
        "NotFound",
        "`not_found`: no such resource in the caller's organization",
    ),
    (
        "409",
        "Conflict",
        "`conflict`: the request conflicts with the resource's state",
    ),
    (
        "429",
        "RateLimited",
        "`rate_limited`: a rate limit refuses the request; `Retry-After` says when to retry",
    ),
    (
        "500",
        "InternalError",
        "`internal_error`: the server failed; the cause is logged, not shown",
    ),
];

/// The whole document of `routes`, with the authorization server's root operations.
pub fn document(routes: &[Route]) -> Value {
    let mut doc = base();
    let root = <crate::oauth_server::RootApi as utoipa::OpenApi>::openapi();
    doc.paths.paths.extend(root.paths.paths);
    if let Some(c) = root.components {
        doc.components
            .get_or_insert_with(Default::default)
            .schemas
            .extend(c.schemas);
    }
    for r in routes {
        let path = doc.paths.paths.entry(r.path.clone()).or_default();
        path.merge_operations(r.item.clone());
        doc.components
            .get_or_insert_with(Default::default)
            .schemas
            .extend(r.schemas.iter().cloned());
    }
    let mut value = serde_json::to_value(&doc).unwrap_or(Value::Null);
    value["security"] = json!([{"api_key": []}]);
    let responses = value["components"]
        .as_object_mut()
        .map(|c| c.entry("responses").or_insert_with(|| json!({})));
    if let Some(Value::Object(responses)) = responses {
        for (status, name, description) in ERRORS {
            let mut response = error_response(description);
            if status == "429" {
                response["headers"] = json!({"Retry-After": {
                    "description": "Seconds to wait",
                    "schema": {"type": "integer", "minimum": 1},
                }});
            }
            responses.insert(name.to_string(), response);
        }
    }
    for r in routes {
        let method = r.method.as_str().to_lowercase();
        if let Some(op) = value["paths"][&r.path][&method].as_object_mut() {
            complete(op, r);
        }
    }
    // The root operations need no API key (clients authenticate with their own credentials,
    // people with the login form).
    for (method, path) in crate::oauth_server::root_operations() {
        let method = method.as_str().to_lowercase();
        if let Some(op) = value["paths"][&path][&method].as_object_mut() {
            op.insert("x-required-scope".into(), json!("none (public)"));
            op.insert("security".into(), json!([]));
        }
    }
    value
}

/// Adds the scope, the security requirement and the error responses of one operation.
fn complete(op: &mut Map<String, Value>, r: &Route) {
    let scope = match r.policy.access {
        Access::Public => "none (public)".to_string(),
        Access::AnyKey => "any valid API key".to_string(),
        Access::Scope(s) => s.to_string(),
        Access::ScopeOrProof(s) => format!("{s} (or no API key and a proof in the body)"),
        Access::ScopeOrDevice(s) => {
            format!("{s} (or the device's own password as its bearer token)")
        }
    };
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
    if r.policy.access == Access::Public {
        op.insert("security".into(), json!([]));
    } else if matches!(r.policy.access, Access::ScopeOrProof(_)) {
        op.insert("security".into(), json!([{"api_key": []}, {}]));
    } else {
        op.remove("security");
    }
    let takes_input = op.contains_key("requestBody")
        || op
            .get("parameters")
            .and_then(Value::as_array)
            .is_some_and(|p| p.iter().any(|p| p["in"] != "path"));
    let has_id = r.path.contains('{');
    let wanted = |status: &str| match status {
        "400" => takes_input,
        "401" => r.policy.access != Access::Public,
        "403" => matches!(
            r.policy.access,
            Access::Scope(_) | Access::ScopeOrProof(_) | Access::ScopeOrDevice(_)
        ),
        "404" => has_id,
        // Only where the handler declares it.
        "409" => false,
        _ => true,
    };
    let responses = op
        .entry("responses")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    if let Some(responses) = responses {
        for (status, name, _) in ERRORS {
            // A handler's own text stays (with the envelope as body); else the shared response.
            let own = responses
                .get(status)
                .and_then(|r| r["description"].as_str())
                .filter(|d| !d.is_empty())
                .map(error_response);
            let entry = match own {
                Some(response) => response,
                None if responses.contains_key(status) || wanted(status) => {
                    json!({"$ref": format!("#/components/responses/{name}")})
                }
                None => continue,
            };
            responses.insert(status.to_string(), entry);
        }
        // A response object needs a description (OpenAPI 3.1).
        for (status, response) in responses.iter_mut() {
            if let Some(r) = response.as_object_mut()
                && !r.contains_key("$ref")
                && r.get("description")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            {
                let text = match status.as_str() {
                    "200" => "OK",
                    "201" => "Created",
                    "204" => "No content",
                    "101" => "Switching protocols",
                    "503" => "Service unavailable",
                    _ => "Response",
                };
                r.insert("description".into(), Value::String(text.into()));
            }
        }
    }
}

/// An error response in the envelope of SPEC 7.
fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    })
}
