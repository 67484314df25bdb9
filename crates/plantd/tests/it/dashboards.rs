//! Dashboards: the seven operations and export/import, validation that names the field, scopes,
//! and tenancy.

use plantd_model::{Scope, Tier};
use plantd_test_support::spawn_app;
use serde_json::{Value, json};

fn pump_layout(data_source_id: &str) -> Value {
    json!({
        "columns": 12,
        "variables": [{"name": "asset", "label": "Pump", "type": "asset", "default": "Pump_01", "options": ["Pump_01", "Pump_02"]}],
        "widgets": [
            {"id": "vib", "type": "line_chart", "title": "Vibration", "x": 0, "y": 0, "w": 8, "h": 4,
             "query": {"data_source_id": data_source_id, "asset_id": "$asset", "tags": ["Vibration_X", "Vibration_Y"], "aggregation": "max", "range": "24h"},
             "options": {"unit": "mm/s", "decimals": 2, "min": 0.0, "max": 20.0,
                         "thresholds": [{"value": 4.5, "color": "warning"}, {"value": 7.1, "color": "critical"}]}},
            {"id": "temp", "type": "gauge", "title": "Bearing", "x": 8, "y": 0, "w": 4, "h": 4,
             "query": {"asset_id": "$asset", "tags": ["Bearing_Temperature"]}, "options": {"min": 0.0, "max": 120.0}},
            {"id": "alerts", "type": "alert_list", "title": "Open alerts", "x": 0, "y": 4, "w": 6, "h": 3},
            {"id": "note", "type": "text", "title": "", "x": 6, "y": 4, "w": 6, "h": 3, "text": "Shift 2: seal replaced"}
        ]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_duplicate_export_and_import() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let ds = app
        .post("/data-sources", k, json!({"name": "PLC", "type": "modbus", "enabled": false, "config": {"host": "plc.invalid"}}))
        .await
        .expect(201);
    let ds_id = ds.id();
    let created = app
        .post(
            "/dashboards",
            k,
            json!({"name": "Pump station", "description": "Pumps 1 and 2", "layout": pump_layout(&ds_id)}),
        )
        .await
        .expect(201);
    let d = created.json["data"].clone();
    let id = d["id"].as_str().unwrap().to_string();
    assert_eq!(d["name"], "Pump station");
    assert_eq!(
        d["layout"],
        pump_layout(&ds_id),
        "the layout reads back as sent"
    );
    assert_eq!(
        app.get(&format!("/dashboards/{id}"), k)
            .await
            .expect(200)
            .json["data"],
        d
    );

    // A dashboard with only a name gets an empty 12-column grid.
    let bare = app
        .post("/dashboards", k, json!({"name": "Empty"}))
        .await
        .expect(201);
    assert_eq!(
        bare.json["data"]["layout"],
        json!({"columns": 12, "widgets": []})
    );
    assert_eq!(bare.json["data"]["description"], "");

    let list = app.get("/dashboards", k).await.expect(200);
    assert_eq!(list.json["meta"]["total"], 2);
    let names: Vec<&str> = list.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Empty", "Pump station"], "listed by name");

    // Partial update: the name alone keeps the layout; a layout replaces it whole.
    let renamed = app
        .put(&format!("/dashboards/{id}"), k, json!({"name": "Pumps"}))
        .await
        .expect(200);
    assert_eq!(renamed.json["data"]["name"], "Pumps");
    assert_eq!(renamed.json["data"]["layout"], pump_layout(&ds_id));
    let one_widget = json!({"columns": 6, "widgets": [{"id": "t", "type": "text", "title": "", "x": 0, "y": 0, "w": 6, "h": 1, "text": "hello"}]});
    let relaid = app
        .put(
            &format!("/dashboards/{id}"),
            k,
            json!({"layout": one_widget}),
        )
        .await
        .expect(200);
    assert_eq!(relaid.json["data"]["layout"], one_widget);
    app.put(
        &format!("/dashboards/{id}"),
        k,
        json!({"layout": pump_layout(&ds_id)}),
    )
    .await
    .expect(200);

    let copy = app
        .post(&format!("/dashboards/{id}/duplicate"), k, json!({}))
        .await
        .expect(201);
    assert_eq!(copy.json["data"]["name"], "Pumps (copy)");
    assert_ne!(copy.json["data"]["id"], json!(id));
    assert_eq!(copy.json["data"]["layout"], pump_layout(&ds_id));

    let export = app
        .get(&format!("/dashboards/{id}/export"), k)
        .await
        .expect(200);
    assert_eq!(
        export.header("content-disposition"),
        Some("attachment; filename=\"Pumps.json\"")
    );
    assert_eq!(export.json["format"], "plantd.dashboard/1");
    assert_eq!(export.json["layout"], pump_layout(&ds_id));
    let imported = app
        .post("/dashboards/import", k, export.json.clone())
        .await
        .expect(201);
    assert_eq!(imported.json["data"]["name"], "Pumps");
    assert_eq!(imported.json["data"]["layout"], pump_layout(&ds_id));
    let mut wrong = export.json.clone();
    wrong["format"] = json!("grafana");
    let r = app.post("/dashboards/import", k, wrong).await.expect(400);
    assert_eq!(r.json["error"]["details"][0]["field"], "format");

    app.delete(&format!("/dashboards/{id}"), k)
        .await
        .expect(204);
    app.get(&format!("/dashboards/{id}"), k).await.expect(404);
    app.delete(&format!("/dashboards/{id}"), k)
        .await
        .expect(404);
    app.post(&format!("/dashboards/{id}/duplicate"), k, json!({}))
        .await
        .expect(404);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_names_the_field() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let widget = |query: Value| {
        json!({"name": "D", "layout": {"widgets": [
            {"id": "a", "type": "text", "x": 0, "y": 0, "w": 1, "h": 1, "text": "x"},
            {"id": "b", "type": "text", "x": 0, "y": 1, "w": 1, "h": 1, "text": "x"},
            {"id": "c", "type": "line_chart", "x": 0, "y": 2, "w": 6, "h": 3, "query": query}
        ]}})
    };
    for (body, field) in [
        (json!({"name": ""}), "name"),
        (
            json!({"name": "D", "layout": {"columns": 0}}),
            "layout.columns",
        ),
        (
            widget(json!({"asset_id": "Pump_01", "tags": ["Vibration,X"]})),
            "layout.widgets[2].query.tags[0]",
        ),
        (
            widget(json!({"asset_id": "Pump_01", "tags": []})),
            "layout.widgets[2].query.tags",
        ),
        (
            widget(json!({"tags": ["Vibration_X"]})),
            "layout.widgets[2].query.asset_id",
        ),
        (
            widget(json!({"asset_id": "$pump", "tags": ["Vibration_X"]})),
            "layout.widgets[2].query.asset_id",
        ),
        (
            widget(json!({"asset_id": "Pump_01", "tags": ["T"], "range": "2w"})),
            "layout.widgets[2].query.range",
        ),
        (
            widget(
                json!({"asset_id": "Pump_01", "tags": ["T"], "data_source_id": "no-such-source"}),
            ),
            "layout.widgets[2].query.data_source_id",
        ),
        (
            widget(json!({"asset_id": "Pump_01", "tags": ["T"], "aggregation": "median"})),
            "layout.widgets[2].query.aggregation",
        ),
        (
            json!({"name": "D", "layout": {"widgets": [{"id": "a", "type": "pie", "x": 0, "y": 0, "w": 1, "h": 1}]}}),
            "layout.widgets[0].type",
        ),
        (
            json!({"name": "D", "layout": {"columns": 4, "widgets": [{"id": "a", "type": "text", "x": 2, "y": 0, "w": 3, "h": 1, "text": "x"}]}}),
            "layout.widgets[0].x",
        ),
    ] {
        let r = app.post("/dashboards", k, body.clone()).await.expect(400);
        assert_eq!(r.code(), "validation_error");
        assert_eq!(
            r.json["error"]["details"][0]["field"], field,
            "{body}: {}",
            r.text
        );
    }
    assert_eq!(
        app.get("/dashboards", k).await.expect(200).json["meta"]["total"],
        0,
        "nothing refused was stored"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_and_tenancy() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let id = app
        .post("/dashboards", k, json!({"name": "Motor"}))
        .await
        .expect(201)
        .id();
    let reader = app.key(&[Scope::ReadAssets]).await;
    app.get(&format!("/dashboards/{id}"), &reader)
        .await
        .expect(200);
    app.get(&format!("/dashboards/{id}/export"), &reader)
        .await
        .expect(200);
    let r = app
        .post("/dashboards", &reader, json!({"name": "x"}))
        .await
        .expect(403);
    assert_eq!(r.code(), "authorization_error");
    app.put(&format!("/dashboards/{id}"), &reader, json!({"name": "x"}))
        .await
        .expect(403);
    app.delete(&format!("/dashboards/{id}"), &reader)
        .await
        .expect(403);
    let telemetry_only = app.key(&[Scope::ReadTelemetry]).await;
    app.get("/dashboards", &telemetry_only).await.expect(403);

    // Another organization's dashboard behaves as a missing one, for every operation.
    let (_, other) = app.other_org("Other plant", Tier::Professional).await;
    assert_eq!(
        app.get("/dashboards", &other).await.expect(200).json["meta"]["total"],
        0
    );
    for reply in [
        app.get(&format!("/dashboards/{id}"), &other).await,
        app.get(&format!("/dashboards/{id}/export"), &other).await,
        app.put(
            &format!("/dashboards/{id}"),
            &other,
            json!({"name": "mine"}),
        )
        .await,
        app.post(&format!("/dashboards/{id}/duplicate"), &other, json!({}))
            .await,
        app.delete(&format!("/dashboards/{id}"), &other).await,
    ] {
        assert_eq!(reply.code(), "not_found", "{}", reply.text);
    }
    // Nor may a widget point at another organization's data source.
    let their_ds = app
        .post("/data-sources", &other, json!({"name": "Theirs", "type": "modbus", "enabled": false, "config": {"host": "plc.invalid"}}))
        .await
        .expect(201)
        .id();
    let r = app
        .put(
            &format!("/dashboards/{id}"),
            k,
            json!({"layout": {"widgets": [{"id": "s", "type": "stat", "x": 0, "y": 0, "w": 2, "h": 2,
                "query": {"data_source_id": their_ds, "asset_id": "Pump_01", "tags": ["T"]}}]}}),
        )
        .await
        .expect(400);
    assert_eq!(
        r.json["error"]["details"][0]["field"],
        "layout.widgets[0].query.data_source_id"
    );
    assert_eq!(
        app.get(&format!("/dashboards/{id}"), k)
            .await
            .expect(200)
            .json["data"]["name"],
        "Motor"
    );
    app.stop().await;
}
