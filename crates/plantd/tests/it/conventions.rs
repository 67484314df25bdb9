//! API conventions over HTTP: envelopes, error codes, pagination, headers, health, status and the
//! OpenAPI document.

use plantd_model::Scope;
use plantd_test_support::spawn_app;
use reqwest::Method;
use serde_json::{Value, json};

fn modbus(name: &str) -> Value {
    json!({"name": name, "type": "modbus", "config": {"host": "plc.invalid", "port": 502, "unit_id": 1}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_public_and_status_needs_a_key() {
    let app = spawn_app().await;
    let r = app
        .call(Method::GET, "/health", None, None)
        .await
        .expect(200);
    assert_eq!(r.json["data"]["status"], "healthy");
    assert_eq!(r.json["data"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(r.json["data"]["timestamp"].as_str().unwrap().ends_with('Z'));
    for h in [
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "x-ratelimit-window",
    ] {
        assert!(r.header(h).is_some(), "missing {h}");
    }
    assert_eq!(
        app.call(Method::GET, "/status", None, None)
            .await
            .expect(401)
            .code(),
        "authentication_error"
    );
    let s = app.get("/status", &app.admin_key).await.expect(200);
    // SPEC 8.4's headers are counts, also for an organization without limits (enterprise by
    // default): integers every client parses, the remaining count going down.
    let count = |r: &plantd_test_support::Reply, h: &str| -> u64 {
        let v = r.header(h).unwrap_or_default();
        v.parse()
            .unwrap_or_else(|_| panic!("{h} is not an integer: {v:?}"))
    };
    assert_eq!(count(&s, "x-ratelimit-limit"), 2_147_483_647);
    let next = app.get("/status", &app.admin_key).await.expect(200);
    assert!(count(&next, "x-ratelimit-remaining") < count(&s, "x-ratelimit-remaining"));
    for h in ["x-ratelimit-reset", "x-ratelimit-window"] {
        count(&next, h);
    }
    assert_eq!(s.json["data"]["status"], "operational");
    assert_eq!(s.json["data"]["components"]["database"]["status"], "up");
    let workers = s.json["data"]["components"]["workers"].as_array().unwrap();
    assert!(
        workers.iter().any(|w| w["name"] == "usage_flusher"),
        "{workers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_ids_and_methods() {
    let app = spawn_app().await;
    let r = app.get("/no-such-thing", &app.admin_key).await.expect(404);
    assert_eq!(r.code(), "not_found");
    assert!(r.header("x-ratelimit-limit").is_some());
    assert_eq!(
        app.get("/data-sources/does-not-exist", &app.admin_key)
            .await
            .expect(404)
            .code(),
        "not_found"
    );
    assert_eq!(
        app.get("/data-sources/'%20OR%201=1--", &app.admin_key)
            .await
            .expect(404)
            .code(),
        "not_found"
    );
    let r = app
        .call(Method::PATCH, "/data-sources", Some(&app.admin_key), None)
        .await
        .expect(405);
    assert_eq!(r.code(), "method_not_allowed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_are_validation_errors_naming_the_field() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let cases: Vec<(&str, &str, &str)> = vec![
        ("application/json", "{\"name\": \"x\",", "body"),
        ("application/json", "", "body"),
        ("application/json", "[1,2]", "body"),
        (
            "application/json",
            r#"{"type": "modbus", "config": {"host": "h"}}"#,
            "name",
        ),
        (
            "application/json",
            r#"{"name": 5, "type": "modbus", "config": {"host": "h"}}"#,
            "name",
        ),
        (
            "application/json",
            r#"{"name": "a", "type": "profibus", "config": {}}"#,
            "type",
        ),
        (
            "application/json",
            r#"{"name": "a", "type": "modbus", "config": {"host": "h"}, "colour": 1}"#,
            "colour",
        ),
        (
            "application/json",
            r#"{"name": "a", "type": "modbus", "config": {"host": "h", "port": 70000}}"#,
            "config.port",
        ),
        (
            "application/json",
            r#"{"name": "a", "type": "modbus", "config": {"host": "h", "unit_id": 300}}"#,
            "config.unit_id",
        ),
        (
            "application/json",
            r#"{"name": "a", "type": "modbus", "config": {"port": 502}}"#,
            "config.host",
        ),
        (
            "application/json",
            r#"{"name": "a", "type": "opcua", "config": {"endpoint": "http://x"}}"#,
            "config.endpoint",
        ),
        (
            "application/json",
            r#"{"name": "a", "type": "mqtt", "config": {"broker_url": "mqtt://b"}}"#,
            "config.topics",
        ),
        ("text/plain", r#"{"name": "a"}"#, "Content-Type"),
    ];
    for (ct, body, field) in cases {
        let r = app
            .raw(Method::POST, "/data-sources", Some(k), ct, body)
            .await;
        assert_eq!(r.status, 400, "{body}: {}", r.text);
        assert_eq!(r.code(), "validation_error");
        let details = r.json["error"]["details"].as_array().unwrap();
        assert!(
            details.iter().any(|d| d["field"] == field),
            "{body}: expected field {field}, got {}",
            r.text
        );
        assert!(!r.json["error"]["message"].as_str().unwrap().is_empty());
    }
    // Too large a body is refused in the same envelope. (Only slightly too large: a server may
    // close the connection before reading a much larger body, which a client sees as an error.)
    let big = format!(
        r#"{{"name": "{}", "type": "modbus", "config": {{"host": "h"}}}}"#,
        "x".repeat(plantd_api::router::MAX_BODY_BYTES + 1024)
    );
    let r = app
        .raw(
            Method::POST,
            "/data-sources",
            Some(k),
            "application/json",
            &big,
        )
        .await;
    assert_eq!(
        (r.status.as_u16(), r.code()),
        (400, "validation_error"),
        "{}",
        &r.text[..r.text.len().min(300)]
    );
    // Nothing was stored by any of these.
    assert_eq!(
        app.get("/data-sources", k).await.expect(200).json["meta"]["total"],
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_edges_and_stable_order() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    for i in 0..25 {
        app.post("/data-sources", k, modbus(&format!("PLC {i:02}")))
            .await
            .expect(201);
    }
    let first = app.get("/data-sources", k).await.expect(200);
    assert_eq!(
        first.json["meta"],
        json!({"page": 1, "per_page": 20, "total": 25})
    );
    assert_eq!(first.json["data"].as_array().unwrap().len(), 20);
    let second = app.get("/data-sources?page=2", k).await.expect(200);
    assert_eq!(second.json["data"].as_array().unwrap().len(), 5);
    let names: Vec<_> = first.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second.json["data"].as_array().unwrap())
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<_> = (0..25).map(|i| format!("PLC {i:02}")).collect();
    assert_eq!(
        names, expected,
        "creation order, no row twice, none missing"
    );
    let beyond = app.get("/data-sources?page=9", k).await.expect(200);
    assert_eq!(beyond.json["data"], json!([]));
    assert_eq!(beyond.json["meta"]["total"], 25);
    let clamped = app.get("/data-sources?per_page=500", k).await.expect(200);
    assert_eq!(clamped.json["meta"]["per_page"], 100);
    assert_eq!(clamped.json["data"].as_array().unwrap().len(), 25);
    for bad in [
        "page=0",
        "page=-1",
        "per_page=0",
        "page=abc",
        "per_page=1.5",
        "type=profibus",
        "status=up",
    ] {
        let r = app.get(&format!("/data-sources?{bad}"), k).await;
        assert_eq!(
            (r.status.as_u16(), r.code()),
            (400, "validation_error"),
            "{bad}: {}",
            r.text
        );
    }
    let modbus_only = app
        .get(
            "/data-sources?type=modbus&status=disconnected&per_page=1",
            k,
        )
        .await
        .expect(200);
    assert_eq!(modbus_only.json["meta"]["total"], 25);
    assert_eq!(
        app.get("/data-sources?type=opcua", k)
            .await
            .expect(200)
            .json["meta"]["total"],
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document_covers_every_route_with_schemas() {
    let app = spawn_app().await;
    let r = app
        .call(Method::GET, "/openapi.json", None, None)
        .await
        .expect(200);
    let doc = r.json;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let mut documented = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            documented.push(format!("{} {path}", method.to_uppercase()));
            assert!(
                op["x-required-scope"].is_string(),
                "{method} {path} lacks its scope"
            );
            let responses = op["responses"].as_object().expect("responses");
            // Every error an operation can give is documented, with the error envelope.
            let public = op["x-required-scope"] == "none (public)";
            let mut wanted = vec!["429", "500"];
            if !public {
                wanted.push("401");
            }
            if op["x-required-scope"]
                .as_str()
                .is_some_and(|s| s.contains(':') || s == "admin")
            {
                wanted.push("403");
            }
            if path.contains('{') {
                wanted.push("404");
            }
            for status in wanted {
                assert!(
                    responses.contains_key(status),
                    "{method} {path} does not document {status}"
                );
            }
            for (status, r) in responses {
                assert!(
                    r["$ref"].is_string() || r["description"].is_string(),
                    "{method} {path} {status} lacks a description"
                );
            }
            // Public operations need no credentials; the others the API key of the document.
            assert_eq!(
                op["security"] == json!([]),
                public,
                "{method} {path}: security {}",
                op["security"]
            );
            // Actions without a body (SPEC lists none for them).
            let bodiless = [
                "/test",
                "/rotate",
                "/enable",
                "/disable",
                "/resolve",
                "/logout",
                "/rotate-secret",
                "/duplicate",
                "/suspend",
                "/reinstate",
                "/revoke",
                "/release",
                "/cancel",
                "/rollback",
                "/continue",
                "/skip",
                "/validate",
                "/undeploy",
                "/run",
                "/sync/cloud",
            ];
            if ["post", "put"].contains(&method.as_str())
                && !bodiless.iter().any(|s| path.ends_with(s))
            {
                assert!(
                    op["requestBody"].is_object(),
                    "{method} {path} lacks its request body"
                );
            }
        }
    }
    let routes = plantd_api::router::route_list();
    let mut declared: Vec<_> = routes
        .iter()
        .map(|(method, path, _)| format!("{method} {path}"))
        .collect();
    // The authorization server's operations at the root are in the document too.
    let root = plantd_api::oauth_server::root_operations();
    assert!(root.len() >= 7, "{root:?}");
    declared.extend(root.iter().map(|(method, path)| format!("{method} {path}")));
    documented.sort();
    declared.sort();
    assert_eq!(
        documented, declared,
        "the OpenAPI document and the route declarations must list the same routes"
    );
    assert!(doc["components"]["schemas"]["DataSourceView"].is_object());
    assert_eq!(doc["security"], json!([{"api_key": []}]));
    assert!(doc["components"]["responses"]["ValidationError"].is_object());
    assert!(doc["components"]["securitySchemes"]["api_key"].is_object());
    let docs = app.call(Method::GET, "/docs", None, None).await.expect(200);
    assert!(
        docs.text.contains("openapi.json") && !docs.text.contains("https://"),
        "docs page must work offline"
    );
    // Every declared route answers (not a 404 from the router) for an admin key.
    for (method, route, _) in &routes {
        let path = route
            .trim_start_matches("/v1")
            .replace("{id}", "unknown-id");
        let r = app
            .call(method.clone(), &path, Some(&app.admin_key), Some(json!({})))
            .await;
        assert!(
            r.status != 405 && r.status != 500,
            "{method} {route}: {}",
            r.text
        );
        assert!(
            r.status != 404 || r.code() == "not_found",
            "{method} {route}: {}",
            r.text
        );
    }
    let _ = Scope::Admin;
}

/// No request can produce a 500 by its content: every route, hostile bodies and queries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_never_causes_a_server_error() {
    let app = spawn_app().await;
    let bodies = [
        "",
        "null",
        "{}",
        "[]",
        "\"text\"",
        "{\"name\": null, \"type\": null, \"config\": null, \"scopes\": null, \"email\": null}",
        "{\"name\": \"\\u0000\", \"type\": \"modbus\", \"config\": {\"host\": \"\\u0000\"}}",
        "{\"name\": 1e400}",
        "{\"page\": -1, \"expires_at\": \"9999-99-99T99:99:99Z\", \"start_time\": \"0000-00-00\"}",
        "{\"name\": \"x\", \"type\": \"mqtt\", \"config\": {\"broker_url\": \"mqtt://[::1\", \"topics\": [\"#/#\", 5]}}",
        "{\"email\": \"a@b\", \"role\": \"owner\", \"name\": \"\"}",
        "{\"format\": \"csv\", \"start_time\": \"2030-01-01T00:00:00Z\", \"end_time\": \"2020-01-01T00:00:00Z\"}",
        "{\"current_password\": \"\", \"new_password\": \"\"}",
        "\u{feff}{}",
        "{\"a\":",
    ];
    let queries = [
        "",
        "?page=0",
        "?per_page=-5",
        "?page=99999999999999999999",
        "?start_time=%ZZ",
        "?severities=,,,",
        "?type=&status=",
        "?search=%25%27%22--",
    ];
    let ids = [
        "unknown",
        "%00",
        "..%2F..%2Fetc%2Fpasswd",
        &"x".repeat(5000),
    ];
    for (method, route, _) in plantd_api::router::route_list() {
        for id in ids {
            let path = route.trim_start_matches("/v1").replace("{id}", id);
            // Mutations write an audit record each: fewer queries for them keep the test quick.
            for q in if method == Method::GET {
                &queries[..]
            } else {
                &queries[..2]
            } {
                for body in if method == Method::GET {
                    &bodies[..1]
                } else {
                    &bodies[..]
                } {
                    let r = app
                        .raw(
                            method.clone(),
                            &format!("{path}{q}"),
                            Some(&app.admin_key),
                            "application/json",
                            body,
                        )
                        .await;
                    assert!(
                        r.status.as_u16() < 500 || r.status.as_u16() == 503,
                        "{method} {path}{q} {body:?}: {} {}",
                        r.status,
                        r.text
                    );
                    if r.status.as_u16() >= 400 {
                        assert!(
                            r.json["error"]["code"].is_string(),
                            "{method} {path}{q}: not an error envelope: {}",
                            r.text
                        );
                    }
                }
            }
            if !route.contains("{id}") {
                break;
            }
        }
    }
}
