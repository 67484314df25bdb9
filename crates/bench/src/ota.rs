//! `plantd-bench ota`: firmware updates at fleet scale. N devices (default 1,000 with
//! `--devices 1000`) connect over MQTT; a package (default 50 MiB) is uploaded as multipart and
//! released; a phased deployment (the default phases: 10%, 50%, 100%) goes to all of them, each
//! device downloading the whole file over HTTP with its own password and reporting its steps:
//! the time from creation to all succeeded. Then 100 devices download the package at once,
//! from plantd and from `python3 -m http.server` serving the same file in the same run: MiB/s
//! and each server's memory during the downloads. Simulated devices count the bytes instead of
//! hashing them (hashing is the device's CPU, and 1,000 devices share this machine's two cores
//! with the server).

use anyhow::{Context, Result, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::harness::{
    Options, Probe, backends, connect, drop_database, free_port, post_json, start_server_with,
    stop_child,
};
use crate::sim::rss_mib;

const BOUNDARY: &str = "plantd-bench-boundary-7e3c";
const MULTIPART: &str = "multipart/form-data; boundary=plantd-bench-boundary-7e3c";

/// The package: `mib` MiB of bytes that do not compress to nothing.
fn package_bytes(mib: u64) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..mib * 1024 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn multipart(file: &[u8], version: &str) -> Bytes {
    let mut body = Vec::with_capacity(file.len() + 512);
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"version\"\r\n\r\n{version}\r\n\
             --{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"bench.bin\"\r\n\
             Content-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    Bytes::from(body)
}

/// Downloads `path` whole, counting its bytes as they arrive (never held); a refused or reset
/// connection is tried again after 100 ms, up to 20 times, as a device would.
async fn download(addr: &str, path: &str, bearer: Option<&str>) -> Result<u64> {
    let mut attempt = 0;
    loop {
        match download_once(addr, path, bearer).await {
            Ok(n) => return Ok(n),
            Err(e) if attempt < 20 => {
                attempt += 1;
                RETRIES.fetch_add(1, Ordering::Relaxed);
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Downloads tried again (a refused or reset connection).
static RETRIES: AtomicU64 = AtomicU64::new(0);

async fn download_once(addr: &str, path: &str, bearer: Option<&str>) -> Result<u64> {
    let mut sender = connect(addr).await?;
    let mut b = hyper::Request::builder()
        .method("GET")
        .uri(path)
        .header("host", addr);
    if let Some(k) = bearer {
        b = b.header("authorization", format!("Bearer {k}"));
    }
    sender.ready().await?;
    let resp = sender
        .send_request(b.body(Full::new(Bytes::new()))?)
        .await?;
    if resp.status() != 200 {
        bail!("GET {path} answered {}", resp.status());
    }
    let mut body = resp.into_body();
    let mut n = 0u64;
    while let Some(frame) = body.frame().await {
        if let Some(d) = frame?.data_ref() {
            n += d.len() as u64;
        }
    }
    Ok(n)
}

/// One simulated device: subscribes to its commands; on `ota.update` reports its steps around
/// a whole download of the package; on `ota.rollback` reports `rolled_back`.
async fn device(
    port: u16,
    http: String,
    id: String,
    password: String,
    done: Arc<AtomicU64>,
    up: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) {
    let mut o = MqttOptions::new(&id, "127.0.0.1", port);
    o.set_keep_alive(Duration::from_secs(120));
    o.set_credentials(&id, &password);
    let (client, mut events) = AsyncClient::new(o, 32);
    let report_topic = format!("plantd/devices/{id}/ota");
    let mut first = true;
    while !stop.load(Ordering::Relaxed) {
        match events.poll().await {
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                let _ =
                    client.try_subscribe(format!("plantd/devices/{id}/commands"), QoS::AtLeastOnce);
                if first {
                    up.fetch_add(1, Ordering::Relaxed);
                    first = false;
                }
            }
            Ok(Event::Incoming(Packet::Publish(p))) => {
                let cmd: Value = serde_json::from_slice(&p.payload).unwrap_or(Value::Null);
                let dep = cmd["params"]["deployment_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let report =
                    |state: &str| json!({"deployment_id": dep, "state": state}).to_string();
                if cmd["command"] == "ota.update" {
                    let url = cmd["params"]["download_url"].as_str().unwrap_or_default();
                    let path = url.find("/v1/").map_or(url, |i| &url[i..]).to_string();
                    let size = cmd["params"]["package"]["size_bytes"].as_u64().unwrap_or(0);
                    let (client, http, password, topic, done) = (
                        client.clone(),
                        http.clone(),
                        password.clone(),
                        report_topic.clone(),
                        done.clone(),
                    );
                    let steps: Vec<String> = [
                        "downloading",
                        "verifying",
                        "backing_up",
                        "installing",
                        "health_check",
                        "succeeded",
                        "failed",
                    ]
                    .iter()
                    .map(|s| report(s))
                    .collect();
                    tokio::spawn(async move {
                        let _ = client
                            .publish(&topic, QoS::AtLeastOnce, false, steps[0].clone())
                            .await;
                        let ok = matches!(download(&http, &path, Some(&password)).await, Ok(n) if n == size);
                        if ok {
                            for s in &steps[1..6] {
                                let _ = client
                                    .publish(&topic, QoS::AtLeastOnce, false, s.clone())
                                    .await;
                            }
                            done.fetch_add(1, Ordering::Relaxed);
                        } else {
                            let _ = client
                                .publish(&topic, QoS::AtLeastOnce, false, steps[6].clone())
                                .await;
                        }
                    });
                } else if cmd["command"] == "ota.rollback" {
                    let _ = client.try_publish(
                        &report_topic,
                        QoS::AtLeastOnce,
                        false,
                        report("rolled_back"),
                    );
                }
            }
            Ok(_) => {}
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// `n` downloads of `path` at once; answers MiB/s and the peak memory of `pid` meanwhile.
async fn concurrent_downloads(
    addr: &str,
    path: &str,
    bearer: Option<&str>,
    n: usize,
    pid: u32,
) -> Result<(f64, f64, f64)> {
    let before = rss_mib(pid)?;
    let peak = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(m) = rss_mib(pid) {
                    peak.fetch_max((m * 1024.0) as u64, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let t0 = Instant::now();
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let (addr, path, bearer) = (
            addr.to_string(),
            path.to_string(),
            bearer.map(str::to_string),
        );
        tasks.push(tokio::spawn(async move {
            download(&addr, &path, bearer.as_deref()).await
        }));
    }
    let mut bytes = 0u64;
    for t in tasks {
        bytes += t.await??;
    }
    let secs = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    Ok((
        bytes as f64 / (1024.0 * 1024.0) / secs,
        before,
        peak.load(Ordering::Relaxed) as f64 / 1024.0,
    ))
}

pub(crate) async fn run(o: &Options) -> Result<()> {
    let n = o.devices;
    let mib = o.package_mib;
    let file = package_bytes(mib);
    println!(
        "ota: {n} devices, a {mib} MiB package, default phases (10%, 50%, 100%); then {} downloads at once beside python3 -m http.server",
        o.concurrent_downloads
    );
    let mut rows = Vec::new();
    for (backend, url) in backends(o) {
        rows.push(plantd_row(o, n, &file, backend, url.as_deref()).await?);
        drop_database(url.as_deref(), o.postgres_url.as_deref());
    }
    // The peers, serving the same file to the same client: nginx (when installed) and
    // python3's http.server.
    let dir = std::env::temp_dir().join(format!("plantd-bench-ota-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("package.bin"), &file)?;
    let mut peers = Vec::new();
    let nginx = std::env::var("PLANTD_BENCH_NGINX").unwrap_or_else(|_| "/usr/sbin/nginx".into());
    if std::path::Path::new(&nginx).exists() {
        let port = free_port()?;
        let conf = dir.join("nginx.conf");
        std::fs::write(
            &conf,
            format!(
                "daemon off;\nworker_processes 2;\npid {pid};\nerror_log stderr error;\nevents {{ worker_connections 4096; }}\n\
                 http {{ access_log off; sendfile on; server {{ listen 127.0.0.1:{port}; root {root}; }} }}\n",
                pid = dir.join("nginx.pid").display(),
                root = dir.display()
            ),
        )?;
        let mut child = std::process::Command::new(&nginx)
            .arg("-c")
            .arg(&conf)
            .arg("-p")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("start nginx")?;
        tokio::time::sleep(Duration::from_millis(800)).await;
        // nginx forks its workers: the memory measured is the master's.
        let r = concurrent_downloads(
            &format!("127.0.0.1:{port}"),
            "/package.bin",
            None,
            o.concurrent_downloads,
            child.id(),
        )
        .await;
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let _ = child.wait();
        let (mibs, before, peak) = r?;
        peers.push(format!("| nginx 1.22 with sendfile (same file, same client) | – | – | – | {mibs:.0} MiB/s | {before:.0} → {peak:.0} MiB (master process) |"));
    }
    let port = free_port()?;
    let mut child = std::process::Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--directory",
        ])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("start python3 -m http.server")?;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let before_retries = RETRIES.load(Ordering::Relaxed);
    let r = concurrent_downloads(
        &format!("127.0.0.1:{port}"),
        "/package.bin",
        None,
        o.concurrent_downloads,
        child.id(),
    )
    .await;
    stop_child(&mut child, &dir);
    let (mibs, before, peak) = r?;
    peers.push(format!(
        "| python3 -m http.server (same file, same client; {} connections tried again) | – | – | – | {mibs:.0} MiB/s | {before:.0} → {peak:.0} MiB |",
        RETRIES.load(Ordering::Relaxed) - before_retries
    ));
    println!();
    println!(
        "| system | deployment to {n} devices, created to all succeeded | devices succeeded | upload | {} downloads at once | server memory before → peak during downloads |",
        o.concurrent_downloads
    );
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        println!("{r}");
    }
    for p in &peers {
        println!("{p}");
    }
    Ok(())
}

async fn plantd_row(
    o: &Options,
    n: usize,
    file: &[u8],
    backend: &str,
    url: Option<&str>,
) -> Result<String> {
    let port = free_port()?;
    let listen = format!("127.0.0.1:{port}");
    let (server, key) = start_server_with(o, url, &["--mqtt-listen", &listen])?;
    let addr = server.addr.clone();
    let mut http = connect(&addr).await?;
    let group = post_json(
        &mut http,
        &addr,
        "/v1/fleet/groups",
        &key,
        &json!({"name": "bench"}),
        201,
    )
    .await?;
    let gid = group["data"]["id"]
        .as_str()
        .context("group id")?
        .to_string();
    let t = Instant::now();
    let mut creds = Vec::with_capacity(n);
    for i in 0..n {
        let d = post_json(
            &mut http,
            &addr,
            "/v1/fleet/devices",
            &key,
            &json!({"name": format!("ota {i}"), "serial_number": format!("OTA-{i}"), "group_ids": [gid]}),
            201,
        )
        .await?;
        creds.push((
            d["data"]["id"].as_str().context("id")?.to_string(),
            d["data"]["mqtt"]["password"]
                .as_str()
                .context("password")?
                .to_string(),
        ));
    }
    println!(
        "{backend}: registered {n} devices in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let probe = Probe {
        method: "POST",
        body: Some((MULTIPART, multipart(file, "1.0.0"))),
        ..Probe::get("/v1/ota/packages", &key)
    };
    let (status, body) = probe.call(&mut http, &addr).await?;
    if status != 201 {
        bail!(
            "upload answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let upload_mibs = file.len() as f64 / (1024.0 * 1024.0) / t.elapsed().as_secs_f64();
    let package: Value = serde_json::from_slice(&body)?;
    let pid = package["data"]["id"]
        .as_str()
        .context("package id")?
        .to_string();
    post_json(
        &mut http,
        &addr,
        &format!("/v1/ota/packages/{pid}/release"),
        &key,
        &json!({}),
        200,
    )
    .await?;

    let done = Arc::new(AtomicU64::new(0));
    let up = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    for (id, pw) in creds {
        tokio::spawn(device(
            port,
            addr.clone(),
            id,
            pw,
            done.clone(),
            up.clone(),
            stop.clone(),
        ));
        tokio::task::yield_now().await;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while (up.load(Ordering::Relaxed) as usize) < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    let t = Instant::now();
    let d = post_json(
        &mut http,
        &addr,
        "/v1/ota/deployments",
        &key,
        &json!({"name": "bench", "package_id": pid, "targets": {"type": "group", "group_id": gid}, "device_timeout_seconds": 1800}),
        201,
    )
    .await?;
    let did = d["data"]["id"]
        .as_str()
        .context("deployment id")?
        .to_string();
    let mut phases = Vec::new();
    let final_status = loop {
        let (status, body) = Probe::get(&format!("/v1/ota/deployments/{did}"), &key)
            .call(&mut http, &addr)
            .await?;
        if status != 200 {
            bail!("GET deployment answered {status}");
        }
        let v: Value = serde_json::from_slice(&body)?;
        let phase = v["data"]["current_phase"].as_u64().unwrap_or(0);
        if phases.len() < phase as usize {
            phases.push(t.elapsed().as_secs_f64());
        }
        let s = v["data"]["status"].as_str().unwrap_or_default().to_string();
        if !matches!(s.as_str(), "scheduled" | "in_progress" | "paused") {
            break v;
        }
        if t.elapsed() > Duration::from_secs(3600) {
            bail!("the deployment did not finish within an hour");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let took = t.elapsed().as_secs_f64();
    let succeeded = final_status["data"]["device_counts"]["succeeded"]
        .as_u64()
        .unwrap_or(0);
    println!(
        "{backend}: deployment {} in {took:.1} s; phases started at {}",
        final_status["data"]["status"],
        phases
            .iter()
            .map(|s| format!("{s:.1} s"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    stop.store(true, Ordering::Relaxed);

    let retries = RETRIES.load(Ordering::Relaxed);
    let (mibs, before, peak) = concurrent_downloads(
        &addr,
        &format!("/v1/ota/packages/{pid}/download"),
        Some(&key),
        o.concurrent_downloads,
        server.child.id(),
    )
    .await?;
    drop(server);
    Ok(format!(
        "| plantd on {backend} | {took:.1} s ({:.0} MiB/s delivered) | {succeeded} / {n} | {upload_mibs:.0} MiB/s | {mibs:.0} MiB/s ({} connections tried again) | {before:.0} → {peak:.0} MiB |",
        (n as f64 * file.len() as f64 / (1024.0 * 1024.0)) / took,
        RETRIES.load(Ordering::Relaxed) - retries
    ))
}
