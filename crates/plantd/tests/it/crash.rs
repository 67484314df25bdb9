//! Acknowledged telemetry survives a crash: ingest through the real binary, SIGKILL it while
//! batches are in flight, restart, and find every point whose batch was acknowledged.

use plantd_test_support::ServerProcess;
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_plantd");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_points_survive_sigkill() {
    let (db_url, temp_dir) = plantd_test_support::fresh_database().await;
    let data_dir = temp_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("plantd-crash-{}", std::process::id()))
    });
    let data_dir = data_dir.to_str().unwrap().to_string();
    let storage = [
        "--data-dir",
        data_dir.as_str(),
        "--database-url",
        db_url.as_str(),
    ];
    let mut server = ServerProcess::start(BIN, &storage);
    let base = server.base.clone();
    let out = Command::new(BIN)
        .args(["keys", "create", "--name", "k", "--scopes", "admin"])
        .args(storage)
        .output()
        .unwrap();
    assert!(out.status.success());
    let key = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let client = plantd_test_support::client();
    let t0 = plantd_model::Timestamp::now().millis() - 3_600_000;

    // Writers keep sending 500-point batches; the server is killed in the middle of it.
    let acknowledged = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut writers = Vec::new();
    for w in 0..2_i64 {
        let (client, base, key, acknowledged) = (
            client.clone(),
            base.clone(),
            key.clone(),
            acknowledged.clone(),
        );
        writers.push(tokio::spawn(async move {
            for batch in 0..10_000_i64 {
                let points: Vec<_> = (0..500_i64)
                    .map(|i| {
                        let ts = t0 + (batch * 500 + i) * 2 + w;
                        serde_json::json!({"asset_id": format!("W{w}"), "tag_name": "V", "value": i, "timestamp": plantd_model::Timestamp::from_millis(ts).to_rfc3339()})
                    })
                    .collect();
                let sent = client.post(format!("{base}/v1/telemetry")).bearer_auth(&key).json(&serde_json::json!({"data": points})).send().await;
                match sent {
                    Ok(r) if r.status() == 200 => {
                        acknowledged.fetch_add(500, std::sync::atomic::Ordering::SeqCst);
                    }
                    _ => return,
                }
            }
        }));
    }
    // Let some batches land, then kill without warning.
    while acknowledged.load(std::sync::atomic::Ordering::SeqCst) < 5_000 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.stop("KILL");
    for w in writers {
        let _ = w.await;
    }
    let acked = acknowledged.load(std::sync::atomic::Ordering::SeqCst);

    let mut server = ServerProcess::start(BIN, &storage);
    let base = server.base.clone();
    let mut stored = 0;
    for w in 0..2 {
        let url = format!(
            "{base}/v1/telemetry?asset_id=W{w}&aggregation=count&start={}&end={}",
            plantd_model::Timestamp::from_millis(t0 - 1).to_rfc3339(),
            plantd_model::Timestamp::from_millis(t0 + 100_000_000).to_rfc3339()
        );
        let r: serde_json::Value = client
            .get(url)
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        stored += r["data"][0]["count"].as_u64().unwrap_or(0);
    }
    assert!(
        stored >= acked,
        "acknowledged {acked} points but only {stored} survived the crash"
    );
    // Batches are atomic: whatever was stored beyond the acknowledged ones is whole batches.
    assert_eq!(stored % 500, 0, "a partial batch survived: {stored}");
    server.stop("TERM");
    if temp_dir.is_none() {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
}
