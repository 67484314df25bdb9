//! Data sources: the six operations, validation per type, secrets, conflicts and the network test.

use plantd_test_support::spawn_app;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_with_derived_endpoints_and_conflicts() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let created = app
        .post("/data-sources", k, json!({"name": "Line 1 PLC", "type": "modbus", "config": {"host": "plc-1.invalid", "port": 5020, "unit_id": 7}}))
        .await
        .expect(201);
    let d = &created.json["data"];
    assert_eq!(d["status"], "disconnected");
    assert_eq!(d["tag_count"], 0);
    assert_eq!(d["endpoint"], "modbus://plc-1.invalid:5020/7");
    assert_eq!(d["type"], "modbus");
    let id = d["id"].as_str().unwrap().to_string();
    // The same record, but for what the live connector reports meanwhile.
    let connector_fields = |v: &Value| {
        let mut v = v.clone();
        for f in ["status", "tag_count", "last_error"] {
            v.as_object_mut().unwrap().remove(f);
        }
        v
    };
    assert_eq!(
        connector_fields(
            &app.get(&format!("/data-sources/{id}"), k)
                .await
                .expect(200)
                .json["data"]
        ),
        connector_fields(d)
    );

    let opc = app
        .post("/data-sources", k, json!({"name": "Sim", "type": "opcua", "config": {"endpoint": "opc.tcp://plc.invalid:4840", "username": "op", "password": "s3cret"}}))
        .await
        .expect(201);
    assert_eq!(opc.json["data"]["endpoint"], "opc.tcp://plc.invalid:4840");
    assert!(!opc.text.contains("s3cret"), "passwords are write-only");
    assert_eq!(opc.json["data"]["config"]["password_set"], true);
    assert_eq!(opc.json["data"]["config"]["security_mode"], "None");
    let opc_id = opc.id();
    // A PUT that sends back what GET showed keeps the password.
    let mut config = opc.json["data"]["config"].clone();
    config["root_node"] = json!("ns=2;s=Simulation");
    let updated = app
        .put(
            &format!("/data-sources/{opc_id}"),
            k,
            json!({"config": config}),
        )
        .await
        .expect(200);
    assert_eq!(updated.json["data"]["config"]["password_set"], true);
    assert_eq!(
        updated.json["data"]["config"]["root_node"],
        "ns=2;s=Simulation"
    );

    let mqtt = app
        .post("/data-sources", k, json!({"name": "Broker", "type": "mqtt", "endpoint": "plant broker", "config": {"broker_url": "mqtt://broker.invalid:1883", "topics": ["plant/#"]}}))
        .await
        .expect(201);
    assert_eq!(mqtt.json["data"]["endpoint"], "plant broker");

    // Update: partial, read-only fields accepted, duplicates refused, type change needs config.
    let mut body = d.clone();
    body["name"] = json!("Line 1 PLC (north)");
    let u = app
        .put(&format!("/data-sources/{id}"), k, body)
        .await
        .expect(200);
    assert_eq!(u.json["data"]["name"], "Line 1 PLC (north)");
    assert_eq!(u.json["data"]["config"]["port"], 5020);
    assert_eq!(
        app.put(&format!("/data-sources/{id}"), k, json!({"name": "Sim"}))
            .await
            .expect(409)
            .code(),
        "conflict"
    );
    assert_eq!(
        app.post(
            "/data-sources",
            k,
            json!({"name": "Sim", "type": "modbus", "config": {"host": "h"}})
        )
        .await
        .expect(409)
        .code(),
        "conflict"
    );
    let r = app
        .put(&format!("/data-sources/{id}"), k, json!({"type": "opcua"}))
        .await
        .expect(400);
    assert_eq!(r.json["error"]["details"][0]["field"], "config");
    let r = app
        .put(
            &format!("/data-sources/{id}"),
            k,
            json!({"type": "opcua", "config": {"endpoint": "opc.tcp://plc:4841"}}),
        )
        .await
        .expect(200);
    assert_eq!(r.json["data"]["endpoint"], "opc.tcp://plc:4841");
    assert_eq!(
        app.put(
            &format!("/data-sources/{id}"),
            k,
            json!({"status": "connected", "colour": 1})
        )
        .await
        .expect(400)
        .json["error"]["details"][0]["field"],
        "colour"
    );

    // Filters. (The sources above name hosts that do not resolve, so their live connectors
    // stay disconnected whatever runs on this machine.)
    assert_eq!(
        app.get("/data-sources?type=opcua", k)
            .await
            .expect(200)
            .json["meta"]["total"],
        2
    );
    assert_eq!(
        app.get("/data-sources?status=connected", k)
            .await
            .expect(200)
            .json["meta"]["total"],
        0
    );

    // Delete.
    let before = app.get("/data-sources", k).await.expect(200).json["meta"]["total"]
        .as_u64()
        .unwrap();
    app.delete(&format!("/data-sources/{id}"), k)
        .await
        .expect(204);
    app.get(&format!("/data-sources/{id}"), k).await.expect(404);
    let after = app.get("/data-sources", k).await.expect(200);
    assert_eq!(
        after.json["meta"]["total"].as_u64().unwrap(),
        before - 1,
        "lists forget deleted sources"
    );
    assert!(!after.text.contains(&id));
    app.delete(&format!("/data-sources/{id}"), k)
        .await
        .expect(404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_test_reaches_the_network() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let open_port = listener.local_addr().unwrap().port();
    let closed_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let up = app.post("/data-sources", k, json!({"name": "up", "type": "modbus", "config": {"host": "127.0.0.1", "port": open_port}})).await.expect(201);
    let r = app
        .post(
            &format!(
                "/data-sources/{}/test",
                up.json["data"]["id"].as_str().unwrap()
            ),
            k,
            json!({}),
        )
        .await
        .expect(200);
    assert_eq!(r.json["data"]["success"], true, "{}", r.text);
    assert!(r.json["data"]["latency_ms"].as_f64().unwrap() >= 0.0);

    let down = app
        .post("/data-sources", k, json!({"name": "down", "type": "opcua", "config": {"endpoint": format!("opc.tcp://127.0.0.1:{closed_port}")}}))
        .await
        .expect(201);
    let r = app
        .post(
            &format!(
                "/data-sources/{}/test",
                down.json["data"]["id"].as_str().unwrap()
            ),
            k,
            json!({}),
        )
        .await
        .expect(200);
    assert_eq!(r.json["data"]["success"], false);
    assert!(
        r.json["data"]["message"]
            .as_str()
            .unwrap()
            .contains("connection refused"),
        "{}",
        r.text
    );
    assert!(r.json["data"]["latency_ms"].is_null());

    let nowhere = app
        .post("/data-sources", k, json!({"name": "nowhere", "type": "mqtt", "config": {"broker_url": "mqtt://no-such-host.invalid", "topics": ["a/#"]}}))
        .await
        .expect(201);
    let r = app
        .post(
            &format!(
                "/data-sources/{}/test",
                nowhere.json["data"]["id"].as_str().unwrap()
            ),
            k,
            json!({}),
        )
        .await
        .expect(200);
    assert_eq!(r.json["data"]["success"], false);
    assert!(
        r.json["data"]["message"]
            .as_str()
            .unwrap()
            .contains("could not resolve host"),
        "{}",
        r.text
    );
    drop(listener);
}

/// Two API nodes on one PostgreSQL: a change made through one is seen by the other's cached list
/// (PostgreSQL notifies every node). SQLite has one server per database by design.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_node_sees_changes_at_once_on_postgresql() {
    if std::env::var(plantd_test_support::TEST_DATABASE_ENV).is_err() {
        eprintln!(
            "skipped: set {} to run the two-node test on PostgreSQL",
            plantd_test_support::TEST_DATABASE_ENV
        );
        return;
    }
    let app = spawn_app().await;
    let node_b = plantd_store::Store::connect(&app.database_url)
        .await
        .unwrap();
    let k = app.admin_key.as_str();
    let seen_by_b = |n: usize| {
        let node_b = node_b.clone();
        let org = app.org_id.clone();
        async move {
            // Delivery takes milliseconds; the bound only keeps a broken setup from hanging.
            for _ in 0..200 {
                if node_b.org_data_sources(&org).await.unwrap().len() == n {
                    return true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            false
        }
    };
    assert!(seen_by_b(0).await);
    let created = app
        .post(
            "/data-sources",
            k,
            json!({"name": "n1", "type": "modbus", "config": {"host": "h"}}),
        )
        .await
        .expect(201);
    assert!(seen_by_b(1).await, "node B must see the new data source");
    let id = created.json["data"]["id"].as_str().unwrap();
    app.put(
        &format!("/data-sources/{id}"),
        k,
        json!({"name": "renamed"}),
    )
    .await
    .expect(200);
    let mut renamed = false;
    for _ in 0..200 {
        if node_b.org_data_sources(&app.org_id).await.unwrap()[0].name == "renamed" {
            renamed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(renamed, "node B must see the rename");
    app.delete(&format!("/data-sources/{id}"), k)
        .await
        .expect(204);
    assert!(seen_by_b(0).await, "node B must see the deletion");
}
