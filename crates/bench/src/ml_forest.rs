//! The isolation forest beside scikit-learn's (issue 31): the same data (written once as raw
//! little-endian doubles that numpy reads), the same hyperparameters (100 trees, 256 samples),
//! fit and score timed on one and two threads, ROC AUC against the planted anomalies. Two
//! data sets: 1,000,000 x 16 continuous features with 1% anomalies, and one shaped like
//! CovType (581,012 x 54; generated, as the real one is not on this machine) with 0.9%.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use plantd_ml::evaluate::roc_auc;
use plantd_ml::forest::{Forest, Params, Rows};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::harness::Options;

struct Data {
    name: &'static str,
    rows: usize,
    features: usize,
    values: Vec<f64>,
    labels: Vec<bool>,
}

/// Rows around a few centres; anomalies around the same centres with three times the spread
/// (some of them hide among the normal rows, so the AUC means something).
fn generate(name: &'static str, rows: usize, features: usize, share: f64, seed: u64) -> Data {
    let mut rng = SmallRng::seed_from_u64(seed);
    let centres: Vec<Vec<f64>> = (0..4)
        .map(|_| (0..features).map(|_| rng.random_range(-3.0..3.0)).collect())
        .collect();
    let mut values = Vec::with_capacity(rows * features);
    let mut labels = Vec::with_capacity(rows);
    for _ in 0..rows {
        let anomaly = rng.random_bool(share);
        let c = &centres[rng.random_range(0..centres.len())];
        for f in c.iter().take(features) {
            // A sum of uniforms: close to a normal distribution.
            let noise: f64 = (0..4).map(|_| rng.random_range(-1.0..1.0)).sum::<f64>() * 0.5;
            values.push(if anomaly { f + 3.0 * noise } else { f + noise });
        }
        labels.push(anomaly);
    }
    Data {
        name,
        rows,
        features,
        values,
        labels,
    }
}

fn write(dir: &Path, d: &Data) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    let x = dir.join(format!("{}-x.f64", d.name));
    let y = dir.join(format!("{}-y.u8", d.name));
    let mut f = std::io::BufWriter::new(std::fs::File::create(&x)?);
    for v in &d.values {
        f.write_all(&v.to_le_bytes())?;
    }
    f.flush()?;
    std::fs::write(
        &y,
        d.labels.iter().map(|b| u8::from(*b)).collect::<Vec<_>>(),
    )?;
    Ok((x, y))
}

const SKLEARN: &str = r#"
import json, sys, time
try:
    import numpy as np, sklearn
    from sklearn.ensemble import IsolationForest
    from sklearn.metrics import roc_auc_score
except ImportError as e:
    print(json.dumps({"skipped": "scikit-learn is not installed (%s)" % e})); sys.exit(0)
xp, yp, rows, feats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
x = np.fromfile(xp, dtype="<f8").reshape(rows, feats)
y = np.fromfile(yp, dtype=np.uint8).astype(bool)
out = {"sklearn": sklearn.__version__}
for jobs in (1, 2):
    m = IsolationForest(n_estimators=100, max_samples=256, contamination=0.01, random_state=0, n_jobs=jobs)
    t = time.perf_counter(); m.fit(x); out["fit_%d" % jobs] = time.perf_counter() - t
    t = time.perf_counter(); s = -m.score_samples(x); out["score_%d" % jobs] = time.perf_counter() - t
    out["auc"] = roc_auc_score(y, s)
    # Without a contamination its fit builds the trees only (offset -0.5): plantd's own fit.
    m = IsolationForest(n_estimators=100, max_samples=256, random_state=0, n_jobs=jobs)
    t = time.perf_counter(); m.fit(x); out["trees_%d" % jobs] = time.perf_counter() - t
print(json.dumps(out))
"#;

fn sklearn(x: &Path, y: &Path, d: &Data) -> Value {
    let out = Command::new("python3")
        .arg("-c")
        .arg(SKLEARN)
        .arg(x)
        .arg(y)
        .arg(d.rows.to_string())
        .arg(d.features.to_string())
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or(Value::Null),
        Ok(o) => {
            serde_json::json!({"skipped": String::from_utf8_lossy(&o.stderr).trim().to_string()})
        }
        Err(e) => serde_json::json!({"skipped": e.to_string()}),
    }
}

pub(crate) async fn run(_o: &Options) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("plantd-bench-forest-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "ml-forest: isolation forest beside scikit-learn, 100 trees, 256 samples, contamination 0.01; {cores} cores"
    );
    let mut table = vec![
        "| data | system | fit, 1 thread | fit, 2 threads | fit with the threshold, 2 threads | score all rows, 1 thread | score, 2 threads | ROC AUC |".to_string(),
        "|---|---|---|---|---|---|---|---|".to_string(),
    ];
    for d in [
        generate("plant-1m-x16", 1_000_000, 16, 0.01, 1),
        generate("covtype-shaped-581k-x54", 581_012, 54, 0.009, 2),
    ] {
        let rows = Rows {
            values: &d.values,
            n_features: d.features,
        };
        let p = Params {
            n_estimators: 100,
            max_samples: Some(256),
            seed: 0,
            ..Params::default()
        };
        let mut fit = [0.0; 2];
        let mut score = [0.0; 2];
        let mut with_threshold = 0.0;
        let mut auc = 0.0;
        for (i, threads) in [1, 2].into_iter().enumerate() {
            let t = Instant::now();
            let mut forest = Forest::fit(&rows, &p, threads, &|| false, &|_| {})
                .ok_or_else(|| anyhow::anyhow!("the fit stopped"))?;
            fit[i] = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let s = forest.score(&rows, threads);
            score[i] = t.elapsed().as_secs_f64();
            // The threshold needs every training row scored, as scikit-learn's fit does with a
            // contamination.
            forest.set_threshold(&s, 0.01);
            with_threshold = fit[i] + score[i];
            auc = roc_auc(&s, &d.labels).unwrap_or(f64::NAN);
        }
        println!(
            "{}: plantd fit {:.4}/{:.4} s, with the threshold {with_threshold:.3} s, score {:.3}/{:.3} s (1/2 threads), AUC {auc:.4}",
            d.name, fit[0], fit[1], score[0], score[1]
        );
        table.push(format!(
            "| {} ({} x {}) | plantd | {:.4} s | {:.4} s | {with_threshold:.3} s | {:.3} s | {:.3} s | {auc:.4} |",
            d.name, d.rows, d.features, fit[0], fit[1], score[0], score[1]
        ));
        let (x, y) = write(&dir, &d)?;
        let sk = sklearn(&x, &y, &d);
        let _ = std::fs::remove_file(&x);
        let _ = std::fs::remove_file(&y);
        if let Some(why) = sk["skipped"].as_str() {
            println!("{}: scikit-learn skipped: {why}", d.name);
            table.push(format!(
                "| {} | scikit-learn | skipped: {why} | | | | | |",
                d.name
            ));
            continue;
        }
        let g = |k: &str| sk[k].as_f64().unwrap_or(f64::NAN);
        let version = sk["sklearn"].as_str().unwrap_or("?");
        println!(
            "{}: scikit-learn {version} fit (with its threshold) {:.3}/{:.3} s, score {:.3}/{:.3} s, AUC {:.4}; plantd's trees fit {:.0}x/{:.0}x faster, with the threshold {:.1}x faster on 2 threads, scores {:.1}x/{:.1}x faster",
            d.name,
            g("fit_1"),
            g("fit_2"),
            g("score_1"),
            g("score_2"),
            g("auc"),
            g("fit_1") / fit[0],
            g("fit_2") / fit[1],
            g("fit_2") / with_threshold,
            g("score_1") / score[0],
            g("score_2") / score[1]
        );
        println!(
            "{}: scikit-learn's trees alone (contamination 'auto') {:.3}/{:.3} s: plantd's fit {:.0}x/{:.0}x faster",
            d.name,
            g("trees_1"),
            g("trees_2"),
            g("trees_1") / fit[0],
            g("trees_2") / fit[1]
        );
        table.push(format!(
            "| {} | scikit-learn {version} (fit: the trees alone, contamination 'auto'; with the threshold: contamination 0.01) | {:.3} s | {:.3} s | {:.3} s | {:.3} s | {:.3} s | {:.4} |",
            d.name,
            g("trees_1"),
            g("trees_2"),
            g("fit_2"),
            g("score_1"),
            g("score_2"),
            g("auc")
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!();
    for l in table {
        println!("{l}");
    }
    println!();
    live_scoring(_o).await
}

/// Assets and features of the live-scoring rows: 1,000 assets x 10 tags = 10,000 series, one
/// point per series per batch (a plant's scan).
const ASSETS: usize = 1000;
const FEATURES: usize = 10;
const BATCHES: usize = 100;

/// One scan of every asset's feature tags at `t` (Unix ms), as a `POST /v1/telemetry` body.
fn scan(t: i64, prefix: &str, assets: usize, rng: &mut SmallRng) -> Value {
    let when = plantd_model::Timestamp::from_millis(t).to_rfc3339();
    let mut data = Vec::with_capacity(assets * FEATURES);
    for a in 0..assets {
        for f in 0..FEATURES {
            data.push(serde_json::json!({
                "asset_id": format!("{prefix}{a}"), "tag_name": format!("f{f}"),
                "value": f as f64 + rng.random_range(-0.5..0.5), "timestamp": when}));
        }
    }
    serde_json::json!({ "data": data })
}

/// Sends `BATCHES` scans of the `LIVE` assets; answers the seconds they took.
async fn ingest_scans(addr: &str, key: &str, t0: i64) -> anyhow::Result<f64> {
    let mut rng = SmallRng::seed_from_u64(5);
    let bodies: Vec<Value> = (0..BATCHES)
        .map(|i| scan(t0 + i as i64 * 1000, "LIVE", ASSETS, &mut rng))
        .collect();
    let mut http = crate::harness::connect(addr).await?;
    let t = Instant::now();
    for b in &bodies {
        crate::harness::post_json(&mut http, addr, "/v1/telemetry", key, b, 200).await?;
    }
    Ok(t.elapsed().as_secs_f64())
}

/// The live scorer's compute so far, in seconds (`plantd_ml_scoring_duration_seconds_sum`).
async fn scoring_seconds(
    http: &mut hyper::client::conn::http1::SendRequest<http_body_util::Full<hyper::body::Bytes>>,
    addr: &str,
    key: &str,
) -> anyhow::Result<f64> {
    let (_, body) = crate::harness::Probe::get("/metrics", key)
        .call(http, addr)
        .await?;
    Ok(String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix("plantd_ml_scoring_duration_seconds_sum "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0))
}

/// The live scorer's cost: the same scans ingested with no model deployed and with a model
/// deployed to every asset (10 features), the server's CPU per point compared.
pub(crate) async fn live_scoring(o: &Options) -> anyhow::Result<()> {
    use crate::harness::{connect, post_json, start_server};
    let (server, key) = start_server(o, None)?;
    let addr = server.addr.clone();
    let pid = server.child.id();
    let mut http = connect(&addr).await?;
    // A model trained on 2,000 minutes of one asset's telemetry (a dataset from telemetry).
    let now = plantd_model::Timestamp::now().millis() / 60_000 * 60_000;
    let start = now - 2_000 * 60_000;
    let mut rng = SmallRng::seed_from_u64(4);
    for chunk in 0..4 {
        let mut data = Vec::new();
        for m in (chunk * 500)..((chunk + 1) * 500) {
            let when = plantd_model::Timestamp::from_millis(start + m * 60_000).to_rfc3339();
            for f in 0..FEATURES {
                data.push(
                    serde_json::json!({"asset_id": "TRAIN", "tag_name": format!("f{f}"),
                    "value": f as f64 + rng.random_range(-0.5..0.5), "timestamp": when}),
                );
            }
        }
        post_json(
            &mut http,
            &addr,
            "/v1/telemetry",
            &key,
            &serde_json::json!({"data": data}),
            200,
        )
        .await?;
    }
    let tags: Vec<String> = (0..FEATURES).map(|f| format!("f{f}")).collect();
    let ds = post_json(
        &mut http,
        &addr,
        "/v1/ml/datasets",
        &key,
        &serde_json::json!({
        "name": "training", "telemetry": {"asset_ids": ["TRAIN"], "tags": tags,
        "start": plantd_model::Timestamp::from_millis(start).to_rfc3339(),
        "end": plantd_model::Timestamp::from_millis(now).to_rfc3339(), "interval": "1m"}}),
        201,
    )
    .await?;
    let ds = ds["data"]["id"].as_str().unwrap_or_default().to_string();
    let job = post_json(
        &mut http,
        &addr,
        "/v1/ml/training",
        &key,
        &serde_json::json!({
        "name": "live", "dataset_id": ds, "algorithm": "isolation_forest"}),
        201,
    )
    .await?;
    let job = job["data"]["id"].as_str().unwrap_or_default().to_string();
    let mut model = String::new();
    for _ in 0..300 {
        let probe = crate::harness::Probe::get(&format!("/v1/ml/training/{job}"), &key);
        let (_, body) = probe.call(&mut http, &addr).await?;
        let j: Value = serde_json::from_slice(&body)?;
        if let Some(m) = j["data"]["model_id"].as_str() {
            model = m.to_string();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    anyhow::ensure!(!model.is_empty(), "the training job did not complete");
    // Warm up the series (their first points create them), then measure without a model.
    let t0 = plantd_model::Timestamp::now().millis() - 3_600_000;
    ingest_scans(&addr, &key, t0 - 600_000).await?;
    // CPU from the first batch until the server is idle again: the scorer runs after the
    // answers, and the sealer compresses what a phase wrote once its ingest pauses, so each
    // phase is charged its own background work and none of the other's.
    let measure = |t: i64| {
        let (addr, key) = (addr.clone(), key.clone());
        async move {
            crate::sim::wait_idle(pid).await?;
            let cpu = crate::sim::cpu_seconds(pid)?;
            let secs = ingest_scans(&addr, &key, t).await?;
            crate::sim::wait_idle(pid).await?;
            anyhow::Ok((secs, crate::sim::cpu_seconds(pid)? - cpu))
        }
    };
    let (plain_s, plain_cpu) = measure(t0).await?;
    let assets: Vec<String> = (0..ASSETS).map(|a| format!("LIVE{a}")).collect();
    post_json(
        &mut http,
        &addr,
        &format!("/v1/ml/models/{model}/deploy"),
        &key,
        &serde_json::json!({"asset_ids": assets}),
        200,
    )
    .await?;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    // The scores' series are created by a first round too.
    ingest_scans(&addr, &key, t0 + 200_000).await?;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let scoring = scoring_seconds(&mut http, &addr, &key).await?;
    let (scored_s, scored_cpu) = measure(t0 + 400_000).await?;
    let scoring = scoring_seconds(&mut http, &addr, &key).await? - scoring;
    let points = (ASSETS * FEATURES * BATCHES) as f64;
    let probe = crate::harness::Probe::get("/v1/telemetry/latest?asset_id=LIVE7", &key);
    let (_, body) = probe.call(&mut http, &addr).await?;
    let latest: Value = serde_json::from_slice(&body)?;
    let scored = latest["data"].as_array().is_some_and(|a| {
        a.iter().any(|p| {
            p["tag_name"]
                .as_str()
                .is_some_and(|t| t.starts_with("anomaly_score:"))
        })
    });
    println!(
        "live scoring ({ASSETS} assets x {FEATURES} features, {BATCHES} scans of {} points, SQLite): without a model {:.0} points/s, {:.2} us CPU a point; with the model deployed to every asset {:.0} points/s, {:.2} us CPU a point: the scorer adds {:.2} us a point ({:.0}% more): its scoring {:.2} us, the rest is storing its scores (a tenth more points and series, sealed in the background; each phase is measured until the server is idle){}",
        ASSETS * FEATURES,
        points / plain_s,
        plain_cpu / points * 1e6,
        points / scored_s,
        scored_cpu / points * 1e6,
        (scored_cpu - plain_cpu) / points * 1e6,
        (scored_cpu / plain_cpu - 1.0) * 100.0,
        scoring / points * 1e6,
        if scored {
            ""
        } else {
            "; WARNING: no score was written"
        }
    );
    drop(server);
    Ok(())
}
