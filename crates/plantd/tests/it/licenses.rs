//! Products and licenses (issue 16): CRUD and refusals, activation up to the limit, idempotent
//! re-activation, deactivation, validation codes, states and renewal, expiry, tampered and
//! made-up keys, tenancy, concurrent activations racing for the last slot, the per-key limit,
//! the offline check (the command line and python's `cryptography`), audit and webhooks.

use plantd_app::AppConfig;
use plantd_auth::license_key::{self, LicenseClaims, LicenseSigner};
use plantd_model::{Scope, Tier};
use plantd_test_support::{TestApp, spawn_app, spawn_app_with};
use reqwest::Method;
use serde_json::{Value, json};

async fn product(app: &TestApp, key: &str, sku: &str, license_type: &str) -> Value {
    app.post(
        "/products",
        key,
        json!({"name": format!("Edge Gateway {sku}"), "sku": sku, "description": "Hub Pro licence",
               "price": 499.0, "license_type": license_type, "features": ["mqtt", "opcua", "modbus"]}),
    )
    .await
    .expect(201)
    .json["data"]
        .clone()
}

async fn license(app: &TestApp, key: &str, body: Value) -> Value {
    app.post("/licenses", key, body).await.expect(201).json["data"].clone()
}

/// A device call: no API key.
async fn device(app: &TestApp, path: &str, body: Value) -> plantd_test_support::Reply {
    app.call(Method::POST, path, None, Some(body)).await
}

async fn validate(app: &TestApp, body: Value) -> Value {
    device(app, "/licenses/validate", body)
        .await
        .expect(200)
        .json["data"]
        .clone()
}

fn activation(key: &str, device_id: &str, fingerprint: &str) -> Value {
    json!({"license_key": key, "device_id": device_id, "hardware_fingerprint": fingerprint})
}

/// The organization's public key as published (PEM).
async fn public_key_pem(app: &TestApp, key: &str) -> String {
    let view = app.get("/licenses/public-key", key).await.expect(200).json["data"].clone();
    assert_eq!(view["algorithm"], "Ed25519");
    view["public_key_pem"].as_str().unwrap().to_string()
}

async fn public_key(app: &TestApp, key: &str) -> [u8; 32] {
    license_key::parse_public_key(&public_key_pem(app, key).await).unwrap()
}

/// Changes one character inside the key's expiry bytes (still valid base64url).
fn tamper(key: &str) -> String {
    let mut chars: Vec<char> = key.chars().collect();
    let at = 4 + 50;
    chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
    chars.into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn products_crud_and_refusals() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let p = product(&app, k, "HUB-PRO", "perpetual").await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(p["features"], json!(["mqtt", "opcua", "modbus"]));
    assert_eq!(p["price"], 499.0);
    assert_eq!(
        app.get(&format!("/products/{id}"), k)
            .await
            .expect(200)
            .json["data"],
        p
    );

    let dup = app
        .post(
            "/products",
            k,
            json!({"name": "Other", "sku": "HUB-PRO", "price": 1, "license_type": "subscription"}),
        )
        .await
        .expect(409);
    assert_eq!(dup.code(), "conflict");
    let bad = app
        .post(
            "/products",
            k,
            json!({"name": "", "sku": "has space", "price": -1, "license_type": "subscription", "features": ["MQTT", "mqtt", "mqtt"]}),
        )
        .await
        .expect(400);
    let fields: Vec<&str> = bad.json["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        ["name", "sku", "price", "features[0]", "features[2]"]
    );
    let kind = app
        .post(
            "/products",
            k,
            json!({"name": "X", "sku": "X", "price": 1, "license_type": "lifetime"}),
        )
        .await
        .expect(400);
    assert_eq!(kind.json["error"]["details"][0]["field"], "license_type");

    let other = product(&app, k, "HUB-LITE", "subscription").await;
    let list = app.get("/products", k).await.expect(200);
    assert_eq!(list.json["meta"]["total"], 2);
    // Partial update; a SKU another product has is a conflict.
    let updated = app
        .put(
            &format!("/products/{id}"),
            k,
            json!({"price": 549.5, "features": ["mqtt", "ml"]}),
        )
        .await
        .expect(200)
        .json["data"]
        .clone();
    assert_eq!(updated["price"], 549.5);
    assert_eq!(updated["name"], p["name"]);
    assert_eq!(updated["features"], json!(["mqtt", "ml"]));
    app.put(&format!("/products/{id}"), k, json!({"sku": "HUB-LITE"}))
        .await
        .expect(409);

    // Administrators only.
    let reader = app.key(&[Scope::ReadAssets]).await;
    app.get("/products", &reader).await.expect(403);
    app.post("/licenses", &reader, json!({})).await.expect(403);

    // Tenancy: another organization's product is missing here, also for a license.
    let (_, other_key) = app.other_org("Other Co", Tier::Professional).await;
    app.get(&format!("/products/{id}"), &other_key)
        .await
        .expect(404);
    app.put(&format!("/products/{id}"), &other_key, json!({"price": 1}))
        .await
        .expect(404);
    app.delete(&format!("/products/{id}"), &other_key)
        .await
        .expect(404);
    let refused = app
        .post(
            "/licenses",
            &other_key,
            json!({"product_id": id, "customer_email": "ops@plant.example"}),
        )
        .await
        .expect(400);
    assert_eq!(refused.json["error"]["details"][0]["field"], "product_id");
    assert_eq!(
        app.get("/products", &other_key).await.expect(200).json["meta"]["total"],
        0
    );

    // A product with licenses is kept; one without is deleted.
    license(
        &app,
        k,
        json!({"product_id": id, "customer_email": "ops@plant.example"}),
    )
    .await;
    let kept = app.delete(&format!("/products/{id}"), k).await.expect(409);
    assert!(
        kept.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1 license")
    );
    let other_id = other["id"].as_str().unwrap();
    app.delete(&format!("/products/{other_id}"), k)
        .await
        .expect(204);
    app.get(&format!("/products/{other_id}"), k)
        .await
        .expect(404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activation_validation_and_deactivation() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let hook = app
        .post("/webhooks", k, json!({"url": "http://127.0.0.1:9/hook", "events": ["license.created", "license.activated", "license.deactivated"]}))
        .await
        .expect(201)
        .id();
    let p = product(&app, k, "HUB", "subscription").await;
    // Create validation: a subscription needs its term; a perpetual one must not have one.
    let bad = app
        .post(
            "/licenses",
            k,
            json!({"product_id": p["id"], "customer_email": "not-an-email"}),
        )
        .await
        .expect(400);
    assert_eq!(bad.json["error"]["details"][0]["field"], "customer_email");
    app.post(
        "/licenses",
        k,
        json!({"product_id": p["id"], "customer_email": "a@b.example"}),
    )
    .await
    .expect(400);
    app.post("/licenses", k, json!({"product_id": p["id"], "license_type": "perpetual", "validity_days": 30, "customer_email": "a@b.example"}))
        .await
        .expect(400);
    app.post("/licenses", k, json!({"product_id": p["id"], "validity_days": 30, "max_activations": 0, "customer_email": "a@b.example"}))
        .await
        .expect(400);

    let l = license(
        &app,
        k,
        json!({"product_id": p["id"], "license_type": "subscription", "max_activations": 2,
               "validity_days": 365, "customer_email": "ops@plant.example"}),
    )
    .await;
    let key = l["license_key"].as_str().unwrap().to_string();
    let lid = l["id"].as_str().unwrap().to_string();
    assert!(key.starts_with("pdl_"), "{key}");
    assert_eq!(l["status"], "active");
    assert_eq!(l["current_activations"], 0);
    assert_eq!(l["features"], json!(["mqtt", "opcua", "modbus"]));

    // Offline: the key verifies with the organization's public key and carries the license.
    let claims = license_key::verify(&key, &public_key(&app, k).await).unwrap();
    assert_eq!(claims.license_id.to_string(), lid);
    assert_eq!(claims.product_id.to_string(), p["id"].as_str().unwrap());
    assert_eq!(claims.features, ["mqtt", "opcua", "modbus"]);
    let expires = l["expires_at"].as_str().unwrap();
    assert_eq!(
        plantd_model::Timestamp::parse(expires)
            .unwrap()
            .unix_seconds(),
        claims.expires_at.unwrap()
    );

    // Activation up to the limit; the same device again is the same activation.
    let a = device(&app, "/licenses/activate", activation(&key, "gw-1", "fp-1"))
        .await
        .expect(201);
    let a = a.json["data"].clone();
    assert_eq!(a["license_id"], lid.as_str());
    assert_eq!(a["expires_at"], l["expires_at"]);
    assert_eq!(a["features"], l["features"]);
    let again = device(&app, "/licenses/activate", activation(&key, "gw-1", "fp-1"))
        .await
        .expect(200);
    assert_eq!(again.json["data"]["activation_id"], a["activation_id"]);
    let moved = device(
        &app,
        "/licenses/activate",
        activation(&key, "gw-1", "fp-other"),
    )
    .await
    .expect(409);
    assert_eq!(moved.code(), "fingerprint_mismatch");
    let b = device(&app, "/licenses/activate", activation(&key, "gw-2", "fp-2"))
        .await
        .expect(201);
    let full = device(&app, "/licenses/activate", activation(&key, "gw-3", "fp-3"))
        .await
        .expect(409);
    assert_eq!(full.code(), "too_many_activations");
    let seen = app
        .get(&format!("/licenses/{lid}"), k)
        .await
        .expect(200)
        .json["data"]
        .clone();
    assert_eq!(seen["current_activations"], 2);

    // Validation codes.
    let v = validate(&app, json!({"license_key": key})).await;
    assert_eq!(
        (v["valid"].as_bool(), v["code"].as_str()),
        (Some(true), Some("VALID"))
    );
    assert_eq!(
        (
            v["current_activations"].as_i64(),
            v["max_activations"].as_i64()
        ),
        (Some(2), Some(2))
    );
    assert_eq!(v["features"], l["features"]);
    assert!(
        v["license_key"].is_null(),
        "the current key is not repeated"
    );
    let on = validate(
        &app,
        json!({"license_key": key, "device_id": "gw-1", "hardware_fingerprint": "fp-1"}),
    )
    .await;
    assert_eq!(on["code"], "VALID");
    assert_eq!(on["activation_id"], a["activation_id"]);
    let off = validate(&app, json!({"license_key": key, "device_id": "gw-3"})).await;
    assert_eq!(
        (off["valid"].as_bool(), off["code"].as_str()),
        (Some(false), Some("NOT_ACTIVATED_ON_DEVICE"))
    );
    let fp = validate(
        &app,
        json!({"license_key": key, "device_id": "gw-1", "hardware_fingerprint": "fp-x"}),
    )
    .await;
    assert_eq!(fp["code"], "FINGERPRINT_MISMATCH");
    // The server keeps what it looked up (docs/api.md): a change is seen at once all the same.
    let two = json!({"license_key": key, "device_id": "gw-2"});
    assert_eq!(validate(&app, two.clone()).await["code"], "VALID");

    // Deactivation frees a slot: by an administrator, and by the device with its key.
    let freed = app
        .post(
            &format!("/licenses/{lid}/deactivate"),
            k,
            json!({"activation_id": b.json["data"]["activation_id"]}),
        )
        .await
        .expect(200);
    assert_eq!(freed.json["data"]["current_activations"], 1);
    let gone = validate(&app, two).await;
    assert_eq!(
        (gone["code"].as_str(), gone["current_activations"].as_i64()),
        (Some("NOT_ACTIVATED_ON_DEVICE"), Some(1))
    );
    app.post(
        &format!("/licenses/{lid}/deactivate"),
        k,
        json!({"activation_id": b.json["data"]["activation_id"]}),
    )
    .await
    .expect(404);
    let c = device(&app, "/licenses/activate", activation(&key, "gw-3", "fp-3"))
        .await
        .expect(201);
    let three = json!({"license_key": key, "device_id": "gw-3"});
    assert_eq!(validate(&app, three.clone()).await["code"], "VALID");
    device(
        &app,
        "/licenses/deactivate",
        json!({"license_key": key, "activation_id": c.json["data"]["activation_id"]}),
    )
    .await
    .expect(204);
    assert_eq!(
        validate(&app, three).await["code"],
        "NOT_ACTIVATED_ON_DEVICE"
    );
    let activations = app
        .get(&format!("/licenses/{lid}/activations"), k)
        .await
        .expect(200);
    let devices: Vec<&str> = activations.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["device_id"].as_str().unwrap())
        .collect();
    assert_eq!(devices, ["gw-1"]);

    // Filters.
    let other = license(
        &app,
        k,
        json!({"product_id": p["id"], "validity_days": 30, "customer_email": "Buyer@Example.com"}),
    )
    .await;
    let by_email = app
        .get("/licenses?customer_email=buyer@example.com", k)
        .await
        .expect(200);
    assert_eq!(by_email.json["meta"]["total"], 1);
    assert_eq!(by_email.json["data"][0]["id"], other["id"]);
    let pid = p["id"].as_str().unwrap();
    assert_eq!(
        app.get(&format!("/licenses?product_id={pid}&status=active"), k)
            .await
            .expect(200)
            .json["meta"]["total"],
        2
    );
    assert_eq!(
        app.get("/licenses?status=suspended", k)
            .await
            .expect(200)
            .json["meta"]["total"],
        0
    );
    app.get("/licenses?status=lapsed", k).await.expect(400);

    // Device calls are audited in the license's organization, by the license key.
    let audit = app
        .get("/audit/logs?event_types=license.activate&per_page=100", k)
        .await
        .expect(200);
    let records = audit.json["data"].as_array().unwrap();
    assert_eq!(records.len(), 6, "{records:?}");
    assert!(
        records
            .iter()
            .all(|r| r["actor_type"] == "license_key" && r["resource_id"] == lid.as_str())
    );
    assert!(
        records
            .iter()
            .any(|r| r["error_code"] == "too_many_activations")
    );

    // Webhooks subscribed to license events get them, with the license.
    let deliveries = app
        .wait_list(&format!("/webhooks/{hook}/deliveries?per_page=100"), |d| {
            d.len() >= 7
        })
        .await;
    let events: Vec<&str> = deliveries
        .iter()
        .map(|d| d["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        events.iter().filter(|e| **e == "license.activated").count(),
        3,
        "{events:?}"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| **e == "license.deactivated")
            .count(),
        2,
        "{events:?}"
    );
    assert_eq!(
        events.iter().filter(|e| **e == "license.created").count(),
        2,
        "{events:?}"
    );
    let created = deliveries
        .iter()
        .find(|d| d["payload"]["data"]["id"] == lid.as_str() && d["event"] == "license.created")
        .unwrap();
    assert_eq!(created["payload"]["data"]["license_key"], key.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn states_renewal_and_expiry() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let p = product(&app, k, "HUB", "subscription").await;
    let l = license(&app, k, json!({"product_id": p["id"], "validity_days": 30, "max_activations": 5, "customer_email": "ops@plant.example"})).await;
    let lid = l["id"].as_str().unwrap().to_string();
    let key = l["license_key"].as_str().unwrap().to_string();
    device(&app, "/licenses/activate", activation(&key, "gw-1", "fp"))
        .await
        .expect(201);
    assert_eq!(
        validate(&app, json!({"license_key": key})).await["code"],
        "VALID"
    );

    let s = app
        .post(&format!("/licenses/{lid}/suspend"), k, json!({}))
        .await
        .expect(200);
    assert_eq!(s.json["data"]["status"], "suspended");
    assert_eq!(
        validate(&app, json!({"license_key": key})).await["code"],
        "SUSPENDED"
    );
    let refused = device(&app, "/licenses/activate", activation(&key, "gw-2", "fp"))
        .await
        .expect(409);
    assert_eq!(refused.code(), "license_suspended");
    app.post(&format!("/licenses/{lid}/suspend"), k, json!({}))
        .await
        .expect(409);
    let r = app
        .post(&format!("/licenses/{lid}/reinstate"), k, json!({}))
        .await
        .expect(200);
    assert_eq!(r.json["data"]["status"], "active");
    app.post(&format!("/licenses/{lid}/reinstate"), k, json!({}))
        .await
        .expect(409);

    // Renewal extends the expiry by the given days (default validity_days) and re-signs the key;
    // the superseded key still validates online and is answered with the current one.
    let renewed = app
        .post(&format!("/licenses/{lid}/renew"), k, json!({"days": 10}))
        .await
        .expect(200)
        .json["data"]
        .clone();
    let before = plantd_model::Timestamp::parse(l["expires_at"].as_str().unwrap()).unwrap();
    let after = plantd_model::Timestamp::parse(renewed["expires_at"].as_str().unwrap()).unwrap();
    assert_eq!(after.millis() - before.millis(), 10 * 86_400_000);
    let new_key = renewed["license_key"].as_str().unwrap().to_string();
    assert_ne!(new_key, key);
    let public = public_key(&app, k).await;
    assert_eq!(
        license_key::verify(&new_key, &public).unwrap().expires_at,
        Some(after.unix_seconds())
    );
    let old = validate(&app, json!({"license_key": key})).await;
    assert_eq!(old["code"], "VALID");
    assert_eq!(old["license_key"], new_key.as_str());
    // An empty body renews by validity_days.
    let default = app
        .call(
            Method::POST,
            &format!("/licenses/{lid}/renew"),
            Some(k),
            None,
        )
        .await
        .expect(200);
    let third =
        plantd_model::Timestamp::parse(default.json["data"]["expires_at"].as_str().unwrap())
            .unwrap();
    assert_eq!(third.millis() - after.millis(), 30 * 86_400_000);
    app.post(&format!("/licenses/{lid}/renew"), k, json!({"days": 0}))
        .await
        .expect(400);

    // Expiry: the test moves the license's end into the past, as time would. (Nothing has
    // validated since the renewal forgot the license, so the server keeps no earlier end.)
    sqlx::query("UPDATE licenses SET expires_at = $1 WHERE id = $2")
        .bind(plantd_model::Timestamp::now().millis() - 1000)
        .bind(&lid)
        .execute(app.store.pool())
        .await
        .unwrap();
    let expired = validate(&app, json!({"license_key": key, "device_id": "gw-1"})).await;
    assert_eq!(
        (
            expired["valid"].as_bool(),
            expired["code"].as_str(),
            expired["status"].as_str()
        ),
        (Some(false), Some("EXPIRED"), Some("expired"))
    );
    assert_eq!(
        app.get("/licenses?status=expired", k)
            .await
            .expect(200)
            .json["meta"]["total"],
        1
    );
    assert_eq!(
        app.get("/licenses?status=active", k).await.expect(200).json["meta"]["total"],
        0
    );
    let refused = device(&app, "/licenses/activate", activation(&key, "gw-2", "fp"))
        .await
        .expect(409);
    assert_eq!(refused.code(), "license_expired");
    // Renewing an expired subscription counts from now.
    let back = app
        .post(&format!("/licenses/{lid}/renew"), k, json!({"days": 1}))
        .await
        .expect(200);
    assert_eq!(back.json["data"]["status"], "active");
    assert_eq!(
        validate(&app, json!({"license_key": key})).await["code"],
        "VALID"
    );

    // Revocation is final.
    let gone = app
        .post(&format!("/licenses/{lid}/revoke"), k, json!({}))
        .await
        .expect(200);
    assert_eq!(gone.json["data"]["status"], "revoked");
    assert_eq!(
        validate(&app, json!({"license_key": key})).await["code"],
        "REVOKED"
    );
    assert_eq!(
        device(&app, "/licenses/activate", activation(&key, "gw-1", "fp"))
            .await
            .expect(409)
            .code(),
        "license_revoked"
    );
    app.post(&format!("/licenses/{lid}/revoke"), k, json!({}))
        .await
        .expect(409);
    app.post(&format!("/licenses/{lid}/reinstate"), k, json!({}))
        .await
        .expect(409);
    app.post(&format!("/licenses/{lid}/renew"), k, json!({}))
        .await
        .expect(409);

    // A perpetual license has no expiry and is not renewed.
    let perpetual = product(&app, k, "HUB-P", "perpetual").await;
    let pl = license(
        &app,
        k,
        json!({"product_id": perpetual["id"], "customer_email": "ops@plant.example"}),
    )
    .await;
    assert!(pl["expires_at"].is_null());
    assert_eq!(
        license_key::verify(pl["license_key"].as_str().unwrap(), &public)
            .unwrap()
            .expires_at,
        None
    );
    let plid = pl["id"].as_str().unwrap();
    app.post(&format!("/licenses/{plid}/renew"), k, json!({}))
        .await
        .expect(409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_made_up_and_foreign_keys() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let p = product(&app, k, "HUB", "perpetual").await;
    let l = license(
        &app,
        k,
        json!({"product_id": p["id"], "customer_email": "ops@plant.example"}),
    )
    .await;
    let key = l["license_key"].as_str().unwrap().to_string();
    let lid = l["id"].as_str().unwrap().to_string();
    let public = public_key(&app, k).await;

    let tampered = tamper(&key);
    assert!(
        license_key::verify(&tampered, &public).is_err(),
        "the offline check fails"
    );
    assert_eq!(
        validate(&app, json!({"license_key": tampered})).await["code"],
        "NOT_FOUND"
    );
    assert_eq!(
        device(
            &app,
            "/licenses/activate",
            activation(&tampered, "gw", "fp")
        )
        .await
        .expect(404)
        .code(),
        "not_found"
    );

    // A well-formed key signed by a key pair that is not the organization's, naming a real
    // license: no license of this server.
    let forger = LicenseSigner::generate();
    let forged = forger
        .sign(&LicenseClaims {
            license_id: lid.parse().unwrap(),
            product_id: p["id"].as_str().unwrap().parse().unwrap(),
            expires_at: None,
            features: vec!["mqtt".into(), "opcua".into(), "modbus".into(), "ml".into()],
        })
        .unwrap();
    assert_eq!(
        validate(&app, json!({"license_key": forged})).await["code"],
        "NOT_FOUND"
    );
    let made_up = forger
        .sign(&LicenseClaims {
            license_id: uuid::Uuid::now_v7(),
            product_id: uuid::Uuid::now_v7(),
            expires_at: None,
            features: vec![],
        })
        .unwrap();
    let v = validate(&app, json!({"license_key": made_up})).await;
    assert_eq!(
        (v["valid"].as_bool(), v["code"].as_str()),
        (Some(false), Some("NOT_FOUND"))
    );
    assert!(v["license_id"].is_null());
    let junk = validate(&app, json!({"license_key": "hello"})).await;
    assert_eq!(junk["code"], "INVALID_KEY");
    let bad = device(&app, "/licenses/activate", activation("hello", "gw", "fp"))
        .await
        .expect(400);
    assert_eq!(bad.json["error"]["details"][0]["field"], "license_key");
    device(&app, "/licenses/validate", json!({"license_key": ""}))
        .await
        .expect(400);
    device(&app, "/licenses/activate", json!({"license_key": key}))
        .await
        .expect(400);

    // Tenancy: another organization cannot see or manage this license, nor deactivate its
    // activations by id; its own key pair differs; its device calls see only its licenses.
    let (_, other) = app.other_org("Other Co", Tier::Professional).await;
    for path in [
        format!("/licenses/{lid}"),
        format!("/licenses/{lid}/activations"),
    ] {
        app.get(&path, &other).await.expect(404);
    }
    for action in ["suspend", "reinstate", "revoke", "renew"] {
        app.post(&format!("/licenses/{lid}/{action}"), &other, json!({}))
            .await
            .expect(404);
    }
    let a = device(&app, "/licenses/activate", activation(&key, "gw", "fp"))
        .await
        .expect(201);
    app.post(
        &format!("/licenses/{lid}/deactivate"),
        &other,
        json!({"activation_id": a.json["data"]["activation_id"]}),
    )
    .await
    .expect(404);
    assert_eq!(
        app.get("/licenses", &other).await.expect(200).json["meta"]["total"],
        0
    );
    assert_ne!(public_key(&app, &other).await, public);
    let op = product(&app, &other, "HUB", "perpetual").await;
    let ol = license(
        &app,
        &other,
        json!({"product_id": op["id"], "customer_email": "x@other.example"}),
    )
    .await;
    let other_key = ol["license_key"].as_str().unwrap();
    assert!(
        license_key::verify(other_key, &public).is_err(),
        "signed with the other organization's key"
    );
    // A device of the other organization cannot free this organization's activation.
    device(
        &app,
        "/licenses/deactivate",
        json!({"license_key": other_key, "activation_id": a.json["data"]["activation_id"]}),
    )
    .await
    .expect(404);
    assert_eq!(
        app.get(&format!("/licenses/{lid}"), k)
            .await
            .expect(200)
            .json["data"]["current_activations"],
        1
    );
    // Its records stay in its organization.
    device(
        &app,
        "/licenses/validate",
        json!({"license_key": other_key}),
    )
    .await
    .expect(200);
    let mine = app
        .get("/audit/logs?event_types=license.validate&per_page=100", k)
        .await
        .expect(200);
    assert!(
        mine.json["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["resource_id"] != ol["id"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_activations_take_exactly_the_free_slots() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let p = product(&app, k, "HUB", "perpetual").await;
    let l = license(
        &app,
        k,
        json!({"product_id": p["id"], "max_activations": 3, "customer_email": "ops@plant.example"}),
    )
    .await;
    let key = l["license_key"].as_str().unwrap().to_string();
    let calls = (0..40).map(|i| {
        let client = plantd_test_support::client();
        let url = format!("{}/licenses/activate", app.base);
        let body = activation(&key, &format!("gw-{i}"), "fp");
        async move {
            client
                .post(url)
                .json(&body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    });
    let statuses = futures_join(calls).await;
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        3,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        37,
        "{statuses:?}"
    );
    let lid = l["id"].as_str().unwrap();
    assert_eq!(
        app.get(&format!("/licenses/{lid}"), k)
            .await
            .expect(200)
            .json["data"]["current_activations"],
        3
    );
    assert_eq!(
        app.get(&format!("/licenses/{lid}/activations"), k)
            .await
            .expect(200)
            .json["data"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

/// Runs the futures at once, each on its own task.
async fn futures_join<F>(futures: impl Iterator<Item = F>) -> Vec<u16>
where
    F: std::future::Future<Output = u16> + Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_license_key_has_its_own_limit() {
    let app = spawn_app_with(AppConfig {
        license_key_per_minute: 3,
        ..AppConfig::default()
    })
    .await;
    let k = app.admin_key.as_str();
    let p = product(&app, k, "HUB", "perpetual").await;
    let l = license(
        &app,
        k,
        json!({"product_id": p["id"], "customer_email": "ops@plant.example"}),
    )
    .await;
    let key = l["license_key"].as_str().unwrap();
    for _ in 0..3 {
        validate(&app, json!({"license_key": key})).await;
    }
    let refused = device(&app, "/licenses/validate", json!({"license_key": key}))
        .await
        .expect(429);
    assert_eq!(refused.code(), "rate_limited");
    assert!(refused.header("retry-after").is_some());
    // Another license's key is counted apart.
    let l2 = license(
        &app,
        k,
        json!({"product_id": p["id"], "customer_email": "ops@plant.example"}),
    )
    .await;
    validate(&app, json!({"license_key": l2["license_key"]})).await;
}

/// The offline check from the command line, as an integrator would run it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_verifies_keys_offline() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let p = product(&app, k, "HUB", "subscription").await;
    let l = license(
        &app,
        k,
        json!({"product_id": p["id"], "validity_days": 30, "customer_email": "ops@plant.example"}),
    )
    .await;
    let key = l["license_key"].as_str().unwrap();
    let dir = plantd_test_support::temp_dir("license-verify");
    let pem_file = dir.join("plantd-license.pem");
    let pem = public_key_pem(&app, k).await;
    std::fs::write(&pem_file, pem).unwrap();
    let run = |key: String| {
        std::process::Command::new(env!("CARGO_BIN_EXE_plantd"))
            .args(["license", "verify", &key, "--public-key"])
            .arg(&pem_file)
            .output()
            .unwrap()
    };
    let ok = run(key.to_string());
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(stdout.contains(l["id"].as_str().unwrap()), "{stdout}");
    assert!(stdout.contains("mqtt, opcua, modbus"), "{stdout}");
    let bad = run(tamper(key));
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("signature does not verify"));
}

/// An independent check: python's `cryptography` verifies a key's Ed25519 signature with the
/// published PEM and reads the payload. Needs `PLANTD_TEST_PYTHON_CRYPTOGRAPHY` (set by
/// `.ci/run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_cryptography_verifies_keys() {
    let Some(python) = plantd_test_support::peer(
        "PLANTD_TEST_PYTHON_CRYPTOGRAPHY",
        "to a python3 with the cryptography package",
    ) else {
        return;
    };
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let p = product(&app, k, "HUB", "subscription").await;
    let l = license(
        &app,
        k,
        json!({"product_id": p["id"], "validity_days": 30, "customer_email": "ops@plant.example"}),
    )
    .await;
    let key = l["license_key"].as_str().unwrap();
    let pem = public_key_pem(&app, k).await;
    let expires = plantd_model::Timestamp::parse(l["expires_at"].as_str().unwrap())
        .unwrap()
        .unix_seconds();
    let stdout = plantd_test_support::run_interop(
        &python,
        "license_check.py",
        &[
            &pem,
            key,
            l["id"].as_str().unwrap(),
            p["id"].as_str().unwrap(),
            &expires.to_string(),
            &tamper(key),
        ],
    )
    .await;
    plantd_test_support::printed_every(&stdout, &["signature", "payload", "tampered_rejected"]);
}
