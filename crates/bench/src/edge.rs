//! `plantd-bench edge`: the edge agent (`plantd edge`, SQLite, the edge retention) with 1,000
//! tags against the SPEC's smallest box (Hub Pro: 256 MiB for the agent, 7 days of raw points
//! in 2 GB). First an hour of those tags at 1 Hz sent in order as fast as the agent takes it
//! (a backfill of a closed hour: what a connector's scans of an hour hold, one point per tag
//! per batch), then `--duration` seconds live at 1 Hz (1,000 points a second, each second's
//! batch at its time) while its memory is sampled; then a graceful stop and the data
//! directory's size. The disk a week takes is what the closed hour takes once sealed (as every
//! hour but the current one is on an agent that has run a week), measured by table before the
//! live seconds. Prints each figure beside its budget.

use anyhow::{Result, bail};
use hyper::body::Bytes;
use std::time::{Duration, Instant};

use crate::harness::{Options, connect, spawn_command};
use crate::sim::{rss_mib, status_mib};
use crate::telemetry::{create_keys, now_ms, post, rfc3339};

/// Tags of the agent (10 assets of 100 tags).
pub(crate) const TAGS: usize = 1_000;
pub(crate) const ASSETS: usize = 10;
/// Seconds of the backfill (one hour).
pub(crate) const BACKFILL_SECS: i64 = 3_600;
/// The Hub Pro's budget for the agent.
const MEMORY_BUDGET_MIB: f64 = 256.0;
const DISK_BUDGET_GB: f64 = 2.0;

/// One scan of every tag at `ts` (ms): a batch of 1,000 points.
pub(crate) fn scan(ts: i64, k: i64) -> Bytes {
    let at = rfc3339(ts);
    let mut s = String::with_capacity(TAGS * 90);
    s.push_str("{\"data\":[");
    for i in 0..TAGS {
        if i > 0 {
            s.push(',');
        }
        // A value that moves as a sensor's does: a slow wave per tag with a little noise.
        let v = 50.0
            + 20.0 * ((k as f64 / 60.0) + i as f64).sin()
            + ((k * 7 + i as i64) % 13) as f64 / 100.0;
        s.push_str(&format!(
            "{{\"asset_id\":\"Asset_{:02}\",\"tag_name\":\"Tag_{:03}\",\"value\":{v:.3},\"timestamp\":\"{at}\"}}",
            i / (TAGS / ASSETS),
            i % (TAGS / ASSETS)
        ));
    }
    s.push_str("]}");
    Bytes::from(s)
}

/// An hour of scans from `start` (ms), oldest first, on 2 connections, as fast as the agent
/// at `addr` takes them; the seconds it took.
pub(crate) async fn send_hour(addr: &str, keys: &[String], start: i64) -> Result<f64> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..2i64 {
        let (addr, keys) = (addr.to_string(), keys.to_vec());
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&addr).await?;
            let mut k = c;
            while k < BACKFILL_SECS {
                let key = &keys[(k as usize / 2) % keys.len()];
                let status = post(&mut sender, &addr, key, scan(start + k * 1000, k)).await?;
                if status != 200 {
                    bail!("ingest answered {status}");
                }
                k += 2;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(started.elapsed().as_secs_f64())
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_bytes(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

/// A read-only connection to the agent's SQLite database (beside the running agent, or after).
async fn read_only(db: &std::path::Path) -> Result<sqlx::SqliteConnection> {
    let url = format!("sqlite://{}?mode=ro", db.display());
    Ok(<sqlx::SqliteConnection as sqlx::Connection>::connect(&url).await?)
}

/// What a SQLite database's pages in use hold: its file less its free pages (what the
/// telemetry log freed once flushed, which SQLite reuses for the next points), and the bytes of
/// each table with its indexes (SQLite's `dbstat`), largest first.
async fn pages_in_use(db: &std::path::Path) -> Result<(u64, Vec<(String, u64)>)> {
    use sqlx::Row;
    let mut conn = read_only(db).await?;
    let mut read = async |pragma: &str| -> Result<i64> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!("PRAGMA {pragma}")))
            .fetch_one(&mut conn)
            .await?;
        Ok(row.try_get(0)?)
    };
    let (size, count, free) = (
        read("page_size").await?,
        read("page_count").await?,
        read("freelist_count").await?,
    );
    let rows = sqlx::query(
        "SELECT COALESCE(m.tbl_name, d.name) AS t, CAST(SUM(d.pgsize) AS INTEGER) AS b \
         FROM dbstat d LEFT JOIN sqlite_schema m ON m.name = d.name GROUP BY t ORDER BY b DESC",
    )
    .fetch_all(&mut conn)
    .await?;
    let tables = rows
        .iter()
        .map(|r| {
            Ok((
                r.try_get::<String, _>("t")?,
                r.try_get::<i64, _>("b")? as u64,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(((size * (count - free)) as u64, tables))
}

/// Waits (at most 120 s) until the agent's store at `db` holds no head block and no minute
/// rollup row: every window sealed, every hour's minutes packed. The seconds it took.
async fn wait_sealed(db: &std::path::Path) -> Result<f64> {
    use sqlx::Row;
    let started = Instant::now();
    loop {
        let mut conn = read_only(db).await?;
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM telemetry_block WHERE sealed = 0) \
             + (SELECT COUNT(*) FROM telemetry_rollup WHERE level = 1) AS n",
        )
        .fetch_one(&mut conn)
        .await?;
        if row.try_get::<i64, _>("n")? == 0 {
            return Ok(started.elapsed().as_secs_f64());
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("the hour was not sealed within 120 s");
        }
        drop(conn);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The tables a connector's readings land in: what grows with the points an agent keeps.
fn telemetry_table(name: &str) -> bool {
    name.starts_with("telemetry_")
}

pub(crate) async fn run(o: &Options) -> Result<()> {
    let mut server = spawn_command(o, "edge", None, &["--mode", "production"])?;
    // Keys enough that SPEC 8.5's 1,000 ingest requests a minute per key do not bind (a
    // connector's scans do not go through the API; this benchmark stands in for them).
    let keys = create_keys(o, &server, 8)?;
    let key = keys[0].clone();
    let pid = server.child.id();
    let addr = server.addr.clone();
    println!(
        "edge agent: {TAGS} tags ({ASSETS} assets), SQLite, durable acks; {}",
        o.plantd_path.display()
    );

    // The hour before the last whole one: closed (and so sealed, its minute rollups packed) by
    // the end of the run, as every hour but the current one is on an agent that has run a
    // week. The live seconds land in the open hour.
    let hour = BACKFILL_SECS * 1000;
    let start = (now_ms() / hour - 2) * hour;
    let backfill_secs = send_hour(&addr, &keys, start).await?;
    let backfilled = BACKFILL_SECS as f64 * TAGS as f64;
    let after_backfill = rss_mib(pid)?;
    // The hour as a week's hours are kept: its blocks sealed and its minutes packed by the
    // sealer's pass once ingest paused. Its bytes a point are what 7 days take.
    let db = server.dir.join("plantd.db");
    let sealed_in = wait_sealed(&db).await?;
    let (hour_in_use, hour_tables) = pages_in_use(&db).await?;

    // Live: one scan a second at its time.
    let mut sender = connect(&addr).await?;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut live_max: f64 = 0.0;
    let seconds = o.duration.as_secs().max(1) as i64;
    for k in 0..seconds {
        tick.tick().await;
        let status = post(&mut sender, &addr, &key, scan(now_ms(), BACKFILL_SECS + k)).await?;
        if status != 200 {
            bail!("live ingest answered {status}");
        }
        live_max = live_max.max(rss_mib(pid)?);
    }
    let peak = status_mib(pid, "VmHWM")?;
    let points = backfilled + (seconds as f64) * TAGS as f64;
    let dir = server.dir.clone();
    // A graceful stop (the store closed, its log checkpointed), then the directory's size
    // (the server's drop removes the directory).
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = server.child.wait();
    let bytes = dir_bytes(&dir);
    let (in_use, _) = pages_in_use(&dir.join("plantd.db")).await?;
    let telemetry: u64 = hour_tables
        .iter()
        .filter(|(t, _)| telemetry_table(t))
        .map(|(_, b)| b)
        .sum();
    // PLANTD_BENCH_KEEP: keep a copy of the data directory to look into.
    if let Ok(keep) = std::env::var("PLANTD_BENCH_KEEP") {
        let _ = std::process::Command::new("cp")
            .args(["-r", &dir.display().to_string(), &keep])
            .status();
    }

    let per_point = bytes as f64 / points;
    let used_per_point = in_use as f64 / points;
    let week = |per_point: f64| per_point * TAGS as f64 * 86_400.0 * 7.0 / 1e9;
    println!();
    println!("{:<58} {:>12} {:>12}", "figure", "plantd edge", "budget");
    println!(
        "{:<58} {:>12.0} {:>12}",
        "backfill: an hour of 1,000 tags stored, points/s",
        backfilled / backfill_secs,
        "-"
    );
    println!(
        "{:<58} {:>12.1} {:>12.0}",
        "memory after the backfill, RSS MiB", after_backfill, MEMORY_BUDGET_MIB
    );
    println!(
        "{:<58} {:>12.1} {:>12.0}",
        format!("memory live at 1 Hz ({seconds} s), highest RSS MiB"),
        live_max,
        MEMORY_BUDGET_MIB
    );
    println!(
        "{:<58} {:>12.1} {:>12.0}",
        "memory, peak of the whole run (VmHWM) MiB", peak, MEMORY_BUDGET_MIB
    );
    println!(
        "{:<58} {:>12.2} {:>12}",
        format!("disk after a graceful stop, bytes a point ({points:.0} points)"),
        per_point,
        "-"
    );
    println!(
        "{:<58} {:>12.2} {:>12}",
        "  of which in use (pages not free), bytes a point", used_per_point, "-"
    );
    println!(
        "{:<58} {:>12.2} {:>12}",
        format!("the hour, sealed ({sealed_in:.0} s after it), in use, bytes a point"),
        hour_in_use as f64 / backfilled,
        "-"
    );
    println!(
        "{:<58} {:>12.2} {:>12}",
        "  of which the telemetry tables, bytes a point",
        telemetry as f64 / backfilled,
        "-"
    );
    println!(
        "{:<58} {:>12.2} {:>12.1}",
        "7 days of 1,000 tags at 1 Hz, telemetry tables, GB",
        week(telemetry as f64 / backfilled),
        DISK_BUDGET_GB
    );
    println!(
        "{:<58} {:>12.2} {:>12.1}",
        "7 days, all tables (with the API's audit rows), GB",
        week(hour_in_use as f64 / backfilled),
        DISK_BUDGET_GB
    );
    println!();
    println!("the sealed hour's pages in use by table (with its indexes):");
    for (t, b) in hour_tables.iter().filter(|(_, b)| *b >= 64 * 1024) {
        println!(
            "  {t:<40} {:>10.1} MB {:>8.3} B/point",
            *b as f64 / 1e6,
            *b as f64 / backfilled
        );
    }
    Ok(())
}
