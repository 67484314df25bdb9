//! `plantd-bench ml-datasets`: an ML dataset at scale. A CSV of `--rows` rows (default
//! 1,000,000) and 10 columns (8 sensor numbers, a status string, a running flag; about 1% of
//! the rows planted with a violation: out-of-range values, empty cells, an unknown status) is
//! written to a temporary directory, then streamed from disk as one multipart upload, checked by
//! four validation rules (`POST .../validate`) and profiled (`GET .../quality`): the seconds and
//! rows/s of each step, the server's peak memory (VmHWM) and the storage per row. In the same
//! run, pandas reads the same file (`read_csv`), describes it (`describe(include='all')`) and
//! applies the same rules as boolean masks: its seconds and peak RSS beside plantd's.

use anyhow::{Context, Result, bail};
use http_body_util::BodyExt;
use hyper::body::{Bytes, Frame, SizeHint};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Command;
use std::task::{Context as TaskContext, Poll};
use std::time::Instant;

use crate::harness::{
    Options, Probe, Server, backends, connect, drop_database, post_json, start_server,
};
use crate::sim::cpu_seconds;

const BOUNDARY: &str = "plantd-bench-boundary-5d1a";
const MULTIPART: &str = "multipart/form-data; boundary=plantd-bench-boundary-5d1a";

/// The file's columns, in order, with their declared types.
const COLUMNS: [(&str, &str); 10] = [
    ("vibration_x", "number"),
    ("vibration_y", "number"),
    ("vibration_z", "number"),
    ("motor_temperature", "number"),
    ("bearing_temperature", "number"),
    ("discharge_pressure", "number"),
    ("flow_rate", "number"),
    ("motor_current", "number"),
    ("status", "string"),
    ("running", "boolean"),
];

/// The statuses a row may have (the `allowed_values` rule), and the one planted outside them.
const STATUSES: [&str; 4] = ["running", "idle", "maintenance", "alarm"];
const UNKNOWN_STATUS: &str = "offline";

/// The validation rules, in the order of [`Planted::per_rule`]; the same JSON goes to plantd
/// and to the pandas reference.
fn rules() -> Vec<Value> {
    vec![
        json!({"name": "motor temperature in range", "rule_type": "range", "column": "motor_temperature", "config": {"min": 0, "max": 120}}),
        json!({"name": "discharge pressure in range", "rule_type": "range", "column": "discharge_pressure", "config": {"min": 0, "max": 25}}),
        json!({"name": "flow rate present", "rule_type": "not_null", "column": "flow_rate", "config": {}}),
        json!({"name": "known status", "rule_type": "allowed_values", "column": "status", "config": {"values": STATUSES}}),
    ]
}

/// xorshift64*: the same file on every run, without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the generator planted: rows violating each rule (a violating row breaks one rule), and
/// the file's size.
#[derive(Default)]
struct Planted {
    per_rule: [u64; 4],
    violating_rows: u64,
    /// Empty `vibration_z` cells (no rule checks them: nulls in the profile only).
    empty_cells: u64,
    bytes: u64,
}

/// A slow wave plus noise around `base`: how a sensor's readings move.
fn sensor(rng: &mut Rng, row: u64, base: f64, amplitude: f64, period: f64, noise: f64) -> f64 {
    let phase = (row as f64 / period) * std::f64::consts::TAU;
    base + amplitude * phase.sin() + noise * (rng.unit() - 0.5)
}

/// Writes the CSV through a buffer, a row at a time (never held whole).
fn write_csv(path: &Path, rows: u64) -> Result<Planted> {
    let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let header: Vec<&str> = COLUMNS.iter().map(|c| c.0).collect();
    writeln!(w, "{}", header.join(","))?;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut p = Planted::default();
    for i in 0..rows {
        let vib = [
            sensor(&mut rng, i, 2.0, 0.8, 7_200.0, 0.6),
            sensor(&mut rng, i, 1.8, 0.7, 6_100.0, 0.6),
            sensor(&mut rng, i, 1.5, 0.5, 5_300.0, 0.5),
        ];
        let mut motor_t = sensor(&mut rng, i, 70.0, 8.0, 86_400.0, 2.0);
        let bearing_t = sensor(&mut rng, i, 58.0, 6.0, 86_400.0, 1.5);
        let mut pressure = sensor(&mut rng, i, 6.0, 1.0, 3_600.0, 0.4);
        let flow = sensor(&mut rng, i, 200.0, 30.0, 3_600.0, 8.0);
        let current = sensor(&mut rng, i, 40.0, 5.0, 43_200.0, 1.5);
        let mut status = match rng.below(100) {
            0..80 => STATUSES[0],
            80..92 => STATUSES[1],
            92..97 => STATUSES[2],
            _ => STATUSES[3],
        };
        let mut flow_empty = false;
        // About 1% of the rows break one rule each.
        if rng.below(100) == 0 {
            let kind = rng.below(4) as usize;
            match kind {
                0 => motor_t = 130.0 + 50.0 * rng.unit(),
                1 => pressure = -0.5 - rng.unit(),
                2 => flow_empty = true,
                _ => status = UNKNOWN_STATUS,
            }
            p.per_rule[kind] += 1;
            p.violating_rows += 1;
        }
        let vib_z_empty = rng.below(200) == 0;
        p.empty_cells += u64::from(vib_z_empty);
        write!(w, "{:.3},{:.3},", vib[0], vib[1])?;
        if !vib_z_empty {
            write!(w, "{:.3}", vib[2])?;
        }
        write!(w, ",{motor_t:.2},{bearing_t:.2},{pressure:.3},")?;
        if !flow_empty {
            write!(w, "{flow:.2}")?;
        }
        writeln!(w, ",{current:.2},{status},{}", status == STATUSES[0])?;
    }
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    p.bytes = std::fs::metadata(path)?.len();
    Ok(p)
}

/// A request body read from a channel that a thread fills from the file (1 MiB at a time):
/// the upload is streamed from disk, never held whole.
struct FileBody {
    rx: tokio::sync::mpsc::Receiver<std::io::Result<Bytes>>,
    len: u64,
}

impl hyper::body::Body for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, std::io::Error>>> {
        self.get_mut()
            .rx
            .poll_recv(cx)
            .map(|o| o.map(|r| r.map(Frame::data)))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}

/// `POST path` with `file` as the multipart field `file`, streamed from disk on a connection
/// of its own; answers the status and the body.
async fn upload(addr: &str, key: &str, path: &str, file: &Path) -> Result<(u16, Bytes)> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, FileBody>(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let head = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"bench.csv\"\r\n\
         Content-Type: text/csv\r\n\r\n"
    );
    let tail = format!("\r\n--{BOUNDARY}--\r\n");
    let len = head.len() as u64 + std::fs::metadata(file)?.len() + tail.len() as u64;
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(8);
    let file = file.to_path_buf();
    // The reader stops when the request is dropped (the send fails): it is never joined.
    std::thread::spawn(move || {
        let send = |b: std::io::Result<Bytes>| tx.blocking_send(b).is_ok();
        if !send(Ok(Bytes::from(head))) {
            return;
        }
        let mut f = match std::fs::File::open(file) {
            Ok(f) => f,
            Err(e) => {
                send(Err(e));
                return;
            }
        };
        loop {
            let mut buf = vec![0u8; 1 << 20];
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    buf.truncate(n);
                    if !send(Ok(Bytes::from(buf))) {
                        return;
                    }
                }
                Err(e) => {
                    send(Err(e));
                    return;
                }
            }
        }
        send(Ok(Bytes::from(tail)));
    });
    let req = hyper::Request::builder()
        .method("POST")
        .uri(path)
        .header("host", addr)
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", MULTIPART)
        .header("content-length", len)
        .body(FileBody { rx, len })?;
    sender.ready().await?;
    let resp = sender.send_request(req).await?;
    let status = resp.status().as_u16();
    Ok((status, resp.into_body().collect().await?.to_bytes()))
}

/// `GET`/`POST path` without a body; the answer's JSON, or an error naming the status.
async fn call(
    http: &mut hyper::client::conn::http1::SendRequest<http_body_util::Full<Bytes>>,
    addr: &str,
    key: &str,
    method: &'static str,
    path: &str,
) -> Result<Value> {
    let probe = Probe {
        method,
        ..Probe::get(path, key)
    };
    let (status, body) = probe.call(http, addr).await?;
    if status != 200 {
        bail!(
            "{method} {path} answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    Ok(serde_json::from_slice(&body)?)
}

/// A `/proc/<pid>/status` figure (`VmRSS:`, `VmHWM:`) in MiB.
fn proc_mib(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// What the database takes on disk: SQLite's file and WAL, or PostgreSQL's
/// `pg_database_size`.
fn database_bytes(server: &Server, url: Option<&str>) -> Option<u64> {
    match url {
        None => {
            let db = server.dir.join("plantd.db");
            let wal = server.dir.join("plantd.db-wal");
            let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
            std::fs::metadata(&db).ok()?;
            Some(size(&db) + size(&wal))
        }
        Some(url) => {
            let out = Command::new("psql")
                .args([url, "-Atc", "SELECT pg_database_size(current_database())"])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout).trim().parse().ok()
        }
    }
}

/// `1234567.8` -> `1,234,568`.
fn thousands(x: f64) -> String {
    let s = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One step's cell: seconds and rows/s.
fn step(secs: f64, rows: u64) -> String {
    format!("{secs:.2} s, {} rows/s", thousands(rows as f64 / secs))
}

/// Removes the benchmark's directory (the CSV) however the run ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) async fn run(o: &Options) -> Result<()> {
    let rows = o.rows;
    let dir = TempDir(std::env::temp_dir().join(format!("plantd-bench-ml-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0)?;
    let csv = dir.0.join("bench.csv");
    let t = Instant::now();
    let planted = write_csv(&csv, rows)?;
    println!(
        "ml-datasets: {} rows x {} columns, {:.1} MB ({:.1} B/row) written in {:.1} s to {}; {} rows planted with a violation ({:?} per rule), {} empty vibration_z cells; {} cores",
        thousands(rows as f64),
        COLUMNS.len(),
        planted.bytes as f64 / 1e6,
        planted.bytes as f64 / rows.max(1) as f64,
        t.elapsed().as_secs_f64(),
        csv.display(),
        thousands(planted.violating_rows as f64),
        planted.per_rule,
        thousands(planted.empty_cells as f64),
        crate::harness::cores()
    );
    let mut table = Vec::new();
    for (backend, url) in backends(o) {
        let r = plantd_row(o, &csv, &planted, backend, url.as_deref()).await;
        drop_database(url.as_deref(), o.postgres_url.as_deref());
        table.push(r?);
    }
    // The reference runs after the servers have stopped: the cores are its alone, as they
    // were plantd's.
    let reference = pandas_row(&csv, rows, &planted);
    println!();
    println!(
        "| system | load (upload / read_csv) | validate, 4 rules | profile (quality / describe) | peak memory | size per row |"
    );
    println!("|---|---|---|---|---|---|");
    for r in table {
        println!("{r}");
    }
    println!("{reference}");
    Ok(())
}

async fn plantd_row(
    o: &Options,
    csv: &Path,
    planted: &Planted,
    backend: &str,
    url: Option<&str>,
) -> Result<String> {
    let rows = o.rows;
    let (server, key) = start_server(o, url)?;
    let addr = server.addr.clone();
    let pid = server.child.id();
    let mut http = connect(&addr).await?;
    let rss_start = proc_mib(pid, "VmRSS:").unwrap_or(f64::NAN);
    let columns: Vec<Value> = COLUMNS
        .iter()
        .map(|(name, t)| json!({"name": name, "type": t}))
        .collect();
    let created = post_json(
        &mut http,
        &addr,
        "/v1/ml/datasets",
        &key,
        &json!({"name": "bench", "description": "plantd-bench ml-datasets", "columns": columns}),
        201,
    )
    .await?;
    let id = created["data"]["id"]
        .as_str()
        .context("dataset id")?
        .to_string();
    let db_before = database_bytes(&server, url);

    // Upload: streamed from disk; answered once every row is checked and committed.
    let cpu = cpu_seconds(pid).unwrap_or(f64::NAN);
    let t = Instant::now();
    let (status, body) = upload(&addr, &key, &format!("/v1/ml/datasets/{id}/upload"), csv).await?;
    let upload_s = t.elapsed().as_secs_f64();
    let upload_cpu = cpu_seconds(pid).unwrap_or(f64::NAN) - cpu;
    if !(200..300).contains(&status) {
        bail!(
            "upload answered {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(2000)])
        );
    }
    let dataset: Value = serde_json::from_slice(&body)?;
    if dataset["data"]["row_count"].as_u64() != Some(rows) {
        bail!(
            "the upload stored {} rows, not {rows}",
            dataset["data"]["row_count"]
        );
    }
    let hwm_upload = proc_mib(pid, "VmHWM:").unwrap_or(f64::NAN);
    let db_after = database_bytes(&server, url);
    println!(
        "{backend}: upload {} ({:.1} MB/s), server CPU {upload_cpu:.1} s, VmHWM {hwm_upload:.0} MiB",
        step(upload_s, rows),
        planted.bytes as f64 / 1e6 / upload_s
    );

    let mut rule_names = Vec::new();
    for rule in rules() {
        post_json(
            &mut http,
            &addr,
            &format!("/v1/ml/datasets/{id}/validation-rules"),
            &key,
            &rule,
            201,
        )
        .await?;
        rule_names.push(rule["name"].as_str().unwrap_or_default().to_string());
    }
    let cpu = cpu_seconds(pid).unwrap_or(f64::NAN);
    let t = Instant::now();
    let result = call(
        &mut http,
        &addr,
        &key,
        "POST",
        &format!("/v1/ml/datasets/{id}/validate"),
    )
    .await?;
    let validate_s = t.elapsed().as_secs_f64();
    let validate_cpu = cpu_seconds(pid).unwrap_or(f64::NAN) - cpu;
    let hwm_validate = proc_mib(pid, "VmHWM:").unwrap_or(f64::NAN);
    let result = &result["data"];
    let found: Vec<u64> = rule_names
        .iter()
        .map(|name| {
            result["issues"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|i| i["rule_name"] == name.as_str())
                .and_then(|i| i["violations"].as_u64())
                .unwrap_or(0)
        })
        .collect();
    let expected_score =
        (1000.0 * (rows - planted.violating_rows) as f64 / rows.max(1) as f64).round() / 10.0;
    println!(
        "{backend}: validate {}, server CPU {validate_cpu:.1} s, VmHWM {hwm_validate:.0} MiB; violations per rule {found:?} (planted {:?}), quality_score {} grade {} (expected {expected_score})",
        step(validate_s, rows),
        planted.per_rule,
        result["quality_score"],
        result["grade"]
    );
    if found != planted.per_rule {
        println!("{backend}: WARNING: plantd's violations differ from the planted ones");
    }

    let cpu = cpu_seconds(pid).unwrap_or(f64::NAN);
    let t = Instant::now();
    let quality = call(
        &mut http,
        &addr,
        &key,
        "GET",
        &format!("/v1/ml/datasets/{id}/quality"),
    )
    .await?;
    let quality_s = t.elapsed().as_secs_f64();
    let quality_cpu = cpu_seconds(pid).unwrap_or(f64::NAN) - cpu;
    let hwm = proc_mib(pid, "VmHWM:").unwrap_or(f64::NAN);
    let profiled: Vec<String> = quality["data"]["columns"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{} {}/{}/{}",
                c["name"].as_str().unwrap_or("?"),
                c["count"],
                c["nulls"],
                c["distinct"]
            )
        })
        .collect();
    println!(
        "{backend}: quality {}, server CPU {quality_cpu:.1} s, VmHWM {hwm:.0} MiB; count/nulls/distinct: {}",
        step(quality_s, rows),
        profiled.join(", ")
    );

    // One preview page at the start and one in the middle (single requests: 60 a minute).
    let mut preview_ms = Vec::new();
    for page in [1, (rows / 200).max(1)] {
        let t = Instant::now();
        call(
            &mut http,
            &addr,
            &key,
            "GET",
            &format!("/v1/ml/datasets/{id}/preview?page={page}&per_page=100"),
        )
        .await?;
        preview_ms.push(format!(
            "page {page} {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        ));
    }
    let record = call(
        &mut http,
        &addr,
        &key,
        "GET",
        &format!("/v1/ml/datasets/{id}"),
    )
    .await?;
    let size_bytes = record["data"]["size_bytes"].as_u64().unwrap_or(0);
    let per_row = |b: f64| b / rows.max(1) as f64;
    let on_disk = match (db_before, db_after) {
        (Some(a), Some(b)) => format!(
            "; database +{:.1} B ({})",
            per_row(b as f64 - a as f64),
            if url.is_none() {
                "file and WAL"
            } else {
                "pg_database_size"
            }
        ),
        _ => String::new(),
    };
    println!(
        "{backend}: preview {}; size_bytes {} ({:.1} B/row, CSV {:.1} B/row){on_disk}",
        preview_ms.join(", "),
        thousands(size_bytes as f64),
        per_row(size_bytes as f64),
        per_row(planted.bytes as f64)
    );
    drop(server);
    Ok(format!(
        "| plantd on {backend} | upload {} ({:.1} MB/s) | {} | {} | {hwm:.0} MiB (VmHWM; {rss_start:.0} MiB at start) | {:.1} B stored (`size_bytes`){on_disk} |",
        step(upload_s, rows),
        planted.bytes as f64 / 1e6 / upload_s,
        step(validate_s, rows),
        step(quality_s, rows),
        per_row(size_bytes as f64)
    ))
}

/// The reference: pandas on the same file, in its own python3 process. `argv`: the CSV and the
/// rules (JSON). Prints one JSON line.
const PANDAS: &str = r#"
import json, resource, sys, time

def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

try:
    import pandas as pd
except ImportError as e:
    print(json.dumps({"skipped": "pandas is not installed (%s)" % e}))
    sys.exit(0)
path, rules = sys.argv[1], json.loads(sys.argv[2])
out = {"pandas": pd.__version__, "python": sys.version.split()[0], "import_mib": peak_mib()}
t = time.perf_counter()
df = pd.read_csv(path)
out["read_s"] = time.perf_counter() - t
out["rows"] = len(df)
out["after_read_mib"] = peak_mib()
t = time.perf_counter()
df.describe(include="all")
out["describe_s"] = time.perf_counter() - t
t = time.perf_counter()
df.nunique()
out["nunique_s"] = time.perf_counter() - t
t = time.perf_counter()
bad = pd.Series(False, index=df.index)
counts = []
for r in rules:
    col, cfg = df[r["column"]], r.get("config") or {}
    if r["rule_type"] == "range":
        m = pd.Series(False, index=df.index)
        if "min" in cfg:
            m |= col < cfg["min"]
        if "max" in cfg:
            m |= col > cfg["max"]
    elif r["rule_type"] == "not_null":
        m = col.isna()
    elif r["rule_type"] == "allowed_values":
        m = col.notna() & ~col.isin(cfg["values"])
    else:
        raise SystemExit("rule type %s is not in the reference" % r["rule_type"])
    counts.append(int(m.sum()))
    bad |= m
out["violating_rows"] = int(bad.sum())
out["validate_s"] = time.perf_counter() - t
out["violations"] = counts
out["memory_bytes"] = int(df.memory_usage(deep=True).sum())
out["peak_mib"] = peak_mib()
print(json.dumps(out))
"#;

/// pandas' row of the table, or a row saying why it was skipped.
fn pandas_row(csv: &Path, rows: u64, planted: &Planted) -> String {
    let rules = Value::Array(rules()).to_string();
    let out = Command::new("python3")
        .arg("-c")
        .arg(PANDAS)
        .arg(csv)
        .arg(rules)
        .output();
    let skipped = |why: &str| {
        println!("reference skipped: {why}");
        format!("| pandas | skipped: {why} | – | – | – | – |")
    };
    let out = match out {
        Ok(out) if out.status.success() => out,
        Ok(out) => {
            return skipped(&format!(
                "python3 failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Err(e) => return skipped(&format!("cannot run python3: {e}")),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(v) = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
    else {
        return skipped(&format!("unexpected output: {stdout}"));
    };
    if let Some(why) = v["skipped"].as_str() {
        return skipped(why);
    }
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let read_rows = v["rows"].as_u64().unwrap_or(0);
    if read_rows != rows {
        println!("reference: WARNING: pandas read {read_rows} rows, not {rows}");
    }
    println!(
        "pandas {} (python {}): read_csv {}, describe(include='all') {}, nunique {:.2} s, rule masks {}; violations per rule {} (planted {:?}), peak RSS {:.0} MiB ({:.0} MiB after import, {:.0} MiB after read_csv)",
        v["pandas"].as_str().unwrap_or("?"),
        v["python"].as_str().unwrap_or("?"),
        step(f("read_s"), rows),
        step(f("describe_s"), rows),
        f("nunique_s"),
        step(f("validate_s"), rows),
        v["violations"],
        planted.per_rule,
        f("peak_mib"),
        f("import_mib"),
        f("after_read_mib")
    );
    format!(
        "| pandas {} read_csv, describe(include='all'), boolean masks | read_csv {} ({:.1} MB/s) | {} | {} (nunique besides: {:.2} s) | {:.0} MiB (ru_maxrss; {:.0} MiB after import) | {:.1} B in memory (`memory_usage(deep=True)`) |",
        v["pandas"].as_str().unwrap_or("?"),
        step(f("read_s"), rows),
        planted.bytes as f64 / 1e6 / f("read_s"),
        step(f("validate_s"), rows),
        step(f("describe_s"), rows),
        f("nunique_s"),
        f("peak_mib"),
        f("import_mib"),
        f("memory_bytes") / rows.max(1) as f64
    )
}
