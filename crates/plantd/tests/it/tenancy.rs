//! Organization A can neither read, change nor detect organization B's data sources, keys,
//! members or audit records.

use plantd_model::Tier;
use plantd_test_support::spawn_app;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn organizations_are_invisible_to_each_other() {
    let app = spawn_app().await;
    let a = app.admin_key.clone();
    let (_b_org, b) = app.other_org("B Corp", Tier::Professional).await;

    let ds = app
        .post(
            "/data-sources",
            &b,
            json!({"name": "B PLC", "type": "modbus", "config": {"host": "plc-b.invalid"}}),
        )
        .await
        .expect(201);
    let ds_id = ds.id();
    let key = app
        .post(
            "/api-keys",
            &b,
            json!({"name": "b key", "scopes": ["read:assets"]}),
        )
        .await
        .expect(201);
    let key_id = key.id();
    let invited = app
        .post(
            "/organizations/current/members/invite",
            &b,
            json!({"email": "bob@b.example"}),
        )
        .await
        .expect(201);
    let member_id = invited.id();
    let b_logs = app.get("/audit/logs", &b).await.expect(200);
    let audit_id = b_logs.json["data"][0]["id"].as_str().unwrap().to_string();

    // Reading B's ids from A looks exactly like reading ids that do not exist.
    let missing = app
        .get("/data-sources/00000000-0000-7000-8000-000000000000", &a)
        .await
        .expect(404);
    for path in [
        format!("/data-sources/{ds_id}"),
        format!("/api-keys/{key_id}/usage"),
        format!("/audit/logs/{audit_id}"),
    ] {
        let r = app.get(&path, &a).await.expect(404);
        assert_eq!(r.code(), "not_found", "{path}");
        assert_eq!(r.json["error"]["details"], missing.json["error"]["details"]);
    }
    // Lists and searches of A show nothing of B (checked before A's own attempts below put
    // the ids it typed into A's audit trail).
    let lists = [
        "/data-sources",
        "/api-keys",
        "/organizations/current/members",
        "/audit/logs?per_page=100",
        "/audit/logs?search=B%20PLC",
    ];
    for path in lists {
        let r = app.get(path, &a).await.expect(200);
        for secret in [
            &ds_id,
            &key_id,
            &member_id,
            &audit_id,
            &"bob@b.example".to_string(),
            &"B PLC".to_string(),
        ] {
            assert!(!r.text.contains(secret.as_str()), "{path} leaks {secret}");
        }
    }
    // Changing them fails the same way, and changes nothing.
    app.put(
        &format!("/data-sources/{ds_id}"),
        &a,
        json!({"name": "stolen"}),
    )
    .await
    .expect(404);
    app.delete(&format!("/data-sources/{ds_id}"), &a)
        .await
        .expect(404);
    app.post(&format!("/data-sources/{ds_id}/test"), &a, json!({}))
        .await
        .expect(404);
    app.delete(&format!("/api-keys/{key_id}"), &a)
        .await
        .expect(404);
    app.post(&format!("/api-keys/{key_id}/rotate"), &a, json!({}))
        .await
        .expect(404);
    app.delete(&format!("/organizations/current/members/{member_id}"), &a)
        .await
        .expect(404);
    assert_eq!(
        app.get(&format!("/data-sources/{ds_id}"), &b)
            .await
            .expect(200)
            .json["data"]["name"],
        "B PLC"
    );
    app.get("/data-sources", key.json["data"]["key"].as_str().unwrap())
        .await
        .expect(200);
    let b_members = app
        .get("/organizations/current/members", &b)
        .await
        .expect(200);
    assert!(b_members.text.contains("bob@b.example"));

    app.post(
        "/data-sources",
        &a,
        json!({"name": "B PLC", "type": "modbus", "config": {"host": "plc-b.invalid"}}),
    )
    .await
    .expect(201);
    let summary = app.get("/audit/summary", &a).await.expect(200);
    assert!(!summary.text.contains("member.invite"), "{}", summary.text);
    let org = app.get("/organizations/current", &a).await.expect(200);
    assert_eq!(org.json["data"]["id"], app.org_id.as_str());
}
