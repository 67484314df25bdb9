//! ML training and models (issue 31): jobs run off the request and are cancelled within a
//! second; refusals by field; a model's metrics against the dataset's labels; test one row
//! and a batch; the download scores as the API does; deploy turns live telemetry into a score
//! tag that an alert rule fires on, undeploy stops it; tenancy, scopes and the rate limit.

use plantd_model::{Scope, Tier, Timestamp};
use plantd_test_support::{TestApp, spawn_app, wait_for};
use serde_json::{Value, json};

/// A dataset of `rows` rows of `a,b,c,d,state` where every 50th row is far from the rest and
/// labelled `fault` (the others `normal`, a tenth of them labelled).
async fn planted(app: &TestApp, name: &str, rows: usize) -> String {
    let k = &app.admin_key;
    let id = app
        .post("/ml/datasets", k, json!({"name": name}))
        .await
        .expect(201)
        .id();
    let mut csv = String::from("a,b,c,d,state\n");
    let mut x: u64 = 12345;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((x >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    for i in 0..rows {
        let far = i % 50 == 0;
        let v: Vec<f64> = (0..4)
            .map(|_| if far { 6.0 + next() * 0.5 } else { next() })
            .collect();
        csv.push_str(&format!(
            "{},{},{},{},{}\n",
            v[0],
            v[1],
            v[2],
            v[3],
            if far { "x" } else { "y" }
        ));
    }
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(csv.into_bytes()).file_name("planted.csv"),
    );
    let r = app
        .client
        .post(format!("{}/ml/datasets/{id}/upload", app.base))
        .bearer_auth(k)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let normal = app
        .post(
            &format!("/ml/datasets/{id}/label-classes"),
            k,
            json!({"name": "normal"}),
        )
        .await
        .expect(201)
        .id();
    let fault = app
        .post(
            &format!("/ml/datasets/{id}/label-classes"),
            k,
            json!({"name": "fault"}),
        )
        .await
        .expect(201)
        .id();
    let mut labels = String::from("row_id,label\n");
    for i in 0..rows {
        if i % 50 == 0 {
            labels.push_str(&format!("{},fault\n", i + 1));
        } else if i % 10 == 1 {
            labels.push_str(&format!("{},normal\n", i + 1));
        }
    }
    let _ = (normal, fault);
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(labels.into_bytes()).file_name("labels.csv"),
    );
    let r = app
        .client
        .post(format!("{}/ml/datasets/{id}/labels/import", app.base))
        .bearer_auth(k)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    id
}

async fn finished(app: &TestApp, job: &str) -> Value {
    wait_for("the training job to finish", 60, || async {
        let j = app
            .get(&format!("/ml/training/{job}"), &app.admin_key)
            .await
            .expect(200)
            .json["data"]
            .clone();
        matches!(
            j["status"].as_str(),
            Some("completed" | "failed" | "cancelled")
        )
        .then_some(j)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_trains_a_model_that_finds_the_planted_anomalies() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let ds = planted(&app, "Planted", 5000).await;
    let created = app
        .post(
            "/ml/training",
            &k,
            json!({"name": "Pump model", "dataset_id": ds, "algorithm": "isolation_forest",
                   "hyperparameters": {"n_estimators": 100, "contamination": 0.02, "seed": 7}}),
        )
        .await
        .expect(201);
    assert_eq!(created.json["data"]["status"], "queued");
    assert_eq!(
        created.json["data"]["features"],
        json!(["a", "b", "c", "d"])
    );
    let job = finished(&app, &created.id()).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["progress"], 1.0);
    let m = &job["metrics"];
    assert_eq!(m["rows"], 5000);
    let flagged = m["flagged"].as_u64().unwrap();
    assert!((90..=110).contains(&flagged), "{m}");
    assert!(m["roc_auc"].as_f64().unwrap() > 0.99, "{m}");
    assert_eq!(m["labelled_rows"], 100 + 500);
    assert!(m["recall"].as_f64().unwrap() > 0.95, "{m}");
    assert!(m["precision"].as_f64().unwrap() > 0.9, "{m}");
    assert!(job["duration_seconds"].as_f64().is_some());
    let model_id = job["model_id"].as_str().unwrap().to_string();
    let model = app
        .get(&format!("/ml/models/{model_id}"), &k)
        .await
        .expect(200)
        .json["data"]
        .clone();
    assert_eq!(model["training_job_id"], created.id());
    assert_eq!(model["status"], "ready");
    assert_eq!(model["threshold"], m["threshold"]);
    assert_eq!(
        app.get("/ml/models", &k).await.expect(200).json["meta"]["total"],
        1
    );

    // Test: one row, a batch, refusals naming the feature.
    let far = app
        .post(
            &format!("/ml/models/{model_id}/test"),
            &k,
            json!({"features": {"a": 6.1, "b": 5.9, "c": 6.2, "d": 6.0}}),
        )
        .await
        .expect(200);
    assert_eq!(far.json["data"]["is_anomaly"], true, "{}", far.json);
    let near = app
        .post(
            &format!("/ml/models/{model_id}/test"),
            &k,
            json!({"features": {"a": 0.1, "b": -0.2, "c": 0.0, "d": 0.3}}),
        )
        .await
        .expect(200);
    assert_eq!(near.json["data"]["is_anomaly"], false);
    assert!(
        far.json["data"]["anomaly_score"].as_f64() > near.json["data"]["anomaly_score"].as_f64()
    );
    let batch = app
        .post(&format!("/ml/models/{model_id}/test"), &k,
              json!({"rows": [{"a": 6.1, "b": 5.9, "c": 6.2, "d": 6.0}, {"a": 0.1, "b": -0.2, "c": 0.0, "d": 0.3}]}))
        .await
        .expect(200);
    let results = &batch.json["data"]["results"];
    assert_eq!(
        results[0]["anomaly_score"],
        far.json["data"]["anomaly_score"]
    );
    assert_eq!(results[1]["is_anomaly"], false);
    let missing = app
        .post(
            &format!("/ml/models/{model_id}/test"),
            &k,
            json!({"features": {"a": 1, "b": 1, "c": 1}}),
        )
        .await
        .expect(400);
    assert_eq!(missing.json["error"]["details"][0]["field"], "features.d");
    let unknown = app
        .post(
            &format!("/ml/models/{model_id}/test"),
            &k,
            json!({"features": {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}}),
        )
        .await
        .expect(400);
    assert_eq!(unknown.json["error"]["details"][0]["field"], "features.e");
    app.post(&format!("/ml/models/{model_id}/test"), &k, json!({}))
        .await
        .expect(400);

    // The download scores as the API does.
    let file = app
        .call(
            reqwest::Method::GET,
            &format!("/ml/models/{model_id}/download"),
            Some(&k),
            None,
        )
        .await
        .expect(200);
    assert_eq!(file.json["format"], "plantd-isolation-forest");
    assert_eq!(file.json["format_version"], 1);
    let forest = plantd_ml::forest::Forest::from_json(&file.json).unwrap();
    assert_eq!(forest.trees.len(), 100);
    assert_eq!(
        json!(forest.score_row(&[6.1, 5.9, 6.2, 6.0])),
        far.json["data"]["anomaly_score"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_cancel_tenancy_scopes_and_the_rate_limit() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let ds = planted(&app, "Refusals", 20_000).await;
    let empty = app
        .post("/ml/datasets", &k, json!({"name": "Empty"}))
        .await
        .expect(201)
        .id();
    // Refusals count against the hourly limit too: another key makes them.
    let writer = app.key(&[Scope::ReadAssets, Scope::WriteAssets]).await;
    for (body, field) in [
        (
            json!({"name": "x", "dataset_id": ds, "algorithm": "random_forest"}),
            "algorithm",
        ),
        (
            json!({"name": "x", "dataset_id": ds, "algorithm": "isolation_forest", "hyperparameters": {"n_estimators": 0}}),
            "hyperparameters.n_estimators",
        ),
        (
            json!({"name": "x", "dataset_id": ds, "algorithm": "isolation_forest", "hyperparameters": {"contamination": 0.7}}),
            "hyperparameters.contamination",
        ),
        (
            json!({"name": "x", "dataset_id": ds, "algorithm": "isolation_forest", "hyperparameters": {"depth": 3}}),
            "hyperparameters.depth",
        ),
        (
            json!({"name": "x", "dataset_id": ds, "algorithm": "isolation_forest", "features": ["state"]}),
            "features[0]",
        ),
        (
            json!({"name": "x", "dataset_id": ds, "algorithm": "isolation_forest", "features": ["zz"]}),
            "features[0]",
        ),
        (
            json!({"name": "x", "dataset_id": empty, "algorithm": "isolation_forest"}),
            "dataset_id",
        ),
        (
            json!({"name": "x", "dataset_id": "nope", "algorithm": "isolation_forest"}),
            "dataset_id",
        ),
        (
            json!({"name": "x", "dataset_id": ds, "dataset_version": "9.0", "algorithm": "isolation_forest"}),
            "dataset_version",
        ),
    ] {
        let r = app
            .post("/ml/training", &writer, body.clone())
            .await
            .expect(400);
        let fields: Vec<&str> = r.json["error"]["details"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["field"].as_str().unwrap())
            .collect();
        assert!(fields.contains(&field), "{body}: {fields:?}");
    }
    // A long job runs; the next waits queued (one job at a time on a node).
    let long = json!({"name": "long", "dataset_id": ds, "algorithm": "isolation_forest",
                      "hyperparameters": {"n_estimators": 10000, "max_samples": 4096}});
    let running = app
        .post("/ml/training", &k, long.clone())
        .await
        .expect(201)
        .id();
    let queued = app.post("/ml/training", &k, long).await.expect(201).id();
    wait_for("the job to run", 30, || async {
        let j = app
            .get(&format!("/ml/training/{running}"), &k)
            .await
            .expect(200)
            .json["data"]
            .clone();
        (j["status"] == "running" && j["progress"].as_f64() > Some(0.05)).then_some(())
    })
    .await;
    let q = app
        .delete(&format!("/ml/training/{queued}"), &k)
        .await
        .expect(200);
    assert_eq!(q.json["data"]["status"], "cancelled");
    let started = std::time::Instant::now();
    let c = app
        .delete(&format!("/ml/training/{running}"), &k)
        .await
        .expect(200);
    assert_eq!(c.json["data"]["status"], "cancelled", "{}", c.json);
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    let again = app
        .delete(&format!("/ml/training/{running}"), &k)
        .await
        .expect(409);
    assert_eq!(again.code(), "job_finished");
    assert_eq!(
        app.get("/ml/models", &k).await.expect(200).json["meta"]["total"],
        0
    );
    app.get("/ml/training/nope", &k).await.expect(404);

    // Tenancy and scopes.
    let (_, other) = app.other_org("Other ML models", Tier::Enterprise).await;
    app.get(&format!("/ml/training/{running}"), &other)
        .await
        .expect(404);
    app.delete(&format!("/ml/training/{running}"), &other)
        .await
        .expect(404);
    assert_eq!(
        app.get("/ml/training", &other).await.expect(200).json["meta"]["total"],
        0
    );
    let r = app
        .post(
            "/ml/training",
            &other,
            json!({"name": "x", "dataset_id": ds, "algorithm": "isolation_forest"}),
        )
        .await
        .expect(400);
    assert_eq!(r.json["error"]["details"][0]["field"], "dataset_id");
    let reader = app.key(&[Scope::ReadAssets]).await;
    app.get("/ml/training", &reader).await.expect(200);
    app.post(
        "/ml/training",
        &reader,
        json!({"name": "x", "dataset_id": ds, "algorithm": "isolation_forest"}),
    )
    .await
    .expect(403);
    // 10 jobs an hour: two made above, eight more pass, the eleventh is refused.
    let small = json!({"name": "s", "dataset_id": ds, "algorithm": "isolation_forest", "hyperparameters": {"n_estimators": 1}});
    for _ in 0..8 {
        app.post("/ml/training", &k, small.clone())
            .await
            .expect(201);
    }
    let limited = app.post("/ml/training", &k, small).await.expect(429);
    assert_eq!(limited.code(), "rate_limited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployed_model_scores_live_telemetry_and_raises_an_alert() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let ds = planted(&app, "Live", 3000).await;
    let job = app
        .post("/ml/training", &k, json!({"name": "Live", "dataset_id": ds, "algorithm": "isolation_forest",
                                        "features": ["a", "b"], "hyperparameters": {"seed": 3, "contamination": 0.05}}))
        .await
        .expect(201)
        .id();
    let job = finished(&app, &job).await;
    let model = job["model_id"].as_str().unwrap().to_string();
    let source = app
        .post("/data-sources", &k, json!({"name": "PLC", "type": "modbus", "enabled": false, "config": {"host": "plc.invalid"}}))
        .await
        .expect(201)
        .id();
    let bad = app
        .post(
            &format!("/ml/models/{model}/deploy"),
            &k,
            json!({"asset_ids": ["Pump_01"], "feature_tags": {"zz": "x"}}),
        )
        .await
        .expect(400);
    assert_eq!(bad.json["error"]["details"][0]["field"], "feature_tags.zz");
    app.post(
        &format!("/ml/models/{model}/deploy"),
        &k,
        json!({"asset_ids": []}),
    )
    .await
    .expect(400);
    // A dashboard that charts the pump, one that does not, and one of another organization.
    let chart = |asset: &str| {
        json!({"name": format!("{asset} line"), "layout": {"widgets": [
            {"id": "v", "type": "line_chart", "x": 0, "y": 0, "w": 12, "h": 4,
             "query": {"asset_id": asset, "tags": ["Vibration_X"], "range": "6h"}}]}})
    };
    let pump_board = app
        .post("/dashboards", &k, chart("Pump_01"))
        .await
        .expect(201)
        .id();
    let fan_board = app
        .post("/dashboards", &k, chart("Fan_01"))
        .await
        .expect(201)
        .id();
    let (_, other) = app.other_org("Other deploy", Tier::Enterprise).await;
    let other_board = app
        .post("/dashboards", &other, chart("Pump_01"))
        .await
        .expect(201)
        .id();
    let widgets = |key: String, id: String| {
        let app = &app;
        async move {
            app.get(&format!("/dashboards/{id}"), &key)
                .await
                .expect(200)
                .json["data"]["layout"]["widgets"]
                .as_array()
                .unwrap()
                .clone()
        }
    };
    let deployed = app
        .post(
            &format!("/ml/models/{model}/deploy"),
            &k,
            json!({"asset_ids": ["Pump_01"], "feature_tags": {"a": "Vibration_X"}}),
        )
        .await
        .expect(200);
    let d = &deployed.json["data"];
    assert_eq!(d["status"], "deployed");
    let tag = format!("anomaly_score:{model}");
    assert_eq!(d["deployment"]["score_tag"], tag);
    assert_eq!(
        d["deployment"]["feature_tags"],
        json!({"a": "Vibration_X", "b": "b"})
    );
    // The pump's dashboard now draws the score with the model's threshold, and its alerts.
    let drawn = widgets(k.clone(), pump_board.clone()).await;
    assert_eq!(drawn.len(), 3, "{drawn:?}");
    assert_eq!(drawn[1]["type"], "line_chart");
    assert_eq!(drawn[1]["query"]["tags"], json!([tag]));
    assert_eq!(drawn[1]["query"]["asset_id"], "Pump_01");
    assert_eq!(drawn[1]["query"]["range"], "6h");
    assert_eq!(
        drawn[1]["options"]["thresholds"][0]["value"],
        d["threshold"]
    );
    assert_eq!(drawn[2]["type"], "alert_list");
    assert_eq!(widgets(k.clone(), fan_board.clone()).await.len(), 1);
    assert_eq!(widgets(other.clone(), other_board.clone()).await.len(), 1);
    app.post(
        "/alert-rules",
        &k,
        json!({"name": "Pump_01 anomaly", "severity": "critical", "data_source_id": source,
               "condition": {"tag_name": tag, "operator": "gt", "value": 0.6, "duration_seconds": 0},
               "notifications": []}),
    )
    .await
    .expect(201);
    let send = |s: i64, a: f64, b: f64| {
        let (app, k, source) = (&app, k.clone(), source.clone());
        async move {
            let t = Timestamp::from_millis((Timestamp::now().millis() / 1000 + s) * 1000 - 600_000)
                .to_rfc3339();
            app.post(
                "/telemetry",
                &k,
                json!({"data_source_id": source, "data": [
                {"asset_id": "Pump_01", "tag_name": "Vibration_X", "value": a, "timestamp": t},
                {"asset_id": "Pump_01", "tag_name": "b", "value": b, "timestamp": t}]}),
            )
            .await
            .expect(200);
        }
    };
    // Normal running: low scores, no alert.
    send(0, 0.1, -0.1).await;
    let latest = wait_for("a live score", 20, || async {
        let r = app
            .get("/telemetry/latest?asset_id=Pump_01", &k)
            .await
            .expect(200);
        r.json["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["tag_name"] == tag)
            .cloned()
    })
    .await;
    assert!(latest["value"].as_f64().unwrap() < 0.6, "{latest}");
    // A bearing failing: far from what the model learned.
    send(1, 6.2, 6.1).await;
    let alert = wait_for("the anomaly alert", 20, || async {
        let r = app.get("/alerts", &k).await.expect(200);
        r.json["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["tag_name"] == tag)
            .cloned()
    })
    .await;
    assert_eq!(alert["severity"], "critical");
    // Undeploy: no new score.
    let undeployed = app
        .post(&format!("/ml/models/{model}/undeploy"), &k, json!({}))
        .await
        .expect(200);
    assert_eq!(undeployed.json["data"]["status"], "ready");
    assert_eq!(undeployed.json["data"]["deployment"], Value::Null);
    assert_eq!(widgets(k.clone(), pump_board.clone()).await.len(), 1);
    let before = app
        .get(
            &format!("/telemetry?asset_id=Pump_01&tag_name={tag}&per_page=100"),
            &k,
        )
        .await
        .expect(200)
        .json["meta"]["total"]
        .clone();
    send(2, 0.0, 0.0).await;
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let after = app
        .get(
            &format!("/telemetry?asset_id=Pump_01&tag_name={tag}&per_page=100"),
            &k,
        )
        .await
        .expect(200)
        .json["meta"]["total"]
        .clone();
    assert_eq!(before, after);
    app.post(
        &format!("/ml/models/{model}/deploy"),
        &other,
        json!({"asset_ids": ["Pump_01"]}),
    )
    .await
    .expect(404);
    app.get(&format!("/ml/models/{model}/download"), &other)
        .await
        .expect(404);
    app.post(
        &format!("/ml/models/{model}/test"),
        &other,
        json!({"features": {"a": 1, "b": 1}}),
    )
    .await
    .expect(404);
}

/// An independent check: scikit-learn's IsolationForest (python) trains on the same planted
/// data; plantd's ROC AUC is within 0.01 of its own, and the downloaded model scored by
/// `docs/score_model.py` gives the API's scores. Needs `PLANTD_TEST_PYTHON_SKLEARN` (set by
/// `.ci/run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scikit_learn_agrees_on_the_same_data() {
    let Some(python) = plantd_test_support::peer(
        "PLANTD_TEST_PYTHON_SKLEARN",
        "to a python3 with scikit-learn and requests",
    ) else {
        return;
    };
    let app = spawn_app().await;
    let stdout =
        plantd_test_support::run_interop(&python, "ml_sklearn.py", &[&app.base, &app.admin_key])
            .await;
    plantd_test_support::printed_every(
        &stdout,
        &[
            "uploaded",
            "trained",
            "contamination flags about that share",
            "auc within 0.01 of scikit-learn",
            "scores agree with scikit-learn's",
            "downloaded model scores as the API",
            "all checks",
        ],
    );
}
