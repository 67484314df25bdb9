//! Authentication and authorization: missing, unknown, revoked, rotated and expired keys, scope
//! refusals, key secrets and usage.

use plantd_model::{Scope, Tier, Timestamp};
use plantd_store::NewApiKey;
use plantd_test_support::spawn_app;
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_malformed_and_unknown_keys_are_401() {
    let app = spawn_app().await;
    let r = app
        .call(Method::GET, "/data-sources", None, None)
        .await
        .expect(401);
    assert_eq!(r.code(), "authentication_error");
    assert!(r.header("x-ratelimit-remaining").is_some());
    for header in ["Basic abc", "Bearer ", "pdk_xyz"] {
        let r = app
            .client
            .get(format!("{}/data-sources", app.base))
            .header("authorization", header)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{header}");
    }
    let r = app
        .get(
            "/data-sources",
            "pdk_0000000000000000000000000000000000000000000",
        )
        .await
        .expect(401);
    assert_eq!(r.code(), "authentication_error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_are_enforced_and_admin_grants_all() {
    let app = spawn_app().await;
    let reader = app.key(&[Scope::ReadAssets]).await;
    let telemetry = app
        .key(&[Scope::ReadTelemetry, Scope::WriteTelemetry])
        .await;
    app.get("/data-sources", &reader).await.expect(200);
    let body = json!({"name": "PLC", "type": "modbus", "config": {"host": "plc.invalid"}});
    let r = app
        .post("/data-sources", &reader, body.clone())
        .await
        .expect(403);
    assert_eq!(r.code(), "authorization_error");
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("write:assets")
    );
    assert_eq!(
        app.get("/data-sources", &telemetry)
            .await
            .expect(403)
            .code(),
        "authorization_error"
    );
    assert_eq!(
        app.get("/api-keys", &reader).await.expect(403).code(),
        "authorization_error"
    );
    assert_eq!(
        app.get("/audit/logs", &reader).await.expect(403).code(),
        "authorization_error"
    );
    // Any valid key may read its organization and status.
    app.get("/organizations/current", &telemetry)
        .await
        .expect(200);
    app.post("/data-sources", &app.admin_key, body)
        .await
        .expect(201);
    // The refusal was audited as a failure.
    let logs = app
        .get("/audit/logs?event_types=data_source.create", &app.admin_key)
        .await
        .expect(200);
    let outcomes: Vec<_> = logs.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["outcome"].clone(), r["status_code"].clone()))
        .collect();
    assert!(
        outcomes.contains(&(json!("failure"), json!(403))),
        "{outcomes:?}"
    );
    assert!(
        outcomes.contains(&(json!("success"), json!(201))),
        "{outcomes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_created_once_listed_without_secret_revoked_and_rotated() {
    let app = spawn_app().await;
    let admin = app.admin_key.as_str();
    let created = app
        .post(
            "/api-keys",
            admin,
            json!({"name": "ci", "scopes": ["read:assets", "read:assets", "write:telemetry"]}),
        )
        .await
        .expect(201);
    let secret = created.json["data"]["key"].as_str().unwrap().to_string();
    let id = created.id();
    assert!(secret.starts_with("pdk_") && secret.len() > 40);
    assert_eq!(
        created.json["data"]["scopes"],
        json!(["read:assets", "write:telemetry"])
    );
    assert_eq!(created.json["data"]["status"], "active");
    assert!(secret.starts_with(created.json["data"]["prefix"].as_str().unwrap()));
    app.get("/data-sources", &secret).await.expect(200);

    let list = app.get("/api-keys", admin).await.expect(200);
    assert!(!list.text.contains(&secret), "lists never show the secret");
    assert!(
        list.json["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k.get("key").is_none())
    );
    assert_eq!(list.json["meta"]["total"], 2);

    // Rotation: new secret once, the old one stops working at once.
    let rotated = app
        .post(&format!("/api-keys/{id}/rotate"), admin, json!({}))
        .await
        .expect(200);
    let new_secret = rotated.json["data"]["key"].as_str().unwrap().to_string();
    assert_ne!(new_secret, secret);
    assert_eq!(
        app.get("/data-sources", &secret).await.expect(401).code(),
        "authentication_error"
    );
    app.get("/data-sources", &new_secret).await.expect(200);

    // Revocation.
    app.delete(&format!("/api-keys/{id}"), admin)
        .await
        .expect(204);
    let r = app.get("/data-sources", &new_secret).await.expect(401);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("revoked")
    );
    app.delete(&format!("/api-keys/{id}"), admin)
        .await
        .expect(204);
    assert_eq!(
        app.post(&format!("/api-keys/{id}/rotate"), admin, json!({}))
            .await
            .expect(409)
            .code(),
        "conflict"
    );
    let list = app.get("/api-keys", admin).await.expect(200);
    let k = list.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(k["status"], "revoked");
    assert!(k["revoked_at"].is_string());

    // Validation of new keys.
    for (body, field) in [
        (json!({"name": "x", "scopes": []}), "scopes"),
        (json!({"name": "x", "scopes": ["root"]}), "scopes[0]"),
        (json!({"name": "", "scopes": ["admin"]}), "name"),
        (
            json!({"name": "x", "scopes": ["admin"], "expires_at": "2001-01-01T00:00:00Z"}),
            "expires_at",
        ),
        (
            json!({"name": "x", "scopes": ["admin"], "expires_at": "tomorrow"}),
            "expires_at",
        ),
    ] {
        let r = app.post("/api-keys", admin, body.clone()).await.expect(400);
        assert!(
            r.json["error"]["details"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["field"] == field),
            "{body}: {}",
            r.text
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_keys_are_refused() {
    let app = spawn_app().await;
    let secret = plantd_auth::generate_key();
    app.store
        .create_api_key(NewApiKey {
            org_id: &app.org_id,
            user_id: None,
            name: "old",
            scopes: &[Scope::Admin],
            expires_at: Some(Timestamp::from_millis(Timestamp::now().millis() - 1000)),
            prefix: &secret.display_prefix,
            key_hash: &secret.hash,
        })
        .await
        .unwrap();
    let r = app.get("/data-sources", &secret.secret).await.expect(401);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{}",
        r.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_counts_requests_per_day_and_endpoint() {
    let app = spawn_app().await;
    let reader = app.key(&[Scope::ReadAssets]).await;
    for _ in 0..3 {
        app.get("/data-sources", &reader).await.expect(200);
    }
    app.get("/data-sources/nope", &reader).await.expect(404);
    let keys = app.get("/api-keys", &app.admin_key).await.expect(200);
    let reader_id = keys.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "test key")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let usage = app
        .get(&format!("/api-keys/{reader_id}/usage"), &app.admin_key)
        .await
        .expect(200);
    let rows = usage.json["data"].as_array().unwrap();
    let today = Timestamp::now().day();
    let count = |endpoint: &str| {
        rows.iter()
            .find(|r| r["endpoint"] == endpoint && r["day"] == today.as_str())
            .map(|r| r["requests"].clone())
    };
    assert_eq!(count("GET /v1/data-sources"), Some(json!(3)), "{rows:?}");
    assert_eq!(
        count("GET /v1/data-sources/{id}"),
        Some(json!(1)),
        "{rows:?}"
    );
    let keys = app.get("/api-keys", &app.admin_key).await.expect(200);
    let reader = keys.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == reader_id.as_str())
        .unwrap()
        .clone();
    assert!(reader["last_used_at"].is_string(), "{reader}");
    let org_usage = app
        .get("/organizations/current/usage", &app.admin_key)
        .await
        .expect(200);
    // The calling key's requests against the per-key limit; the organization's beside them.
    let usage = &org_usage.json["data"];
    assert_eq!(usage["api_requests"]["current"], 3, "{}", org_usage.text);
    assert!(
        usage["organization_api_requests"]["current"]
            .as_u64()
            .unwrap()
            >= 7,
        "{}",
        org_usage.text
    );
    assert_eq!(usage["api_requests"]["period"], "day");
    assert_eq!(usage["telemetry_points"]["period"], "hour");
    // An enterprise organization without configured limits: integers that do not bind.
    assert_eq!(usage["api_requests"]["limit"], 2_147_483_647_u64);
    // A trial organization shows SPEC 8.1 and 8.3's figures for the periods named.
    let (_, trial) = app.other_org("Trial", Tier::Trial).await;
    let r = app
        .get("/organizations/current/usage", &trial)
        .await
        .expect(200);
    let usage = &r.json["data"];
    assert_eq!(usage["tier"], "trial");
    assert_eq!(usage["api_requests"]["limit"], 10_000, "{}", r.text);
    assert_eq!(usage["organization_api_requests"]["limit"], 50_000);
    assert_eq!(usage["telemetry_points"]["limit"], 10_000);
    assert_eq!(usage["api_requests"]["current"], 0);
    assert_eq!(
        app.get("/api-keys/unknown/usage", &app.admin_key)
            .await
            .expect(404)
            .code(),
        "not_found"
    );
}
