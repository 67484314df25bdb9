//! Organization settings, members, the key's user, and the audit trail with its filters, summary
//! and export.

use plantd_model::Scope;
use plantd_test_support::spawn_app;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn organization_and_members() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let org = app.get("/organizations/current", k).await.expect(200);
    assert_eq!(org.json["data"]["tier"], "enterprise");
    let mut body = org.json["data"].clone();
    body["name"] = json!("Acme Plant");
    assert_eq!(
        app.put("/organizations/current", k, body)
            .await
            .expect(200)
            .json["data"]["name"],
        "Acme Plant"
    );
    let r = app
        .put("/organizations/current", k, json!({"tier": "trial"}))
        .await
        .expect(400);
    assert_eq!(r.json["error"]["details"][0]["field"], "tier");
    assert_eq!(
        app.put(
            "/organizations/current",
            &app.key(&[Scope::WriteAssets]).await,
            json!({"name": "x"})
        )
        .await
        .expect(403)
        .code(),
        "authorization_error"
    );

    let members = app
        .get("/organizations/current/members", k)
        .await
        .expect(200);
    assert_eq!(members.json["meta"]["total"], 1);
    let owner_id = members.json["data"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(members.json["data"][0]["role"], "owner");

    let invited = app
        .post(
            "/organizations/current/members/invite",
            k,
            json!({"email": "Eve@Example.com", "role": "admin"}),
        )
        .await
        .expect(201);
    assert_eq!(invited.json["data"]["email"], "eve@example.com");
    assert_eq!(invited.json["data"]["status"], "invited");
    assert_eq!(invited.json["data"]["role"], "admin");
    let eve = invited.id();
    assert_eq!(
        app.post(
            "/organizations/current/members/invite",
            k,
            json!({"email": "eve@example.com"})
        )
        .await
        .expect(409)
        .code(),
        "conflict"
    );
    for bad in [
        json!({"email": "not-an-email"}),
        json!({"email": "a@b.c", "role": "king"}),
        json!({}),
    ] {
        assert_eq!(
            app.post("/organizations/current/members/invite", k, bad)
                .await
                .expect(400)
                .code(),
            "validation_error"
        );
    }
    assert_eq!(
        app.get("/organizations/current/members?per_page=1&page=2", k)
            .await
            .expect(200)
            .json["data"][0]["id"],
        eve.as_str()
    );
    assert_eq!(
        app.delete(&format!("/organizations/current/members/{owner_id}"), k)
            .await
            .expect(409)
            .code(),
        "conflict"
    );
    app.delete(&format!("/organizations/current/members/{eve}"), k)
        .await
        .expect(204);
    app.delete(&format!("/organizations/current/members/{eve}"), k)
        .await
        .expect(404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keys_user_profile_and_password() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let me = app.get("/users/me", k).await.expect(200);
    assert_eq!(me.json["data"]["email"], "owner@example.com");
    assert_eq!(me.json["data"]["role"], "owner");
    let mut body = me.json["data"].clone();
    body["name"] = json!("Olga Owner");
    assert_eq!(
        app.put("/users/me", k, body).await.expect(200).json["data"]["name"],
        "Olga Owner"
    );
    assert_eq!(
        app.put("/users/me", k, json!({"email": "x@y.z"}))
            .await
            .expect(400)
            .json["error"]["details"][0]["field"],
        "email"
    );

    let r = app
        .post(
            "/users/me/password",
            k,
            json!({"current_password": "wrong-password", "new_password": "new-password-1"}),
        )
        .await
        .expect(400);
    assert_eq!(r.json["error"]["details"][0]["field"], "current_password");
    let r = app
        .post(
            "/users/me/password",
            k,
            json!({"new_password": "new-password-1"}),
        )
        .await
        .expect(400);
    assert_eq!(r.json["error"]["details"][0]["field"], "current_password");
    let r = app
        .post(
            "/users/me/password",
            k,
            json!({"current_password": "station-7-valve", "new_password": "short"}),
        )
        .await
        .expect(400);
    assert_eq!(r.json["error"]["details"][0]["field"], "new_password");
    app.post(
        "/users/me/password",
        k,
        json!({"current_password": "station-7-valve", "new_password": "new-password-1"}),
    )
    .await
    .expect(204);
    let user_id = me.json["data"]["id"].as_str().unwrap();
    let stored = app.store.password_hash(user_id).await.unwrap().unwrap();
    assert!(
        stored.starts_with("$argon2id$"),
        "passwords are Argon2id hashes"
    );
    assert!(plantd_auth::verify_password("new-password-1", &stored));

    // A key made for the organization by a key without a user has no "me".
    let org_key = plantd_auth::generate_key();
    app.store
        .create_api_key(plantd_store::NewApiKey {
            org_id: &app.org_id,
            user_id: None,
            name: "service",
            scopes: &[Scope::ReadAssets],
            expires_at: None,
            prefix: &org_key.display_prefix,
            key_hash: &org_key.hash,
        })
        .await
        .unwrap();
    assert_eq!(
        app.get("/users/me", &org_key.secret)
            .await
            .expect(404)
            .code(),
        "not_found"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mutation_is_audited_and_searchable() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let reader = app.key(&[Scope::ReadAssets]).await;
    let ds = app
        .post(
            "/data-sources",
            k,
            json!({"name": "Audited PLC", "type": "modbus", "config": {"host": "plc.invalid"}}),
        )
        .await
        .expect(201);
    let ds_id = ds.id();
    app.post("/data-sources", k, json!({"name": ""}))
        .await
        .expect(400);
    app.post(
        "/data-sources",
        &reader,
        json!({"name": "x", "type": "modbus", "config": {"host": "h"}}),
    )
    .await
    .expect(403);
    app.call(
        reqwest::Method::DELETE,
        &format!("/data-sources/{ds_id}"),
        None,
        None,
    )
    .await
    .expect(401);
    app.delete(&format!("/data-sources/{ds_id}"), k)
        .await
        .expect(204);
    app.get("/data-sources", k).await.expect(200);

    let logs = app
        .get("/audit/logs?categories=data_sources&per_page=100", k)
        .await
        .expect(200);
    let rows = logs.json["data"].as_array().unwrap();
    let seen: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r["event_type"].as_str().unwrap(),
                r["status_code"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("data_source.delete", 204),
            ("data_source.create", 403),
            ("data_source.create", 400),
            ("data_source.create", 201)
        ],
        "newest first, refused ones included, reads not audited, the anonymous attempt not in the organization's trail"
    );
    let created = &rows[3];
    assert_eq!(created["resource_id"], ds_id.as_str());
    assert_eq!(created["outcome"], "success");
    assert_eq!(created["severity"], "info");
    assert_eq!(created["actor_type"], "api_key");
    assert_eq!(created["client_ip"], "127.0.0.1");
    assert!(created["user_id"].is_string());
    assert_eq!(rows[1]["severity"], "critical");
    assert_eq!(rows[1]["error_code"], "authorization_error");
    assert_eq!(rows[2]["severity"], "warning");
    assert_eq!(rows[0]["resource_id"], ds_id.as_str());

    let one = app
        .get(
            &format!("/audit/logs/{}", created["id"].as_str().unwrap()),
            k,
        )
        .await
        .expect(200);
    assert_eq!(one.json["data"], *created);
    assert_eq!(
        app.get("/audit/logs/nope", k).await.expect(404).code(),
        "not_found"
    );

    let q = |s: &str| format!("/audit/logs?{s}");
    let total = |r: plantd_test_support::Reply| r.json["meta"]["total"].as_u64().unwrap();
    assert_eq!(
        total(app.get(&q("severities=critical"), k).await.expect(200)),
        1
    );
    assert_eq!(
        total(
            app.get(&q("severities=warning,critical&categories=data_sources"), k)
                .await
                .expect(200)
        ),
        2
    );
    assert_eq!(
        total(
            app.get(&q("event_types=data_source.delete"), k)
                .await
                .expect(200)
        ),
        1
    );
    assert_eq!(
        total(
            app.get(&q("resource_type=data_source"), k)
                .await
                .expect(200)
        ),
        4
    );
    assert_eq!(
        total(
            app.get(&q(&format!("search={}", &ds_id[..13])), k)
                .await
                .expect(200)
        ),
        2
    );
    assert_eq!(
        total(
            app.get(&q("search=AUTHORIZATION_ERROR"), k)
                .await
                .expect(200)
        ),
        1
    );
    assert_eq!(
        total(app.get(&q("search=100%25"), k).await.expect(200)),
        0,
        "LIKE wildcards are literal"
    );
    let user_id = created["user_id"].as_str().unwrap();
    // Both keys act for the owner (operator-made keys act for the first owner).
    assert_eq!(
        total(
            app.get(&q(&format!("user_id={user_id}&categories=data_sources")), k)
                .await
                .expect(200)
        ),
        4
    );
    assert_eq!(
        total(app.get(&q("user_id=someone-else"), k).await.expect(200)),
        0
    );
    assert_eq!(
        total(
            app.get(&q("start_time=2099-01-01T00:00:00Z"), k)
                .await
                .expect(200)
        ),
        0
    );
    assert_eq!(
        total(
            app.get(&q("end_time=2000-01-01T00:00:00Z"), k)
                .await
                .expect(200)
        ),
        0
    );
    for bad in [
        "severities=loud",
        "start_time=yesterday",
        "start_time=2026-02-01T00:00:00Z&end_time=2026-01-01T00:00:00Z",
    ] {
        assert_eq!(
            app.get(&q(bad), k).await.expect(400).code(),
            "validation_error",
            "{bad}"
        );
    }

    let summary = app
        .get("/audit/summary?categories=data_sources", k)
        .await
        .expect(200);
    assert_eq!(summary.json["data"]["total"], 4);
    assert_eq!(
        summary.json["data"]["by_severity"],
        json!({"critical": 1, "info": 2, "warning": 1})
    );
    assert_eq!(
        summary.json["data"]["by_outcome"],
        json!({"failure": 2, "success": 2})
    );
    assert_eq!(
        summary.json["data"]["top_event_types"][0],
        json!({"event_type": "data_source.create", "count": 3})
    );

    let csv = app
        .client
        .post(format!("{}/audit/export", app.base))
        .bearer_auth(k)
        .json(&json!({"format": "csv"}))
        .send()
        .await
        .unwrap();
    assert_eq!(csv.status(), 200);
    assert!(
        csv.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    assert!(
        csv.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .contains("attachment")
    );
    let text = csv.text().await.unwrap();
    assert!(text.starts_with("id,timestamp,actor_type"));
    assert!(text.contains("data_source.create") && text.contains(&ds_id));
    let json_export = app
        .post(
            "/audit/export",
            k,
            json!({"format": "json", "start_time": "2000-01-01T00:00:00Z"}),
        )
        .await
        .expect(200);
    let records = json_export.json.as_array().unwrap();
    assert!(
        records
            .iter()
            .any(|r| r["event_type"] == "data_source.delete")
    );
    assert!(
        records
            .windows(2)
            .all(|w| w[0]["timestamp"].as_str() <= w[1]["timestamp"].as_str()),
        "oldest first"
    );
    assert_eq!(
        app.post("/audit/export", k, json!({"format": "xml"}))
            .await
            .expect(400)
            .json["error"]["details"][0]["field"],
        "format"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_with_an_unstorable_id_is_still_audited() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    app.delete("/data-sources/a%00b", k).await.expect(404);
    let logs = app
        .get("/audit/logs?event_types=data_source.delete", k)
        .await
        .expect(200);
    assert_eq!(logs.json["meta"]["total"], 1, "{}", logs.text);
    assert_eq!(logs.json["data"][0]["resource_id"], "a\u{FFFD}b");
    assert_eq!(logs.json["data"][0]["status_code"], 404);
}
