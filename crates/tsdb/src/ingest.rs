//! Atomic batch ingest: the group-commit writer. Each batch's series are found (or created), its
//! points sorted by series and time (a repeated key keeps the last) and appended to the telemetry
//! log as one record, with the request's audit record, in one transaction per group of batches;
//! the answer waits for the commit. The flusher (`flush.rs`) writes the log into blocks and
//! rollups later, many batches at once.

use plantd_model::telemetry::Point;
use plantd_store::NewAuditRecord;
use sqlx::Row;
use std::collections::{BTreeSet, HashMap};

use crate::error::{Result, TsdbError};
use crate::log::{self, RawPoint, sort_rows};
use crate::sql::{Statement, cached_sql, value_rows};

/// Series created per statement (4 parameters each).
const SERIES_PER_STATEMENT: usize = 250;
use crate::state::{AssetSeries, SeriesEntry, SeriesIds, SeriesKey, Shared};
use std::sync::Arc;
use tokio::sync::oneshot;

/// One batch waiting for the writer, with where to send its outcome.
pub(crate) struct Job {
    org_id: String,
    points: Arc<Vec<Point>>,
    /// The batch's log record and its point count, when every series was in the cache (built
    /// by the request's task, beside other requests); else the writer builds it.
    record: Option<(Vec<u8>, usize)>,
    /// The request's audit record (id, record, time), stored in the same transaction.
    audit: Option<(String, NewAuditRecord, i64)>,
    reply: oneshot::Sender<Result<usize>>,
}

/// Batches queued while the writer commits are written together, up to this many points.
const GROUP_POINTS: usize = 50_000;
/// Batches that may wait for the writer before `ingest` waits to queue.
const QUEUE: usize = 256;

/// The writer's queue, started with the first batch.
pub(crate) type Writer = std::sync::OnceLock<tokio::sync::mpsc::Sender<Job>>;

/// Batches waiting for the writer.
pub(crate) fn queued(writer: &Writer) -> usize {
    writer
        .get()
        .map_or(0, |tx| tx.max_capacity() - tx.capacity())
}

/// Queues a validated batch for the writer and waits until it is durable (see `Tsdb::ingest`).
pub(crate) async fn submit(
    shared: &Arc<Shared>,
    writer: &Writer,
    org_id: &str,
    points: Arc<Vec<Point>>,
    audit: Option<NewAuditRecord>,
) -> Result<usize> {
    let writer = writer.get_or_init(|| {
        let (tx, rx) = tokio::sync::mpsc::channel(QUEUE);
        tokio::spawn(run_writer(shared.clone(), rx));
        tokio::spawn(crate::flush::run(shared.clone()));
        tokio::spawn(crate::seal::run(shared.clone()));
        tx
    });
    crate::flush::wait_for_room(shared).await?;
    let record = shared
        .rows_from_cache(org_id, &points)
        .map(|rows| (log::encode(&rows), rows.len()));
    let (reply, outcome) = oneshot::channel();
    let job = Job {
        org_id: org_id.to_string(),
        points,
        record,
        audit: audit.map(|r| {
            (
                plantd_model::new_id(),
                r,
                plantd_model::Timestamp::now().millis(),
            )
        }),
        reply,
    };
    writer.send(job).await.map_err(|_| writer_gone())?;
    outcome.await.map_err(|_| writer_gone())?
}

fn writer_gone() -> TsdbError {
    TsdbError::Writer("the ingest writer stopped before answering".into())
}

/// The writer: takes the first waiting batch and every batch queued behind it (up to
/// [`GROUP_POINTS`]), writes them in one transaction and answers each. A group runs in its own
/// task, so that a failure there (even a panic) answers its batches with an error and the writer
/// goes on with the next group.
async fn run_writer(shared: Arc<Shared>, mut rx: tokio::sync::mpsc::Receiver<Job>) {
    while let Some(first) = rx.recv().await {
        let mut points = first.points.len();
        let mut jobs = vec![first];
        while points < GROUP_POINTS {
            match rx.try_recv() {
                Ok(job) => {
                    points += job.points.len();
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        let shared = shared.clone();
        let group = tokio::spawn(async move {
            let outcome = shared.write_group(&mut jobs).await;
            match outcome {
                Ok(counts) => {
                    for (job, n) in jobs.into_iter().zip(counts) {
                        let _ = job.reply.send(Ok(n));
                    }
                }
                Err(e) => {
                    // Each batch's caller reports the failure (with this cause chain).
                    let message = format!(
                        "the write of {} batches failed: {}",
                        jobs.len(),
                        plantd_model::error_chain(&e)
                    );
                    for job in jobs {
                        let _ = job.reply.send(Err(TsdbError::Writer(message.clone())));
                    }
                }
            }
        });
        if let Err(e) = group.await {
            // A panic: its batches' callers are told the writer stopped before answering.
            tracing::error!(error = %e, "telemetry ingest group panicked");
        }
    }
}

impl Shared {
    /// The rows of a batch whose series are all in the cache (and linked to the data source its
    /// points name), sorted; `None` sends the batch to the writer's slower path.
    fn rows_from_cache(&self, org_id: &str, points: &[Point]) -> Option<Vec<RawPoint>> {
        let series = self.series.lock().unwrap_or_else(|p| p.into_inner());
        let of_org = series.of_org(org_id)?;
        let mut rows = Vec::with_capacity(points.len());
        let mut last: Option<(&Point, i64)> = None;
        // The asset of the points going by, and its series.
        let mut asset: Option<(&str, &AssetSeries)> = None;
        for p in points {
            let id = match last {
                Some((l, id))
                    if l.asset_id == p.asset_id
                        && l.tag_name == p.tag_name
                        && l.data_source_id == p.data_source_id =>
                {
                    id
                }
                _ => {
                    let tags = match asset {
                        Some((name, tags)) if name == p.asset_id => tags,
                        _ => {
                            let tags = of_org.get(p.asset_id.as_str())?;
                            asset = Some((p.asset_id.as_str(), tags));
                            tags
                        }
                    };
                    match tags.get(p.tag_name.as_str()) {
                        Some((id, ds)) if p.data_source_id.is_none() || *ds == p.data_source_id => {
                            *id
                        }
                        _ => return None,
                    }
                }
            };
            last = Some((p, id));
            rows.push(((id, p.timestamp.millis()), (p.value, p.quality.code())));
        }
        drop(series);
        sort_rows(&mut rows);
        Some(rows)
    }

    /// Series ids of a batch, creating series (and linking data sources) in the transaction,
    /// then its rows, sorted. New series are added to `created` for the cache.
    async fn rows_in_tx(
        &self,
        tx: &mut plantd_store::WriteTx,
        org_id: &str,
        points: &[Point],
        created: &mut Vec<(SeriesKey, SeriesEntry)>,
    ) -> Result<Vec<RawPoint>> {
        let mut ids: HashMap<(&str, &str), i64> = HashMap::new();
        let known = self
            .series
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone_subset(org_id, points);
        // The series the cache does not hold (or holds linked to another data source), each
        // once, with the data source of its first point.
        let mut missing: Vec<(&str, &str, Option<&str>)> = Vec::new();
        let mut seen: std::collections::HashSet<(&str, &str)> = std::collections::HashSet::new();
        for p in points {
            let key = (p.asset_id.as_str(), p.tag_name.as_str());
            if !seen.insert(key) {
                continue;
            }
            // A series created by an earlier batch of this group is found again by its upsert
            // (the cache learns of it only after the commit).
            match known.get(&key) {
                Some((id, ds)) if p.data_source_id.is_none() || *ds == p.data_source_id => {
                    ids.insert(key, *id);
                }
                _ => missing.push((key.0, key.1, p.data_source_id.as_deref())),
            }
        }
        // Created (or linked) many to a statement: a plant's first scan brings thousands.
        let sqlite = self.store.backend() == plantd_store::Backend::Sqlite;
        for chunk in missing.chunks(SERIES_PER_STATEMENT) {
            let sql = cached_sql(Statement::UpsertSeries, 0, sqlite, chunk.len(), || {
                format!(
                    "INSERT INTO telemetry_series (org_id, asset_id, tag_name, data_source_id) VALUES {} \
                     ON CONFLICT (org_id, asset_id, tag_name) DO UPDATE \
                     SET data_source_id = COALESCE(excluded.data_source_id, telemetry_series.data_source_id) \
                     RETURNING id, asset_id, tag_name, data_source_id",
                    value_rows(sqlite, chunk.len(), 4, "", false)
                )
            });
            let asked: HashMap<(&str, &str), (&str, &str)> =
                chunk.iter().map(|(a, t, _)| ((*a, *t), (*a, *t))).collect();
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (asset, tag, ds) in chunk {
                q = q
                    .bind(org_id)
                    .bind(*asset)
                    .bind(*tag)
                    .bind(ds.map(str::to_string));
            }
            for row in q.fetch_all(&mut **tx).await? {
                let asset: String = row.try_get("asset_id")?;
                let tag: String = row.try_get("tag_name")?;
                let id: i64 = row.try_get("id")?;
                let ds: Option<String> = row.try_get("data_source_id")?;
                if let Some(key) = asked.get(&(asset.as_str(), tag.as_str())) {
                    ids.insert(*key, id);
                }
                created.push(((org_id.to_string(), asset, tag), (id, ds)));
            }
        }
        let mut rows: Vec<RawPoint> = points
            .iter()
            .map(|p| {
                let id = ids[&(p.asset_id.as_str(), p.tag_name.as_str())];
                ((id, p.timestamp.millis()), (p.value, p.quality.code()))
            })
            .collect();
        sort_rows(&mut rows);
        Ok(rows)
    }

    /// Appends a group of batches to the log in one transaction; returns each batch's accepted
    /// count.
    async fn write_group(&self, jobs: &mut [Job]) -> Result<Vec<usize>> {
        let mut tx = self.store.begin_write().await?;
        let sqlite = self.store.backend() == plantd_store::Backend::Sqlite;
        let mut created: Vec<(SeriesKey, SeriesEntry)> = Vec::new();
        let mut records: Vec<(&str, usize, Vec<u8>)> = Vec::with_capacity(jobs.len());
        for job in jobs.iter_mut() {
            let (record, n) = match job.record.take() {
                Some(r) => r,
                None => {
                    let rows = self
                        .rows_in_tx(&mut tx, &job.org_id, &job.points, &mut created)
                        .await?;
                    (log::encode(&rows), rows.len())
                }
            };
            records.push((job.org_id.as_str(), n, record));
        }
        let counts: Vec<usize> = records.iter().map(|(_, n, _)| *n).collect();
        let last = log::append(&mut tx, &records).await?;
        if self.forward.load(std::sync::atomic::Ordering::Relaxed) {
            crate::outbox::append(&mut tx, &records, plantd_model::Timestamp::now().millis())
                .await?;
        }
        drop(records);
        let audit: Vec<(&str, &NewAuditRecord, i64)> = jobs
            .iter()
            .filter_map(|j| j.audit.as_ref().map(|(id, r, ts)| (id.as_str(), r, *ts)))
            .collect();
        if !audit.is_empty() {
            plantd_store::insert_audit_rows(&mut tx, self.store.backend(), &audit).await?;
        }
        if !sqlite {
            // Other nodes drop their cached latest values of the assets written here; sent with
            // the commit, heard only if it commits.
            // (A batch's points come asset by asset: each asset is compared once per run of
            // its points, not once per point.)
            let mut assets: BTreeSet<(&str, &str)> = BTreeSet::new();
            for j in jobs.iter() {
                let mut last: Option<&str> = None;
                for p in j.points.iter() {
                    if last != Some(p.asset_id.as_str()) {
                        last = Some(p.asset_id.as_str());
                        assets.insert((j.org_id.as_str(), p.asset_id.as_str()));
                    }
                }
            }
            for text in self.latest.announcements(assets.into_iter()) {
                sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(crate::latest::CHANNEL)
                    .bind(text)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        crate::flush::appended(self, last, counts.iter().sum());
        // Only now, with the data durable, do memory caches learn of it.
        let mut series = self.series.lock().unwrap_or_else(|p| p.into_inner());
        for (key, value) in created {
            series.insert(key, value);
        }
        drop(series);
        for (job, n) in jobs.iter().zip(&counts) {
            self.latest.observe(&job.org_id, &job.points);
            self.storage.add(&job.org_id, *n);
        }
        Ok(counts)
    }
}

/// The cached series ids a batch needs, copied out so the lock is not held across awaits.
trait CloneSubset {
    fn clone_subset<'a>(
        &self,
        org_id: &str,
        points: &'a [Point],
    ) -> HashMap<(&'a str, &'a str), (i64, Option<String>)>;
}

impl CloneSubset for SeriesIds {
    fn clone_subset<'a>(
        &self,
        org_id: &str,
        points: &'a [Point],
    ) -> HashMap<(&'a str, &'a str), (i64, Option<String>)> {
        let mut out = HashMap::new();
        let Some(of_org) = self.of_org(org_id) else {
            return out;
        };
        for p in points {
            let key = (p.asset_id.as_str(), p.tag_name.as_str());
            if out.contains_key(&key) {
                continue;
            }
            if let Some(v) = of_org.get(key.0).and_then(|tags| tags.get(key.1)) {
                out.insert(key, v.clone());
            }
        }
        out
    }
}
