//! ML datasets (issue 30): CSV uploads streamed, typed and refused line by line with nothing
//! kept; the preview; labels with exact counts under relabeling, import and export; versions
//! made, compared and rolled back; validation on a file with known violations and the quality
//! profile; a dataset from telemetry; tenancy, scopes and the preview's rate limit; and
//! DuckDB reading the same file as an independent check.

use plantd_model::{Scope, Tier};
use plantd_test_support::{TestApp, spawn_app};
use reqwest::Method;
use serde_json::{Value, json};

/// Sends a multipart form with `file` (and text fields) to `path`.
pub(crate) async fn form(
    app: &TestApp,
    key: &str,
    path: &str,
    file: Option<&str>,
    fields: &[(&str, &str)],
) -> (u16, Value) {
    let mut form = reqwest::multipart::Form::new();
    for (k, v) in fields {
        form = form.text(k.to_string(), v.to_string());
    }
    if let Some(text) = file {
        form = form.part(
            "file",
            reqwest::multipart::Part::bytes(text.as_bytes().to_vec()).file_name("rows.csv"),
        );
    }
    let r = app
        .client
        .post(format!("{}{path}", app.base))
        .bearer_auth(key)
        .multipart(form)
        .send()
        .await
        .expect("form sent");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn dataset(app: &TestApp, name: &str) -> String {
    app.post("/ml/datasets", &app.admin_key, json!({"name": name}))
        .await
        .expect(201)
        .id()
}

async fn upload(app: &TestApp, id: &str, csv: &str, mode: &str) -> (u16, Value) {
    form(
        app,
        &app.admin_key,
        &format!("/ml/datasets/{id}/upload?mode={mode}"),
        Some(csv),
        &[],
    )
    .await
}

const PUMPS: &str = "temp,pressure,running,when,site\n\
20.5,1.2,true,2026-01-01T00:00:00Z,\"North, hall 1\"\n\
21.0,,false,2026-01-01T00:01:00Z,South\n\
19.5,1.4,TRUE,2026-01-01T00:02:00Z,\"say \"\"hi\"\"\"\n";

#[tokio::test]
async fn uploads_are_typed_previewed_and_refused_whole() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let id = dataset(&app, "Pumps").await;
    let (s, body) = upload(&app, &id, PUMPS, "append").await;
    assert_eq!(s, 200, "{body}");
    let d = &body["data"];
    assert_eq!(d["row_count"], 3);
    assert_eq!(
        d["columns"],
        json!([{"name": "temp", "type": "number"}, {"name": "pressure", "type": "number"},
               {"name": "running", "type": "boolean"}, {"name": "when", "type": "timestamp"},
               {"name": "site", "type": "string"}])
    );
    assert_eq!(d["file_size_bytes"], PUMPS.len());
    assert!(d["size_bytes"].as_u64().unwrap() > 0);
    assert_eq!(d["current_version"], Value::Null);
    assert_eq!(d["source"], json!({"type": "upload"}));
    // The preview pages like every list.
    let p = app
        .get(&format!("/ml/datasets/{id}/preview?page=2&per_page=2"), &k)
        .await
        .expect(200);
    assert_eq!(
        p.json["meta"],
        json!({"page": 2, "per_page": 2, "total": 3})
    );
    assert_eq!(p.json["data"]["columns"][0]["name"], "temp");
    let row = &p.json["data"]["rows"][0];
    assert_eq!(row["row_id"], 3);
    assert_eq!(
        row["values"],
        json!({"temp": 19.5, "pressure": 1.4, "running": true, "when": "2026-01-01T00:02:00Z", "site": "say \"hi\""})
    );
    let first = app
        .get(&format!("/ml/datasets/{id}/preview"), &k)
        .await
        .expect(200);
    assert_eq!(
        first.json["data"]["rows"][1]["values"]["pressure"],
        Value::Null
    );
    assert_eq!(
        first.json["data"]["rows"][0]["values"]["site"],
        "North, hall 1"
    );

    // A file with bad lines stores nothing and names each line.
    let bad = "temp,pressure,running,when,site\n1,2,true,2026-01-01T00:00:00Z,a\nhot,2,true,,b\n3,2,maybe,,c\n4,2\n";
    let (s, body) = upload(&app, &id, bad, "append").await;
    assert_eq!(s, 400, "{body}");
    let msgs: Vec<&str> = body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["message"].as_str().unwrap())
        .collect();
    assert_eq!(msgs[0], "line 3: column 'temp': 'hot' is not a number");
    assert_eq!(
        msgs[1],
        "line 4: column 'running': 'maybe' is not true or false"
    );
    assert_eq!(msgs[2], "line 5: 2 fields where the header has 5");
    assert!(msgs[3].starts_with("3 lines"), "{msgs:?}");
    let d = app.get(&format!("/ml/datasets/{id}"), &k).await.expect(200);
    assert_eq!(d.json["data"]["row_count"], 3);
    // Another header, no rows, no file, another field, not a form.
    let (s, body) = upload(&app, &id, "temp,site\n1,a\n", "append").await;
    assert_eq!(
        (s, body["error"]["details"][0]["field"].as_str()),
        (400, Some("file"))
    );
    assert!(
        body["error"]["details"][0]["message"]
            .as_str()
            .unwrap()
            .contains("temp,pressure,running,when,site")
    );
    let (s, _) = upload(&app, &id, "temp,pressure,running,when,site\n", "append").await;
    assert_eq!(s, 400);
    let (s, _) = form(&app, &k, &format!("/ml/datasets/{id}/upload"), None, &[]).await;
    assert_eq!(s, 400);
    let (s, _) = form(
        &app,
        &k,
        &format!("/ml/datasets/{id}/upload"),
        Some(PUMPS),
        &[("x", "1")],
    )
    .await;
    assert_eq!(s, 400);
    app.post(&format!("/ml/datasets/{id}/upload"), &k, json!({}))
        .await
        .expect(400);
    let (s, _) = upload(&app, &id, PUMPS, "sideways").await;
    assert_eq!(s, 400);
    // Append continues the row ids; replace starts again at 1.
    let (s, body) = upload(&app, &id, PUMPS, "append").await;
    assert_eq!((s, body["data"]["row_count"].as_u64()), (200, Some(6)));
    let p = app
        .get(&format!("/ml/datasets/{id}/preview?page=2&per_page=5"), &k)
        .await
        .expect(200);
    assert_eq!(p.json["data"]["rows"][0]["row_id"], 6);
    let one = "temp,pressure,running,when,site\n7,7,false,,x\n";
    let (s, body) = upload(&app, &id, one, "replace").await;
    assert_eq!((s, body["data"]["row_count"].as_u64()), (200, Some(1)));
    let p = app
        .get(&format!("/ml/datasets/{id}/preview"), &k)
        .await
        .expect(200);
    assert_eq!(p.json["data"]["rows"][0]["row_id"], 1);
    assert_eq!(p.json["data"]["rows"][0]["values"]["temp"], 7.0);

    // Declared columns bind the uploads; names are unique; bad records are refused by field.
    let declared = app
        .post(
            "/ml/datasets",
            &k,
            json!({"name": "Declared", "columns": [{"name": "a", "type": "string"}, {"name": "b", "type": "number"}]}),
        )
        .await
        .expect(201);
    let (s, body) = upload(&app, &declared.id(), "a,b\n12,x\n", "append").await;
    assert_eq!(s, 400, "{body}");
    let (s, body) = upload(&app, &declared.id(), "a,b\n12,3\n", "append").await;
    assert_eq!(
        (s, body["data"]["columns"][0]["type"].as_str()),
        (200, Some("string"))
    );
    let conflict = app
        .post("/ml/datasets", &k, json!({"name": "Pumps"}))
        .await
        .expect(409);
    assert_eq!(conflict.code(), "conflict");
    for (body, field) in [
        (json!({"name": ""}), "name"),
        (json!({"name": "x", "columns": []}), "columns"),
        (
            json!({"name": "x", "columns": [{"name": "a", "type": "number"}, {"name": "a", "type": "number"}]}),
            "columns[1].name",
        ),
        (
            json!({"name": "x", "columns": [{"name": "a", "type": "decimal"}]}),
            "columns[0].type",
        ),
        (json!({"name": "x", "extra": 1}), "extra"),
    ] {
        let r = app.post("/ml/datasets", &k, body.clone()).await.expect(400);
        let fields: Vec<&str> = r.json["error"]["details"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["field"].as_str().unwrap())
            .collect();
        assert!(
            fields.iter().any(|f| f.ends_with(field)),
            "{body}: {fields:?}"
        );
    }
    let list = app.get("/ml/datasets", &k).await.expect(200);
    assert_eq!(list.json["meta"]["total"], 2);
    app.get("/ml/datasets/nope", &k).await.expect(404);
}

async fn classes(app: &TestApp, id: &str) -> Vec<(String, u64)> {
    app.get(&format!("/ml/datasets/{id}/label-classes"), &app.admin_key)
        .await
        .expect(200)
        .json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn labels_keep_exact_counts_and_round_trip() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let id = dataset(&app, "Vibration").await;
    let mut csv = String::from("x\n");
    for i in 0..10 {
        csv.push_str(&format!("{i}\n"));
    }
    assert_eq!(upload(&app, &id, &csv, "append").await.0, 200);
    let normal = app
        .post(
            &format!("/ml/datasets/{id}/label-classes"),
            &k,
            json!({"name": "normal", "color": "#22AA44", "description": "healthy"}),
        )
        .await
        .expect(201);
    assert_eq!(normal.json["data"]["color"], "#22aa44");
    let fault = app
        .post(
            &format!("/ml/datasets/{id}/label-classes"),
            &k,
            json!({"name": "fault"}),
        )
        .await
        .expect(201);
    assert_eq!(fault.json["data"]["color"], "#1f77b4");
    let dup = app
        .post(
            &format!("/ml/datasets/{id}/label-classes"),
            &k,
            json!({"name": "fault"}),
        )
        .await
        .expect(400);
    assert_eq!(dup.json["error"]["details"][0]["field"], "name");
    let bad = app
        .post(
            &format!("/ml/datasets/{id}/label-classes"),
            &k,
            json!({"name": "x", "color": "red"}),
        )
        .await
        .expect(400);
    assert_eq!(bad.json["error"]["details"][0]["field"], "color");
    let (n, f) = (normal.id(), fault.id());
    let label = |row: u64, class: &str| {
        let (app, k, id, class) = (&app, k.clone(), id.clone(), class.to_string());
        async move {
            app.post(
                &format!("/ml/datasets/{id}/rows/{row}/label"),
                &k,
                json!({"label_class_id": class}),
            )
            .await
        }
    };
    for row in 1..=6 {
        label(row, &n).await.expect(200);
    }
    // Relabeling moves the count; labeling again with the same class changes nothing.
    label(2, &f).await.expect(200);
    label(2, &f).await.expect(200);
    let r = label(3, &f).await.expect(200);
    assert_eq!(
        r.json["data"],
        json!({"row_id": 3, "label_class_id": f, "skipped": false, "flagged": false})
    );
    assert_eq!(
        classes(&app, &id).await,
        [("normal".to_string(), 4), ("fault".to_string(), 2)]
    );
    let skipped = app
        .post(&format!("/ml/datasets/{id}/rows/4/skip"), &k, json!({}))
        .await
        .expect(200);
    assert_eq!(skipped.json["data"]["label_class_id"], Value::Null);
    assert_eq!(skipped.json["data"]["skipped"], true);
    let flagged = app
        .post(
            &format!("/ml/datasets/{id}/rows/5/flag"),
            &k,
            json!({"flagged": true}),
        )
        .await
        .expect(200);
    assert_eq!(flagged.json["data"]["label_class_id"], n.as_str());
    app.delete(&format!("/ml/datasets/{id}/rows/6/label"), &k)
        .await
        .expect(200);
    assert_eq!(
        classes(&app, &id).await,
        [("normal".to_string(), 2), ("fault".to_string(), 2)]
    );
    let d = app.get(&format!("/ml/datasets/{id}"), &k).await.expect(200);
    assert_eq!(
        d.json["data"]["labels"],
        json!({"labeled": 4, "skipped": 1, "flagged": 1})
    );
    let p = app
        .get(&format!("/ml/datasets/{id}/preview?per_page=5"), &k)
        .await
        .expect(200);
    assert_eq!(p.json["data"]["rows"][4]["flagged"], true);
    assert_eq!(p.json["data"]["rows"][3]["skipped"], true);
    // Refusals.
    label(11, &n).await.expect(404);
    label(0, &n).await.expect(404);
    app.post(
        &format!("/ml/datasets/{id}/rows/abc/label"),
        &k,
        json!({"label_class_id": n}),
    )
    .await
    .expect(404);
    let r = label(1, "nope").await.expect(400);
    assert_eq!(r.json["error"]["details"][0]["field"], "label_class_id");
    let other = dataset(&app, "Other").await;
    let theirs = app
        .post(
            &format!("/ml/datasets/{other}/label-classes"),
            &k,
            json!({"name": "theirs"}),
        )
        .await
        .expect(201);
    label(1, &theirs.id()).await.expect(400);
    app.post(
        &format!("/ml/datasets/{id}/rows/1/flag"),
        &k,
        json!({"flagged": "yes"}),
    )
    .await
    .expect(400);

    // Export, then import: CSV and JSON, all or nothing.
    let csv_out = app
        .call(
            Method::GET,
            &format!("/ml/datasets/{id}/labels/export?format=csv"),
            Some(&k),
            None,
        )
        .await
        .expect(200);
    assert!(
        csv_out
            .header("content-type")
            .unwrap()
            .starts_with("text/csv")
    );
    assert_eq!(
        csv_out.text,
        format!("row_id,label\n1,normal\n2,fault\n3,fault\n5,normal\n")
    );
    let json_out = app
        .call(
            Method::GET,
            &format!("/ml/datasets/{id}/labels/export?format=json"),
            Some(&k),
            None,
        )
        .await
        .expect(200);
    assert_eq!(
        json_out.json,
        json!([{"row_id": 1, "label": "normal"}, {"row_id": 2, "label": "fault"}, {"row_id": 3, "label": "fault"}, {"row_id": 5, "label": "normal"}])
    );
    let (s, body) = form(
        &app,
        &k,
        &format!("/ml/datasets/{id}/labels/import"),
        Some("row_id,label\n7,fault\n99,fault\n8,unknown\n7,normal\n"),
        &[],
    )
    .await;
    assert_eq!(s, 400, "{body}");
    let msgs: Vec<&str> = body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["message"].as_str().unwrap())
        .collect();
    assert!(msgs[0].starts_with("line 3: row_id \"99\""), "{msgs:?}");
    assert_eq!(
        msgs[1],
        "line 4: 'unknown' is not a label class of the dataset"
    );
    assert_eq!(msgs[2], "line 5: row 7 is labelled twice");
    assert_eq!(
        classes(&app, &id).await,
        [("normal".to_string(), 2), ("fault".to_string(), 2)]
    );
    let (s, body) = form(
        &app,
        &k,
        &format!("/ml/datasets/{id}/labels/import"),
        Some("row_id,label\n7,fault\n8,fault\n1,\n"),
        &[],
    )
    .await;
    assert_eq!(
        (s, body["data"].clone()),
        (200, json!({"imported": 2, "cleared": 1}))
    );
    assert_eq!(
        classes(&app, &id).await,
        [("normal".to_string(), 1), ("fault".to_string(), 4)]
    );
    let (s, body) = form(
        &app,
        &k,
        &format!("/ml/datasets/{id}/labels/import"),
        Some(&json_out.text),
        &[],
    )
    .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        classes(&app, &id).await,
        [("normal".to_string(), 2), ("fault".to_string(), 4)]
    );
    let (s, _) = form(
        &app,
        &k,
        &format!("/ml/datasets/{id}/labels/import"),
        Some("row,label\n1,fault\n"),
        &[],
    )
    .await;
    assert_eq!(s, 400);
    let (s, _) = form(
        &app,
        &k,
        &format!("/ml/datasets/{id}/labels/import"),
        Some("[{\"row_id\": \"x\"}]"),
        &[],
    )
    .await;
    assert_eq!(s, 400);
    // A label that is not a class name is refused, not taken for a clear.
    let (s, body) = form(
        &app,
        &k,
        &format!("/ml/datasets/{id}/labels/import"),
        Some("[{\"row_id\": 1, \"label\": 5}]"),
        &[],
    )
    .await;
    assert_eq!(s, 400, "{body}");
    assert_eq!(
        body["error"]["details"][0]["message"],
        "[0]: label 5 is not a class name (a string) or null"
    );
    assert_eq!(
        classes(&app, &id).await,
        [("normal".to_string(), 2), ("fault".to_string(), 4)]
    );
}

#[tokio::test]
async fn versions_compare_and_roll_back_without_copying() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let id = dataset(&app, "Line 3").await;
    let mut csv = String::from("a,b\n");
    for i in 0..5000 {
        csv.push_str(&format!("{i},{}\n", i % 7));
    }
    assert_eq!(upload(&app, &id, &csv, "append").await.0, 200);
    let class = app
        .post(
            &format!("/ml/datasets/{id}/label-classes"),
            &k,
            json!({"name": "ok"}),
        )
        .await
        .expect(201)
        .id();
    app.post(
        &format!("/ml/datasets/{id}/rows/10/label"),
        &k,
        json!({"label_class_id": class}),
    )
    .await
    .expect(200);
    let (s, v1) = form(
        &app,
        &k,
        &format!("/ml/datasets/{id}/versions"),
        None,
        &[("notes", "first cut")],
    )
    .await;
    assert_eq!(s, 201, "{v1}");
    assert_eq!(v1["data"]["version"], "1.0");
    assert_eq!(v1["data"]["row_count"], 5000);
    assert_eq!(v1["data"]["label_count"], 1);
    assert_eq!(v1["data"]["notes"], "first cut");
    assert_eq!(v1["data"]["file_size_bytes"], csv.len());
    // Labels only: a minor version.
    app.post(
        &format!("/ml/datasets/{id}/rows/11/label"),
        &k,
        json!({"label_class_id": class}),
    )
    .await
    .expect(200);
    // No body at all: a version without notes.
    let v = app
        .call(
            Method::POST,
            &format!("/ml/datasets/{id}/versions"),
            Some(&k),
            None,
        )
        .await
        .expect(201)
        .json;
    assert_eq!(v["data"]["version"], "1.1");
    assert_eq!(v["data"]["notes"], "");
    // New rows: a major one.
    assert_eq!(upload(&app, &id, "a,b\n1,1\n2,2\n", "append").await.0, 200);
    let (_, v) = form(
        &app,
        &k,
        &format!("/ml/datasets/{id}/versions"),
        None,
        &[("notes", "")],
    )
    .await;
    assert_eq!(v["data"]["version"], "2.0");
    let cmp = app
        .get(
            &format!("/ml/datasets/{id}/versions/compare?v1=1.0&v2=2.0"),
            &k,
        )
        .await
        .expect(200);
    let c = &cmp.json["data"];
    assert_eq!(
        (
            c["rows_added"].as_u64(),
            c["rows_removed"].as_u64(),
            c["rows_changed"].as_u64(),
            c["labels_changed"].as_u64()
        ),
        (Some(2), Some(0), Some(0), Some(1))
    );
    assert_eq!(c["columns"][0]["before"]["count"], 5000);
    assert_eq!(c["columns"][0]["after"]["count"], 5002);
    // A new file as a version: replaces; row 3 changes, the rest is the same, labels dropped.
    let mut changed = csv.clone();
    changed = changed.replacen("\n2,2\n", "\n2,99\n", 1);
    let (s, v) = form(
        &app,
        &k,
        &format!("/ml/datasets/{id}/versions"),
        Some(&changed),
        &[("notes", "fixed")],
    )
    .await;
    assert_eq!(
        (s, v["data"]["version"].as_str()),
        (201, Some("3.0")),
        "{v}"
    );
    let cmp = app
        .get(
            &format!("/ml/datasets/{id}/versions/compare?v1=1.0&v2=3.0"),
            &k,
        )
        .await
        .expect(200);
    let c = &cmp.json["data"];
    assert_eq!(
        (
            c["rows_added"].as_u64(),
            c["rows_removed"].as_u64(),
            c["rows_changed"].as_u64(),
            c["labels_changed"].as_u64()
        ),
        (Some(0), Some(0), Some(1), Some(1))
    );
    assert_eq!(c["columns"][1]["after"]["max"], 99.0);
    // Roll back to 1.0: its rows and labels, every version kept.
    let d = app
        .post(
            &format!("/ml/datasets/{id}/versions/1.0/rollback"),
            &k,
            json!({}),
        )
        .await
        .expect(200);
    assert_eq!(d.json["data"]["row_count"], 5000);
    assert_eq!(d.json["data"]["labels"]["labeled"], 1);
    let cmp = app
        .get(
            &format!("/ml/datasets/{id}/versions/compare?v1=1.0&v2=working"),
            &k,
        )
        .await
        .expect(200);
    assert_eq!(
        (
            cmp.json["data"]["rows_changed"].as_u64(),
            cmp.json["data"]["labels_changed"].as_u64()
        ),
        (Some(0), Some(0))
    );
    let p = app
        .get(&format!("/ml/datasets/{id}/preview?page=1&per_page=3"), &k)
        .await
        .expect(200);
    assert_eq!(p.json["data"]["rows"][2]["values"]["b"], 2.0);
    let (_, v) = form(
        &app,
        &k,
        &format!("/ml/datasets/{id}/versions"),
        None,
        &[("notes", "back")],
    )
    .await;
    assert_eq!(v["data"]["version"], "4.0");
    let old = app
        .get(
            &format!("/ml/datasets/{id}/preview?version=3.0&per_page=3"),
            &k,
        )
        .await
        .expect(200);
    assert_eq!(old.json["data"]["rows"][2]["values"]["b"], 99.0);
    assert_eq!(old.json["meta"]["total"], 5000);
    let list = app
        .get(&format!("/ml/datasets/{id}/versions"), &k)
        .await
        .expect(200);
    let names: Vec<&str> = list.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["4.0", "3.0", "2.0", "1.1", "1.0"]);
    app.get(&format!("/ml/datasets/{id}/versions/1.1"), &k)
        .await
        .expect(200);
    app.get(&format!("/ml/datasets/{id}/versions/9.9"), &k)
        .await
        .expect(404);
    app.post(
        &format!("/ml/datasets/{id}/versions/9.9/rollback"),
        &k,
        json!({}),
    )
    .await
    .expect(404);
    let bad = app
        .get(
            &format!("/ml/datasets/{id}/versions/compare?v1=1.0&v2=9.9"),
            &k,
        )
        .await
        .expect(400);
    assert_eq!(bad.json["error"]["details"][0]["field"], "v2");
    app.get(&format!("/ml/datasets/{id}/versions/compare?v1=1.0"), &k)
        .await
        .expect(400);
    let d = app.get(&format!("/ml/datasets/{id}"), &k).await.expect(200);
    assert_eq!(d.json["data"]["current_version"], "4.0");
}

#[tokio::test]
async fn validation_finds_the_known_violations_and_profiles_columns() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let id = dataset(&app, "Quality").await;
    let mut csv = String::from("temp,state,code\n");
    for i in 1..=200u32 {
        let temp = match i {
            17 | 150 => "130".to_string(),
            40 => String::new(),
            _ => format!("{}", 20 + i % 10),
        };
        let state = if i == 99 {
            "broken"
        } else if i % 2 == 0 {
            "run"
        } else {
            "idle"
        };
        let code = if i == 120 {
            "X-1".to_string()
        } else {
            format!("A{}", i % 150)
        };
        csv.push_str(&format!("{temp},{state},{code}\n"));
    }
    assert_eq!(upload(&app, &id, &csv, "append").await.0, 200);
    let rule = |body: Value| {
        let (app, k, id) = (&app, k.clone(), id.clone());
        async move {
            app.post(&format!("/ml/datasets/{id}/validation-rules"), &k, body)
                .await
        }
    };
    rule(json!({"name": "Temperature", "rule_type": "range", "column": "temp", "config": {"min": 0, "max": 100}})).await.expect(201);
    rule(json!({"name": "Temp present", "rule_type": "not_null", "column": "temp"}))
        .await
        .expect(201);
    rule(json!({"name": "States", "rule_type": "allowed_values", "column": "state", "config": {"values": ["run", "idle"]}})).await.expect(201);
    rule(json!({"name": "Codes", "rule_type": "regex", "column": "code", "config": {"pattern": "^A[0-9]+$"}})).await.expect(201);
    rule(json!({"name": "Unique codes", "rule_type": "unique", "column": "code"}))
        .await
        .expect(201);
    for (body, field) in [
        (
            json!({"name": "x", "rule_type": "range", "column": "nope", "config": {"min": 0}}),
            "column",
        ),
        (
            json!({"name": "x", "rule_type": "range", "column": "temp", "config": {"min": 5, "max": 1}}),
            "config.max",
        ),
        (
            json!({"name": "x", "rule_type": "range", "column": "state", "config": {"min": 5}}),
            "column",
        ),
        (
            json!({"name": "x", "rule_type": "regex", "column": "code", "config": {"pattern": "(["}}),
            "config.pattern",
        ),
        (
            json!({"name": "x", "rule_type": "median", "column": "code"}),
            "rule_type",
        ),
    ] {
        let r = rule(body.clone()).await.expect(400);
        assert_eq!(r.json["error"]["details"][0]["field"], field, "{body}");
    }
    let listed = app
        .get(&format!("/ml/datasets/{id}/validation-rules"), &k)
        .await
        .expect(200);
    assert_eq!(listed.json["data"].as_array().unwrap().len(), 5);
    let v = app
        .post(&format!("/ml/datasets/{id}/validate"), &k, json!({}))
        .await
        .expect(200);
    let r = &v.json["data"];
    let issues: Vec<(String, u64, Value)> = r["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["rule_name"].as_str().unwrap().to_string(),
                i["violations"].as_u64().unwrap(),
                i["rows"].clone(),
            )
        })
        .collect();
    // Rows 151..200 repeat the codes of rows 1..50.
    let repeats: Vec<u64> = (151..=200).collect();
    assert_eq!(
        issues,
        [
            ("Temperature".to_string(), 2, json!([17, 150])),
            ("Temp present".to_string(), 1, json!([40])),
            ("States".to_string(), 1, json!([99])),
            ("Codes".to_string(), 1, json!([120])),
            ("Unique codes".to_string(), 50, json!(repeats)),
        ]
    );
    assert_eq!(r["issues"][4]["rows_truncated"], false);
    assert_eq!(r["valid"], false);
    // 55 of 200 rows violate a rule: 72.5, grade C.
    assert_eq!(r["quality_score"], 72.5);
    assert_eq!(r["grade"], "C");
    let q = app
        .get(&format!("/ml/datasets/{id}/quality"), &k)
        .await
        .expect(200);
    let temp = &q.json["data"]["columns"][0];
    assert_eq!(
        (
            temp["count"].as_u64(),
            temp["nulls"].as_u64(),
            temp["distinct"].as_u64()
        ),
        (Some(199), Some(1), Some(11))
    );
    assert_eq!(
        (temp["min"].as_f64(), temp["max"].as_f64()),
        (Some(20.0), Some(130.0))
    );
    assert_eq!(temp["histogram"].as_array().unwrap().len(), 10);
    let state = &q.json["data"]["columns"][1];
    assert_eq!(
        state["top_values"][0],
        json!({"value": "run", "count": 100})
    );
    assert_eq!(
        state["top_values"][1],
        json!({"value": "idle", "count": 99})
    );
    assert_eq!(state["distinct"], 3);
    assert_eq!(q.json["data"]["last_validation"]["grade"], "C");
}

#[tokio::test]
async fn a_dataset_from_telemetry_has_a_row_per_bucket() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let start = plantd_model::Timestamp::now().millis() / 60_000 * 60_000 - 10 * 60_000;
    let mut data = Vec::new();
    for m in 0..10 {
        for s in [0, 30] {
            let t =
                plantd_model::Timestamp::from_millis(start + m * 60_000 + s * 1000).to_rfc3339();
            data.push(json!({"asset_id": "P1", "tag_name": "flow", "value": m as f64 + s as f64 / 60.0, "timestamp": t}));
            if m % 2 == 0 {
                data.push(
                    json!({"asset_id": "P2", "tag_name": "flow", "value": 100.0, "timestamp": t}),
                );
            }
        }
    }
    app.post("/telemetry", &k, json!({"data": data}))
        .await
        .expect(200);
    let q = json!({"name": "From the plant", "telemetry": {
        "asset_ids": ["P1", "P2"], "tags": ["flow"],
        "start": plantd_model::Timestamp::from_millis(start).to_rfc3339(),
        "end": plantd_model::Timestamp::from_millis(start + 10 * 60_000).to_rfc3339(),
        "interval": "1m"}});
    let d = app.post("/ml/datasets", &k, q).await.expect(201);
    let id = d.id();
    assert_eq!(d.json["data"]["row_count"], 10);
    assert_eq!(
        d.json["data"]["columns"],
        json!([{"name": "timestamp", "type": "timestamp"}, {"name": "P1/flow", "type": "number"}, {"name": "P2/flow", "type": "number"}])
    );
    assert_eq!(d.json["data"]["source"]["type"], "telemetry");
    let p = app
        .get(&format!("/ml/datasets/{id}/preview?per_page=2"), &k)
        .await
        .expect(200);
    let rows = &p.json["data"]["rows"];
    assert_eq!(rows[0]["values"]["P1/flow"], 0.25);
    assert_eq!(rows[0]["values"]["P2/flow"], 100.0);
    assert_eq!(rows[1]["values"]["P1/flow"], 1.25);
    assert_eq!(rows[1]["values"]["P2/flow"], Value::Null);
    assert_eq!(
        rows[0]["values"]["timestamp"],
        plantd_model::Timestamp::from_millis(start).to_rfc3339()
    );
    let (s, body) = upload(&app, &id, "timestamp,P1/flow,P2/flow\n", "append").await;
    assert_eq!(
        (s, body["error"]["code"].as_str()),
        (409, Some("dataset_from_telemetry"))
    );
    for (t, field) in [
        (
            json!({"asset_ids": [], "tags": ["x"], "start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z", "interval": "1m"}),
            "telemetry.asset_ids",
        ),
        (
            json!({"asset_ids": ["P1"], "tags": ["x"], "start": "2026-01-02T00:00:00Z", "end": "2026-01-01T00:00:00Z", "interval": "1m"}),
            "telemetry.end",
        ),
        (
            json!({"asset_ids": ["P1"], "tags": ["x"], "start": "2000-01-01T00:00:00Z", "end": "2026-01-01T00:00:00Z", "interval": "1m"}),
            "telemetry.interval",
        ),
        (
            json!({"asset_ids": ["P9"], "tags": ["x"], "start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z", "interval": "1h"}),
            "telemetry",
        ),
    ] {
        let r = app
            .post("/ml/datasets", &k, json!({"name": "t", "telemetry": t}))
            .await
            .expect(400);
        assert_eq!(r.json["error"]["details"][0]["field"], field);
    }
    assert_eq!(
        app.get("/ml/datasets", &k).await.expect(200).json["meta"]["total"],
        1
    );
}

#[tokio::test]
async fn tenancy_scopes_and_the_preview_limit() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let id = dataset(&app, "Mine").await;
    assert_eq!(upload(&app, &id, "a\n1\n2\n", "append").await.0, 200);
    let class = app
        .post(
            &format!("/ml/datasets/{id}/label-classes"),
            &k,
            json!({"name": "c"}),
        )
        .await
        .expect(201)
        .id();
    form(
        &app,
        &k,
        &format!("/ml/datasets/{id}/versions"),
        None,
        &[("notes", "v")],
    )
    .await;
    let (_, other) = app.other_org("Other ML", Tier::Enterprise).await;
    // Another organization's dataset behaves as a missing one on every route.
    for (m, path, body) in [
        (Method::GET, format!("/ml/datasets/{id}"), None),
        (Method::GET, format!("/ml/datasets/{id}/preview"), None),
        (
            Method::GET,
            format!("/ml/datasets/{id}/label-classes"),
            None,
        ),
        (
            Method::POST,
            format!("/ml/datasets/{id}/label-classes"),
            Some(json!({"name": "x"})),
        ),
        (
            Method::POST,
            format!("/ml/datasets/{id}/rows/1/label"),
            Some(json!({"label_class_id": class})),
        ),
        (
            Method::DELETE,
            format!("/ml/datasets/{id}/rows/1/label"),
            None,
        ),
        (
            Method::POST,
            format!("/ml/datasets/{id}/rows/1/skip"),
            Some(json!({})),
        ),
        (
            Method::POST,
            format!("/ml/datasets/{id}/rows/1/flag"),
            Some(json!({"flagged": true})),
        ),
        (
            Method::GET,
            format!("/ml/datasets/{id}/labels/export"),
            None,
        ),
        (Method::GET, format!("/ml/datasets/{id}/versions"), None),
        (Method::GET, format!("/ml/datasets/{id}/versions/1.0"), None),
        (
            Method::GET,
            format!("/ml/datasets/{id}/versions/compare?v1=1.0&v2=1.0"),
            None,
        ),
        (
            Method::POST,
            format!("/ml/datasets/{id}/versions/1.0/rollback"),
            Some(json!({})),
        ),
        (
            Method::GET,
            format!("/ml/datasets/{id}/validation-rules"),
            None,
        ),
        (
            Method::POST,
            format!("/ml/datasets/{id}/validation-rules"),
            Some(json!({"name": "x", "rule_type": "not_null", "column": "a"})),
        ),
        (
            Method::POST,
            format!("/ml/datasets/{id}/validate"),
            Some(json!({})),
        ),
        (Method::GET, format!("/ml/datasets/{id}/quality"), None),
    ] {
        app.call(m.clone(), &path, Some(&other), body)
            .await
            .expect(404);
    }
    for path in ["upload", "labels/import", "versions"] {
        let (s, _) = form(
            &app,
            &other,
            &format!("/ml/datasets/{id}/{path}"),
            Some("a\n1\n"),
            &[],
        )
        .await;
        assert_eq!(s, 404, "{path}");
    }
    assert_eq!(
        app.get("/ml/datasets", &other).await.expect(200).json["meta"]["total"],
        0
    );
    // read:assets reads, write:assets changes.
    let reader = app.key(&[Scope::ReadAssets]).await;
    app.get(&format!("/ml/datasets/{id}/quality"), &reader)
        .await
        .expect(200);
    app.post("/ml/datasets", &reader, json!({"name": "x"}))
        .await
        .expect(403);
    app.post(
        &format!("/ml/datasets/{id}/rows/1/label"),
        &reader,
        json!({"label_class_id": class}),
    )
    .await
    .expect(403);
    let (s, _) = form(
        &app,
        &reader,
        &format!("/ml/datasets/{id}/upload"),
        Some("a\n1\n"),
        &[],
    )
    .await;
    assert_eq!(s, 403);
    let telemetry_only = app.key(&[Scope::ReadTelemetry]).await;
    app.get("/ml/datasets", &telemetry_only).await.expect(403);
    // The preview: 60 a minute.
    for _ in 0..60 {
        app.get(&format!("/ml/datasets/{id}/preview"), &reader)
            .await
            .expect(200);
    }
    let limited = app
        .get(&format!("/ml/datasets/{id}/preview"), &reader)
        .await
        .expect(429);
    assert_eq!(limited.code(), "rate_limited");
    app.get(&format!("/ml/datasets/{id}"), &reader)
        .await
        .expect(200);
}

/// An independent check: DuckDB (python) reads the same 20,000-row CSV that is uploaded through
/// the API; plantd's inferred types, quality profile (count, nulls, distinct exactly; min/max;
/// mean and std within 1e-9), preview pages and range/not_null violations must match its own
/// reading. Needs `PLANTD_TEST_PYTHON_DUCKDB` (set by `.ci/run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duckdb_reads_the_same_file_as_plantd() {
    let Some(python) = plantd_test_support::peer(
        "PLANTD_TEST_PYTHON_DUCKDB",
        "to a python3 with duckdb and requests",
    ) else {
        return;
    };
    let app = spawn_app().await;
    let stdout = plantd_test_support::run_interop(
        &python,
        "ml_dataset_duckdb.py",
        &[&app.base, &app.admin_key],
    )
    .await;
    plantd_test_support::printed_every(
        &stdout,
        &[
            "uploaded",
            "inferred types",
            "quality temperature counts",
            "quality temperature mean std",
            "quality pressure histogram",
            "quality site top values",
            "quality measured_at min max",
            "preview first page",
            "preview across a chunk boundary",
            "preview last page",
            "validate range temperature",
            "validate range pressure",
            "validate not_null temperature",
            "validate planted rows",
            "validate quality score",
            "all checks",
        ],
    );
}
