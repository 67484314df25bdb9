//! `plantd-bench licenses`: license validations per second at `POST /v1/licenses/validate`
//! (a key's lookup, its Ed25519 signature check, the per-key limit and the audit record), with
//! and without a device, and offline verifications per second in this process (what a device
//! does without a network). Issue 16's target: at least 10,000 validations/s on 2 cores.

use anyhow::{Context, Result};
use hyper::body::Bytes;
use serde_json::json;
use std::time::{Duration, Instant};

use crate::harness::{
    Load, Options, Probe, backends, connect, drop_database, load_probe, post_json, request_table,
    start_server,
};

pub(crate) async fn run(o: &Options) -> Result<()> {
    let connections = o.connections.unwrap_or(16);
    request_table(
        "licenses",
        connections,
        o,
        "each validation: the key's license looked up (kept for up to 10 s, as API keys are), the key compared with its current one (an older key's Ed25519 signature checked), the per-address and per-key limits counted, its audit record committed",
        52,
    );
    let mut offline_key = None;
    for (backend, url) in &backends(o) {
        let (server, admin) = start_server(o, url.as_deref())?;
        let addr = server.addr.clone();
        let mut sender = connect(&addr).await?;
        let product = post_json(
            &mut sender,
            &addr,
            "/v1/products",
            &admin,
            &json!({"name": "Edge Gateway", "sku": "HUB-PRO", "price": 499, "license_type": "subscription",
                    "features": ["mqtt", "opcua", "modbus"]}),
            201,
        )
        .await?;
        let license = post_json(
            &mut sender,
            &addr,
            "/v1/licenses",
            &admin,
            &json!({"product_id": product["data"]["id"], "validity_days": 365, "max_activations": 10,
                    "customer_email": "ops@plant.example"}),
            201,
        )
        .await?;
        let key = license["data"]["license_key"]
            .as_str()
            .context("license_key")?
            .to_string();
        let device = |extra: serde_json::Value| {
            let mut body = json!({"license_key": key});
            body.as_object_mut()
                .expect("an object")
                .extend(extra.as_object().cloned().unwrap_or_default());
            Probe {
                method: "POST",
                path: "/v1/licenses/validate".into(),
                authorization: String::new(),
                body: Some(("application/json", Bytes::from(body.to_string()))),
                expect: 200,
            }
        };
        let activation = Probe {
            method: "POST",
            path: "/v1/licenses/activate".into(),
            authorization: String::new(),
            body: Some((
                "application/json",
                Bytes::from(
                    json!({"license_key": key, "device_id": "gw-1", "hardware_fingerprint": "fp-1"})
                        .to_string(),
                ),
            )),
            expect: 201,
        };
        let (status, body) = activation.call(&mut sender, &addr).await?;
        anyhow::ensure!(
            status == 201,
            "activate: {status} {}",
            String::from_utf8_lossy(&body)
        );
        let plain = device(json!({}));
        let on_device = device(json!({"device_id": "gw-1", "hardware_fingerprint": "fp-1"}));
        for probe in [&plain, &on_device] {
            let (status, body) = probe.call(&mut sender, &addr).await?;
            let answer: serde_json::Value = serde_json::from_slice(&body)?;
            anyhow::ensure!(
                status == 200 && answer["data"]["code"] == "VALID",
                "validate: {status} {answer}"
            );
        }
        load_probe(&addr, &plain, connections, Duration::from_secs(2)).await?;
        let rows: [(&str, Load); 2] = [
            (
                "POST /v1/licenses/validate (key)",
                load_probe(&addr, &plain, connections, o.duration).await?,
            ),
            (
                "POST /v1/licenses/validate (key, device)",
                load_probe(&addr, &on_device, connections, o.duration).await?,
            ),
        ];
        for (label, r) in &rows {
            r.print_row(backend, label, 52);
        }
        println!(
            "{:<11} validations/s: {:.0} (target: >= 10,000)\n",
            backend,
            rows[0].1.per_second()
        );
        if offline_key.is_none() {
            let public = sender_public_key(&mut sender, &addr, &admin).await?;
            offline_key = Some((key.clone(), public));
        }
        drop(server);
        drop_database(url.as_deref(), o.postgres_url.as_deref());
    }
    if let Some((key, public)) = offline_key {
        let (n, secs) = tokio::task::spawn_blocking(move || offline(&key, &public)).await??;
        println!(
            "offline: {n} verifications in {secs:.2} s on one thread = {:.0} verifications/s (plantd_auth::license_key::verify: decode + Ed25519)",
            n as f64 / secs
        );
    }
    Ok(())
}

async fn sender_public_key(
    sender: &mut hyper::client::conn::http1::SendRequest<http_body_util::Full<Bytes>>,
    addr: &str,
    admin: &str,
) -> Result<[u8; 32]> {
    let (status, body) = Probe::get("/v1/licenses/public-key", admin)
        .call(sender, addr)
        .await?;
    anyhow::ensure!(status == 200, "public key: {status}");
    let view: serde_json::Value = serde_json::from_slice(&body)?;
    let pem = view["data"]["public_key_pem"].as_str().context("pem")?;
    Ok(plantd_auth::license_key::parse_public_key(pem)?)
}

/// Verifies `key` on one thread for two seconds.
fn offline(key: &str, public: &[u8; 32]) -> Result<(u64, f64)> {
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < Duration::from_secs(2) {
        for _ in 0..100 {
            plantd_auth::license_key::verify(key, public)?;
        }
        n += 100;
    }
    Ok((n, started.elapsed().as_secs_f64()))
}
