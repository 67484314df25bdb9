//! The copy of an organization's resident data between regions (issue 33), both ends: the
//! source publishes the resident tables' rows, the telemetry points (read through the telemetry
//! engine) and the OTA package files to the deployment's migration stream on NATS JetStream
//! (`PLANTD_<deployment>_MIGRATION`, subject `plantd.<deployment>.migration.<id>.data`), ending
//! with the count and checksum of each; the target, asked over NATS, reads the subject, writes
//! what it holds, counts and checksums what it now stores the same way and answers with its
//! figures, which the source compares with its own.
//!
//! Points a platform connector reads while the read-only window is open are published to
//! `plantd.<deployment>.migration.<id>.held`; the target writes them after the switch.

use async_nats::jetstream;
use futures_util::StreamExt;
use plantd_model::Timestamp;
use plantd_model::telemetry::{Point, Quality};
use plantd_store::{Cell, RESIDENT_TABLES, TableRows};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::replication::safe_name;

/// Rows read per page of a resident table.
const PAGE_ROWS: i64 = 500;
/// Points of one series per piece.
const PIECE_POINTS: usize = 10_000;
/// Bytes of an OTA package file per piece.
const FILE_PIECE: usize = 256 * 1024;
/// A piece is split while its JSON is larger than this (NATS' default maximum payload is 1 MiB).
const PIECE_BYTES: usize = 512 * 1024;
/// Publications awaiting their acknowledgement at once.
const IN_FLIGHT: usize = 64;
/// The target gives up on a copy when no piece arrives for this long.
const IDLE_LIMIT: Duration = Duration::from_secs(60);
/// Later than any point (the year 5000).
const END_OF_TIME: i64 = 95_617_584_000_000;
/// Points the target writes per telemetry batch.
const WRITE_POINTS: usize = 50_000;

pub(crate) fn stream_name(deployment: &str) -> String {
    format!("PLANTD_{}_MIGRATION", safe_name(deployment))
}

pub(crate) fn data_subject(deployment: &str, id: &str) -> String {
    format!("plantd.{}.migration.{id}.data", safe_name(deployment))
}

pub(crate) fn held_subject(deployment: &str, id: &str) -> String {
    format!("plantd.{}.migration.{id}.held", safe_name(deployment))
}

/// The stream of the deployment's migrations (created when missing; a migration's messages
/// are purged once it ended, and none outlives a week).
pub(crate) async fn migration_stream(
    js: &jetstream::Context,
    deployment: &str,
) -> Result<jetstream::stream::Stream, String> {
    js.get_or_create_stream(jetstream::stream::Config {
        name: stream_name(deployment),
        subjects: vec![format!("plantd.{}.migration.>", safe_name(deployment))],
        storage: jetstream::stream::StorageType::File,
        max_age: Duration::from_secs(7 * 24 * 3600),
        ..Default::default()
    })
    .await
    .map_err(|e| format!("migration stream: {e}"))
}

/// One message of a copy.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "piece", rename_all = "snake_case")]
pub(crate) enum Piece {
    Rows(TableRows),
    Points(PointsPiece),
    File {
        sha256: String,
        offset: u64,
        data: String,
        last: bool,
    },
    End {
        sums: Sums,
    },
}

/// Points of one series (`quality` as codes).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct PointsPiece {
    pub asset_id: String,
    pub tag_name: String,
    pub data_source_id: Option<String>,
    pub ts: Vec<i64>,
    pub values: Vec<f64>,
    pub quality: Vec<i16>,
}

impl PointsPiece {
    fn into_points(self) -> Vec<Point> {
        let mut out = Vec::with_capacity(self.ts.len());
        for ((ts, value), q) in self.ts.iter().zip(&self.values).zip(&self.quality) {
            out.push(Point {
                asset_id: self.asset_id.clone(),
                tag_name: self.tag_name.clone(),
                value: *value,
                timestamp: Timestamp::from_millis(*ts),
                quality: Quality::from_code(*q as i64),
                data_source_id: self.data_source_id.clone(),
            });
        }
        out
    }

    /// Points grouped by series, as a connector's batch may mix them.
    pub(crate) fn of_points(points: &[Point]) -> Vec<PointsPiece> {
        let mut by_series: BTreeMap<(&str, &str), PointsPiece> = BTreeMap::new();
        for p in points {
            let piece = by_series
                .entry((&p.asset_id, &p.tag_name))
                .or_insert_with(|| PointsPiece {
                    asset_id: p.asset_id.clone(),
                    tag_name: p.tag_name.clone(),
                    data_source_id: p.data_source_id.clone(),
                    ..Default::default()
                });
            piece.ts.push(p.timestamp.millis());
            piece.values.push(p.value);
            piece.quality.push(p.quality.code());
        }
        by_series.into_values().collect()
    }
}

/// A count and an order-free checksum (the wrapping sum of each item's SHA-256 prefix).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Sum {
    pub count: u64,
    pub checksum: u64,
}

impl Sum {
    fn add(&mut self, hasher: Sha256) {
        let digest = hasher.finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        self.count += 1;
        self.checksum = self.checksum.wrapping_add(u64::from_le_bytes(first));
    }
}

/// What a copy holds: each resident table's rows, the points, the package files.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Sums {
    pub tables: BTreeMap<String, Sum>,
    pub points: Sum,
    pub files: Sum,
}

/// Tables the target also writes for an organization it does not serve (the usage counts and
/// audit records of the requests it redirects): a copy must have added every row sent, so the
/// target holds at least as many; their checksums cannot match.
const MERGED_TABLES: [&str; 2] = ["api_key_usage", "audit_logs"];

impl Sums {
    /// The record of a secondary copy holding these figures (`role` `sent` or `held`; `region`
    /// the other end; `copied_at` when it was taken, ms).
    pub(crate) fn standby_copy(
        &self,
        org_id: &str,
        role: &str,
        region: &str,
        copied_at: i64,
    ) -> plantd_store::StandbyCopy {
        plantd_store::StandbyCopy {
            org_id: org_id.to_string(),
            role: role.to_string(),
            region: region.to_string(),
            copied_at: Timestamp::from_millis(copied_at),
            points: self.points.count as i64,
            rows: self.tables.values().map(|s| s.count as i64).sum(),
        }
    }

    /// The first difference between the source's figures and the target's, named.
    pub(crate) fn difference(&self, target: &Sums) -> Option<String> {
        for (table, sum) in &self.tables {
            let theirs = target.tables.get(table).copied().unwrap_or_default();
            if MERGED_TABLES.contains(&table.as_str()) {
                if theirs.count < sum.count {
                    return Some(format!(
                        "table {table}: {} rows sent, {} stored",
                        sum.count, theirs.count
                    ));
                }
                continue;
            }
            if *sum != theirs {
                return Some(format!(
                    "table {table}: {} rows sent, {} stored (checksums {:016x} and {:016x})",
                    sum.count, theirs.count, sum.checksum, theirs.checksum
                ));
            }
        }
        if self.points != target.points {
            return Some(format!(
                "telemetry: {} points sent, {} stored (checksums {:016x} and {:016x})",
                self.points.count,
                target.points.count,
                self.points.checksum,
                target.points.checksum
            ));
        }
        if self.files != target.files {
            return Some(format!(
                "OTA package files: {} sent, {} stored",
                self.files.count, target.files.count
            ));
        }
        None
    }
}

fn row_hash(row: &[Cell]) -> Sha256 {
    let mut h = Sha256::new();
    for c in row {
        match c {
            Cell::Null => h.update([0]),
            Cell::Int(v) => {
                h.update([1]);
                h.update(v.to_le_bytes());
            }
            Cell::Real(v) => {
                h.update([2]);
                h.update(v.to_bits().to_le_bytes());
            }
            Cell::Text(s) => {
                h.update([3]);
                h.update((s.len() as u64).to_le_bytes());
                h.update(s.as_bytes());
            }
            Cell::Blob(b) => {
                h.update([4]);
                h.update((b.len() as u64).to_le_bytes());
                h.update(b);
            }
        }
    }
    h
}

fn point_hash(asset: &str, tag: &str, ts: i64, value: f64, quality: i16) -> Sha256 {
    let mut h = Sha256::new();
    h.update((asset.len() as u64).to_le_bytes());
    h.update(asset.as_bytes());
    h.update((tag.len() as u64).to_le_bytes());
    h.update(tag.as_bytes());
    h.update(ts.to_le_bytes());
    h.update(value.to_bits().to_le_bytes());
    h.update(quality.to_le_bytes());
    h
}

/// Publishes pieces on one subject, a few acknowledgements in flight.
pub(crate) struct Publisher {
    js: jetstream::Context,
    subject: String,
    max_payload: usize,
    acks: Vec<jetstream::context::PublishAckFuture>,
    pub(crate) bytes: u64,
}

impl Publisher {
    pub(crate) fn new(js: jetstream::Context, subject: String) -> Self {
        let max_payload = js.client().server_info().max_payload.max(64 * 1024);
        Self {
            js,
            subject,
            max_payload,
            acks: Vec::new(),
            bytes: 0,
        }
    }

    async fn send(&mut self, payload: Vec<u8>) -> Result<(), String> {
        if payload.len() > self.max_payload {
            return Err(format!(
                "a piece of {} bytes is over the NATS server's max_payload of {} bytes",
                payload.len(),
                self.max_payload
            ));
        }
        self.bytes += payload.len() as u64;
        let ack = self
            .js
            .publish(self.subject.clone(), payload.into())
            .await
            .map_err(|e| format!("publish: {e}"))?;
        self.acks.push(ack);
        if self.acks.len() >= IN_FLIGHT {
            self.flush().await?;
        }
        Ok(())
    }

    /// Waits until JetStream has stored every piece sent.
    pub(crate) async fn flush(&mut self) -> Result<(), String> {
        for ack in self.acks.drain(..) {
            ack.await
                .map_err(|e| format!("publish acknowledgement: {e}"))?;
        }
        Ok(())
    }

    pub(crate) async fn piece(&mut self, piece: &Piece) -> Result<(), String> {
        let payload = serde_json::to_vec(piece).map_err(|e| e.to_string())?;
        if payload.len() > PIECE_BYTES
            && let Piece::Rows(rows) = piece
            && rows.rows.len() > 1
        {
            let (a, b) = rows.rows.split_at(rows.rows.len() / 2);
            for half in [a, b] {
                let part = Piece::Rows(TableRows {
                    table: rows.table.clone(),
                    columns: rows.columns.clone(),
                    rows: half.to_vec(),
                });
                Box::pin(self.piece(&part)).await?;
            }
            return Ok(());
        }
        self.send(payload).await
    }
}

/// Reads the organization's resident data as a copy holds it, publishing it when `out` is
/// given; returns its figures. `progress` hears the share done (0.0 to 1.0).
pub(crate) async fn read_org(
    app: &App,
    org_id: &str,
    mut out: Option<&mut Publisher>,
    progress: &mut (dyn FnMut(f64) + Send),
) -> Result<Sums, String> {
    let mut sums = Sums::default();
    // The OTA package files, named by the packages' rows as they pass.
    let mut package_files = std::collections::BTreeSet::new();
    for (i, t) in RESIDENT_TABLES.iter().enumerate() {
        let mut sum = Sum::default();
        let mut offset = 0;
        loop {
            let page = app
                .store()
                .resident_rows(t.name, org_id, offset, PAGE_ROWS)
                .await
                .map_err(|e| plantd_model::error_chain(&e))?;
            let n = page.rows.len() as i64;
            let sha_column = (t.name == "ota_packages")
                .then(|| page.columns.iter().position(|c| c == "sha256"))
                .flatten();
            for row in &page.rows {
                sum.add(row_hash(row));
                if let Some(Cell::Text(sha)) = sha_column.and_then(|c| row.get(c)) {
                    package_files.insert(sha.clone());
                }
            }
            if let Some(p) = out.as_deref_mut()
                && n > 0
            {
                p.piece(&Piece::Rows(page)).await?;
            }
            if n < PAGE_ROWS {
                break;
            }
            offset += n;
        }
        sums.tables.insert(t.name.to_string(), sum);
        progress(0.2 * (i + 1) as f64 / RESIDENT_TABLES.len() as f64);
    }
    let all = plantd_tsdb::TelemetryFilter {
        data_source_id: None,
        asset_id: None,
        tag_name: None,
        start: Timestamp::from_millis(0),
        end: Timestamp::from_millis(END_OF_TIME),
    };
    let series = app
        .tsdb()
        .series_of(org_id, &all, &[])
        .await
        .map_err(|e| plantd_model::error_chain(&e))?;
    let sources: std::collections::HashMap<(String, String), Option<String>> = app
        .tsdb()
        .series_sources(org_id)
        .await
        .map_err(|e| plantd_model::error_chain(&e))?
        .into_iter()
        .map(|(asset, tag, source)| ((asset, tag), source))
        .collect();
    let n_series = series.len().max(1);
    for (i, (id, asset, tag)) in series.iter().enumerate() {
        // Timestamps are never negative; the end is far beyond any accepted point.
        let mut after = -1;
        loop {
            let points = app
                .tsdb()
                .raw_of_series(*id, after, END_OF_TIME, PIECE_POINTS as i64)
                .await
                .map_err(|e| plantd_model::error_chain(&e))?;
            let Some(last) = points.last() else { break };
            after = last.0;
            let full = points.len() == PIECE_POINTS;
            let mut piece = PointsPiece {
                asset_id: asset.clone(),
                tag_name: tag.clone(),
                data_source_id: sources
                    .get(&(asset.clone(), tag.clone()))
                    .cloned()
                    .flatten(),
                ..Default::default()
            };
            for (ts, v, q) in points {
                sums.points.add(point_hash(asset, tag, ts, v, q.code()));
                piece.ts.push(ts);
                piece.values.push(v);
                piece.quality.push(q.code());
            }
            if let Some(p) = out.as_deref_mut() {
                p.piece(&Piece::Points(piece)).await?;
            }
            if !full {
                break;
            }
        }
        progress(0.2 + 0.6 * (i + 1) as f64 / n_series as f64);
    }
    for sha in package_files {
        let path = crate::ota_packages::blob_path(&app.config().ota_dir, &sha);
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(|e| format!("OTA package file {}: {e}", path.display()))?;
        let mut h = Sha256::new();
        h.update(sha.as_bytes());
        h.update(&bytes);
        sums.files.add(h);
        if let Some(p) = out.as_deref_mut() {
            let mut offset = 0;
            let pieces = bytes.chunks(FILE_PIECE).count().max(1);
            for (k, chunk) in bytes
                .chunks(FILE_PIECE)
                .chain(
                    // An empty file still travels (one empty piece).
                    bytes.is_empty().then_some(&[][..]),
                )
                .enumerate()
            {
                use base64::Engine;
                p.piece(&Piece::File {
                    sha256: sha.clone(),
                    offset,
                    data: base64::engine::general_purpose::STANDARD.encode(chunk),
                    last: k + 1 == pieces,
                })
                .await?;
                offset += chunk.len() as u64;
            }
        }
    }
    progress(0.85);
    Ok(sums)
}

/// The target's side of a copy: reads the migration's data subject to its end, writes every
/// piece, then answers with the figures of what it now stores.
pub(crate) async fn receive(
    app: &App,
    js: &jetstream::Context,
    migration_id: &str,
    org_id: &str,
) -> Result<Sums, String> {
    let deployment = &app.region_settings().deployment;
    let stream = migration_stream(js, deployment).await?;
    let consumer = stream
        .create_consumer(jetstream::consumer::pull::OrderedConfig {
            filter_subject: data_subject(deployment, migration_id),
            deliver_policy: jetstream::consumer::DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .map_err(|e| format!("migration consumer: {e}"))?;
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| format!("migration consumer: {e}"))?;
    let mut batch: Vec<Point> = Vec::new();
    let mut file: Option<(String, Vec<u8>)> = None;
    loop {
        let next = tokio::time::timeout(IDLE_LIMIT, messages.next())
            .await
            .map_err(|_| format!("no piece of the copy for {} s", IDLE_LIMIT.as_secs()))?;
        let m = match next {
            Some(m) => m.map_err(|e| format!("migration consumer: {e}"))?,
            None => return Err("the migration stream ended before the copy did".into()),
        };
        let piece: Piece =
            serde_json::from_slice(&m.payload).map_err(|e| format!("unreadable piece: {e}"))?;
        match piece {
            Piece::Rows(rows) => {
                app.store()
                    .import_resident_rows(org_id, &rows)
                    .await
                    .map_err(|e| plantd_model::error_chain(&e))?;
            }
            Piece::Points(p) => {
                batch.extend(p.into_points());
                if batch.len() >= WRITE_POINTS {
                    write_points(app, org_id, std::mem::take(&mut batch)).await?;
                }
            }
            Piece::File {
                sha256,
                offset,
                data,
                last,
            } => {
                use base64::Engine;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .map_err(|e| format!("package file piece: {e}"))?;
                let (sha, buf) = file.get_or_insert_with(|| (sha256.clone(), Vec::new()));
                if *sha != sha256 || buf.len() as u64 != offset {
                    return Err(format!("package file {sha256}: pieces out of order"));
                }
                buf.extend_from_slice(&bytes);
                if last {
                    let (sha, buf) = file.take().unwrap_or_default();
                    store_file(app, &sha, &buf).await?;
                }
            }
            Piece::End { .. } => break,
        }
    }
    write_points(app, org_id, batch).await?;
    read_org(app, org_id, None, &mut |_| {}).await
}

async fn write_points(app: &App, org_id: &str, points: Vec<Point>) -> Result<(), String> {
    if points.is_empty() {
        return Ok(());
    }
    app.tsdb()
        .ingest(org_id, Arc::new(points), None)
        .await
        .map(|_| ())
        .map_err(|e| plantd_model::error_chain(&e))
}

/// Writes a package file where OTA keeps it, named by its SHA-256, which must match.
async fn store_file(app: &App, sha256: &str, bytes: &[u8]) -> Result<(), String> {
    let actual = hex::encode(Sha256::digest(bytes));
    if actual != sha256 {
        return Err(format!(
            "package file {sha256} arrived with SHA-256 {actual}"
        ));
    }
    let path = crate::ota_packages::blob_path(&app.config().ota_dir, sha256);
    if tokio::fs::try_exists(&path).await.unwrap_or(false) {
        return Ok(());
    }
    let io = |e: std::io::Error| format!("package file {}: {e}", path.display());
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await.map_err(io)?;
    }
    let tmp = path.with_extension("migrating");
    tokio::fs::write(&tmp, bytes).await.map_err(io)?;
    tokio::fs::rename(&tmp, &path).await.map_err(io)
}

/// Writes the points held during the window (from the start of the held subject, or after
/// `after`, its stream sequence) until none is pending; returns the points written and the
/// last sequence read.
pub(crate) async fn write_held(
    app: &App,
    js: &jetstream::Context,
    migration_id: &str,
    org_id: &str,
    after: u64,
) -> Result<(u64, u64), String> {
    let deployment = &app.region_settings().deployment;
    let stream = migration_stream(js, deployment).await?;
    let deliver_policy = if after == 0 {
        jetstream::consumer::DeliverPolicy::All
    } else {
        jetstream::consumer::DeliverPolicy::ByStartSequence {
            start_sequence: after + 1,
        }
    };
    let mut consumer = stream
        .create_consumer(jetstream::consumer::pull::Config {
            filter_subject: held_subject(deployment, migration_id),
            deliver_policy,
            ack_policy: jetstream::consumer::AckPolicy::None,
            inactive_threshold: Duration::from_secs(60),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("held points consumer: {e}"))?;
    let mut last = after;
    let mut written = 0u64;
    loop {
        let pending = consumer
            .info()
            .await
            .map_err(|e| format!("held points consumer: {e}"))?
            .num_pending;
        if pending == 0 {
            return Ok((written, last));
        }
        let mut batch = consumer
            .fetch()
            .max_messages(pending.min(1000) as usize)
            .expires(Duration::from_secs(2))
            .messages()
            .await
            .map_err(|e| format!("held points: {e}"))?;
        let mut points = Vec::new();
        while let Some(m) = batch.next().await {
            let m = m.map_err(|e| format!("held points: {e}"))?;
            if let Ok(info) = m.info() {
                last = last.max(info.stream_sequence);
            }
            match serde_json::from_slice::<Piece>(&m.payload) {
                Ok(Piece::Points(p)) => points.extend(p.into_points()),
                _ => {
                    tracing::warn!(migration = %migration_id, "an unreadable held piece is skipped")
                }
            }
        }
        written += points.len() as u64;
        write_points(app, org_id, points).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_names_the_table_and_merged_tables_need_every_row_only() {
        let sum = |count, checksum| Sum { count, checksum };
        let mut ours = Sums::default();
        ours.tables.insert("dashboards".into(), sum(2, 7));
        ours.tables.insert("audit_logs".into(), sum(3, 9));
        let mut theirs = ours.clone();
        assert_eq!(ours.difference(&theirs), None);
        // The target also audited requests it redirected: more rows, another checksum.
        theirs.tables.insert("audit_logs".into(), sum(4, 1));
        assert_eq!(ours.difference(&theirs), None);
        theirs.tables.insert("audit_logs".into(), sum(2, 9));
        assert!(
            ours.difference(&theirs)
                .unwrap()
                .contains("audit_logs: 3 rows sent, 2 stored")
        );
        theirs.tables.insert("audit_logs".into(), sum(3, 9));
        theirs.tables.insert("dashboards".into(), sum(2, 8));
        assert!(
            ours.difference(&theirs)
                .unwrap()
                .starts_with("table dashboards")
        );
        theirs.tables.insert("dashboards".into(), sum(2, 7));
        theirs.points = sum(1, 1);
        assert!(ours.difference(&theirs).unwrap().starts_with("telemetry"));
    }
}
