//! [`Tsdb`]: the telemetry store's handle. Every operation is here, delegating to the module
//! that does it (`ingest`, `query`, `latest`, `retention`, `storage`), which know nothing of
//! this type.

use plantd_model::Timestamp;
use plantd_model::page::{Page, Paged};
use plantd_model::telemetry::{Aggregation, Point, Quality};
use plantd_store::{Backend, NewAuditRecord, Store};
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::ingest::{self, Writer};
use crate::latest::{LatestCache, LatestValue};
use crate::query::{AggregatedRow, Bucket, Queries, RawRow, TelemetryFilter};
use crate::retention::{self, Retention, RetentionReport};
use crate::state::Shared;

pub struct Tsdb {
    shared: Arc<Shared>,
    writer: Writer,
}

impl Tsdb {
    pub fn new(store: Store, retention: Retention) -> Self {
        // Latest values are served from memory. On SQLite this process sees every write; on
        // PostgreSQL the cache is trusted once its listener hears the other nodes' writes.
        let trusted = store.backend() == Backend::Sqlite;
        Self {
            shared: Arc::new(Shared {
                store,
                retention,
                series: Mutex::default(),
                latest: Arc::new(LatestCache::new(trusted)),
                newest: Mutex::default(),
                log: Default::default(),
                storage: Default::default(),
                seal_wake: Default::default(),
                upgraded: Default::default(),
                forward: Default::default(),
                sealer_passes: Default::default(),
                sealer_rewrites: Default::default(),
                decoded: crate::decoded::Decoded::new(crate::SCAN_CACHE_BYTES),
            }),
            writer: Writer::new(),
        }
    }

    /// Converts a database of the first storage layout (a row per point) to blocks, once, with
    /// progress in the log; every operation waits for it. Call it at start to upgrade before
    /// serving. Returns the number of points converted by this call's first run.
    pub async fn upgrade(&self) -> Result<u64> {
        let converted = self
            .shared
            .upgraded
            .get_or_try_init(|| crate::upgrade::convert_raw(&self.shared.store))
            .await
            .copied()?;
        crate::flush::count_at_start(&self.shared).await?;
        Ok(converted)
    }

    /// Writes everything the telemetry log holds into blocks and rollups (the background
    /// flusher does this within seconds of ingest, and every read first; for the graceful stop,
    /// tests and the benchmark).
    pub async fn flush(&self) -> Result<()> {
        self.upgrade().await?;
        crate::flush::flush_all(&self.shared).await
    }

    /// Before a read: the upgrade done, and every point acknowledged so far (on any node)
    /// written into blocks and rollups.
    async fn ready_to_read(&self) -> Result<()> {
        self.upgrade().await?;
        crate::flush::ensure_flushed(&self.shared).await
    }

    /// Sets the points one flush writes at most and the points the log may hold before ingest
    /// waits (tests; the defaults are the documented budget).
    #[doc(hidden)]
    pub fn set_log_limits(&self, flush_points: u64, max_backlog: u64) {
        self.shared.log.set_limits(flush_points, max_backlog);
    }

    /// Sets the bytes of decoded columns kept for scans that read the same blocks again (BI);
    /// 0 turns the cache off.
    pub fn set_scan_cache(&self, bytes: usize) {
        self.shared.decoded.set_budget(bytes);
    }

    /// What the scans' cache of decoded columns holds and has done.
    pub fn scan_cache_stats(&self) -> crate::ScanCacheStats {
        self.shared.decoded.stats()
    }

    /// The flusher's state (tests).
    #[cfg(test)]
    pub(crate) fn log_state(&self) -> &crate::log::LogState {
        &self.shared.log
    }

    /// Points acknowledged but not yet written into blocks (the flusher's backlog, as this
    /// process knows it).
    pub fn log_backlog(&self) -> u64 {
        self.shared.log.backlog()
    }

    /// The background sealer's completed passes and how much they rewrote in all (windows
    /// sealed, spans of rollups packed, days compacted), since this process started. A pass that
    /// ran after ingest stopped and rewrote nothing means the storage is settled: every closed
    /// window sealed, every closed span packed, every marked day compacted.
    pub fn sealer_progress(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        let passes = self.shared.sealer_passes.load(Acquire);
        (passes, self.shared.sealer_rewrites.load(Relaxed))
    }

    /// Merges the head blocks of every window that is due now (closed, or holding many of them)
    /// into compressed blocks. The background sealer does this after ingest; for tests, the
    /// benchmark and a graceful stop.
    pub async fn seal(&self) -> Result<usize> {
        self.flush().await?;
        crate::seal::seal_pending(&self.shared.store, Timestamp::now().millis()).await
    }

    /// Sealing as if the clock said `now` (tests).
    #[doc(hidden)]
    pub async fn seal_at(&self, now: Timestamp) -> Result<usize> {
        self.flush().await?;
        crate::seal::seal_pending(&self.shared.store, now.millis()).await
    }

    /// Batches waiting for the group-commit writer.
    pub fn queued_batches(&self) -> usize {
        ingest::queued(&self.writer)
    }

    /// Head blocks not yet sealed (compressed) into their window's block: the sealer's backlog.
    pub async fn unsealed_blocks(&self) -> Result<u64> {
        crate::blocks::unsealed(self.shared.store.pool()).await
    }

    pub fn retention(&self) -> &Retention {
        &self.shared.retention
    }

    /// Stores a validated batch, all or nothing, and returns once it is durable. Returns the
    /// number of points accepted (points repeating a series and timestamp within the batch count
    /// once: the last one wins).
    ///
    /// Batches go through one writer task, which commits the batches that queued while it was
    /// writing in one transaction (group commit): one lock, one fsync and a few large statements
    /// for many concurrent requests. The result is what committing them one after the other in
    /// arrival order would give; a failing transaction fails every batch in it and stores none.
    ///
    /// `audit`, when given, is the request's audit record: it is committed with the points, so
    /// that a request costs one commit, not two.
    pub async fn ingest(
        &self,
        org_id: &str,
        points: Arc<Vec<Point>>,
        audit: Option<NewAuditRecord>,
    ) -> Result<usize> {
        self.upgrade().await?;
        ingest::submit(&self.shared, &self.writer, org_id, points, audit).await
    }

    /// Raw points of an organization in the filter's range, ordered by time, asset and tag.
    pub async fn query_raw(
        &self,
        org_id: &str,
        f: &TelemetryFilter,
        page: Page,
    ) -> Result<Paged<RawRow>> {
        self.ready_to_read().await?;
        Queries::of(&self.shared.store)
            .query_raw(org_id, f, page)
            .await
    }

    /// Aggregates per series and bucket of `bucket_ms` (or over the whole range), each from the
    /// coarsest rollup level that answers exactly.
    pub async fn query_aggregated(
        &self,
        org_id: &str,
        f: &TelemetryFilter,
        agg: Aggregation,
        bucket_ms: Option<i64>,
        page: Page,
    ) -> Result<Paged<AggregatedRow>> {
        self.ready_to_read().await?;
        Queries::of(&self.shared.store)
            .query_aggregated(org_id, f, agg, bucket_ms, page)
            .await
    }

    /// Every non-empty bucket of every series in the filter, with count, sum, minimum and
    /// maximum (for charts that show a band instead of every point).
    pub async fn query_buckets(
        &self,
        org_id: &str,
        f: &TelemetryFilter,
        bucket_ms: Option<i64>,
    ) -> Result<Vec<Bucket>> {
        self.ready_to_read().await?;
        Queries::of(&self.shared.store)
            .query_buckets(org_id, f, bucket_ms)
            .await
    }

    /// The series an export reads: id, asset and tag, by asset and tag.
    pub async fn series_of(
        &self,
        org_id: &str,
        f: &TelemetryFilter,
        tags: &[String],
    ) -> Result<Vec<(i64, String, String)>> {
        self.ready_to_read().await?;
        Queries::of(&self.shared.store)
            .series_of(org_id, f, tags)
            .await
    }

    /// Up to `limit` raw points of one series with `after < ts < end`, by time: the steps of a
    /// read that began with [`Tsdb::series_of`] (which flushed the log), so points acknowledged
    /// after it began may be missing.
    pub async fn raw_of_series(
        &self,
        series_id: i64,
        after: i64,
        end: i64,
        limit: i64,
    ) -> Result<Vec<(i64, f64, Quality)>> {
        self.upgrade().await?;
        Queries::of(&self.shared.store)
            .raw_of_series(series_id, after, end, limit)
            .await
    }

    /// The points of the series `ids` (ascending) with `after < ts < end`, series after series,
    /// the columns `want`ed only: whole blocks until at least `limit` points, then where the
    /// read stopped. A step of a read that began with [`Tsdb::series_of`] (which flushed the
    /// log), so a range of any size is read in bounded memory (BI scans).
    pub async fn points_of_series(
        &self,
        ids: &[i64],
        range: (i64, i64),
        limit: usize,
        want: crate::PointFields,
    ) -> Result<crate::SeriesPoints> {
        self.upgrade().await?;
        let sqlite = self.shared.store.backend() == plantd_store::Backend::Sqlite;
        Queries::of(&self.shared.store)
            .columns_of_series(sqlite, ids, range, limit, (want, &self.shared.decoded))
            .await
    }

    /// The assets of an organization with their tags, by name (every series ever stored).
    pub async fn assets(&self, org_id: &str) -> Result<Vec<(String, Vec<String>)>> {
        self.upgrade().await?;
        Queries::of(&self.shared.store).assets(org_id).await
    }

    /// The latest value of each tag of an asset (only `tags` when given), by tag name.
    pub async fn latest(
        &self,
        org_id: &str,
        asset_id: &str,
        tags: Option<&[String]>,
    ) -> Result<Vec<LatestValue>> {
        self.upgrade().await?;
        self.shared
            .latest
            .read(
                &self.shared.store,
                org_id,
                asset_id,
                tags,
                crate::flush::ensure_flushed(&self.shared),
            )
            .await
    }

    /// The latest value of each tag of each of `assets`, in the order of `assets` (an asset
    /// without points has an empty list); tags by name.
    pub async fn latest_of_assets(
        &self,
        org_id: &str,
        assets: &[String],
    ) -> Result<Vec<(String, Vec<LatestValue>)>> {
        self.upgrade().await?;
        self.shared
            .latest
            .read_assets(
                &self.shared.store,
                org_id,
                assets,
                crate::flush::ensure_flushed(&self.shared),
            )
            .await
    }

    /// The series (asset, tag) linked to a data source.
    pub async fn series_of_source(
        &self,
        org_id: &str,
        data_source_id: &str,
    ) -> Result<Vec<(String, String)>> {
        self.upgrade().await?;
        Queries::of(&self.shared.store)
            .series_of_source(org_id, data_source_id)
            .await
    }

    /// Every series of the organization: asset, tag and the data source it is linked to
    /// (`None`: points that came through the API), by asset and tag name.
    pub async fn series_sources(
        &self,
        org_id: &str,
    ) -> Result<Vec<(String, String, Option<String>)>> {
        self.upgrade().await?;
        Queries::of(&self.shared.store).series_sources(org_id).await
    }

    /// The data source each tag of an asset is linked to (`None`: points that came through
    /// the API), by tag name.
    pub async fn tag_sources(
        &self,
        org_id: &str,
        asset_id: &str,
    ) -> Result<std::collections::HashMap<String, Option<String>>> {
        self.upgrade().await?;
        Queries::of(&self.shared.store)
            .tag_sources(org_id, asset_id)
            .await
    }

    /// Whether `latest` answers from memory now (always on SQLite; on PostgreSQL once this node
    /// hears the other nodes' writes). For health reporting and tests.
    pub fn latest_from_memory(&self) -> bool {
        self.shared.latest.answers_from_memory()
    }

    /// Turns the edge agent's outbox on or off: while on, every batch acknowledged from now on is
    /// also kept in the outbox until [`Tsdb::outbox_forwarded`] says the cloud has it.
    pub fn set_forwarding(&self, on: bool) {
        self.shared
            .forward
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// The oldest records of the outbox with an id in `(after, up_to]`, but those in `skip` (in
    /// flight), up to about `max_points` points (at least one record), with their names.
    pub async fn outbox_oldest(
        &self,
        after: i64,
        up_to: Option<i64>,
        skip: &[i64],
        max_points: usize,
    ) -> Result<Vec<crate::outbox::OutboxRecord>> {
        let store = &self.shared.store;
        crate::outbox::oldest(
            store.pool(),
            store.backend() == Backend::Sqlite,
            after,
            up_to,
            skip,
            max_points,
        )
        .await
    }

    /// The cloud has the records `ids`: they leave the outbox.
    pub async fn outbox_forwarded(&self, ids: &[i64]) -> Result<()> {
        let store = &self.shared.store;
        let mut tx = store.begin_write_unsynced().await?;
        crate::outbox::delete(&mut tx, store.backend() == Backend::Sqlite, ids).await?;
        tx.commit().await?;
        Ok(())
    }

    /// What the outbox holds.
    pub async fn outbox_count(&self) -> Result<crate::outbox::OutboxCount> {
        crate::outbox::count(self.shared.store.pool()).await
    }

    /// Deletes what each level's retention has passed.
    pub async fn enforce_retention(&self, now: Timestamp) -> Result<RetentionReport> {
        self.upgrade().await?;
        retention::enforce(
            &self.shared.store,
            self.shared.retention,
            &self.shared.storage,
            now,
        )
        .await
    }

    /// Deletes every point and rollup of an organization (its resident data moved to another
    /// region, or a copy received here failed its check); its series keep their ids, so what
    /// this node remembers of them stays true. Returns the blocks and rollup rows deleted.
    pub async fn delete_org_points(&self, org_id: &str) -> Result<u64> {
        self.flush().await?;
        let store = &self.shared.store;
        let mut tx = store.begin_write().await?;
        let mut deleted = 0;
        for table in [
            "telemetry_block",
            "telemetry_minute_block",
            "telemetry_hour_block",
            "telemetry_rollup",
        ] {
            let sql = format!(
                "DELETE FROM {table} WHERE series_id IN (SELECT id FROM telemetry_series WHERE org_id = $1)"
            );
            deleted += sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(org_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        sqlx::query("DELETE FROM telemetry_log WHERE org_id = $1")
            .bind(org_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.shared.storage.forget(org_id);
        self.shared.latest.forget_org(org_id);
        // What it knew of the newest point of each series is probed again.
        self.shared
            .newest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        Ok(deleted)
    }

    /// Estimated bytes of telemetry an organization stores.
    pub async fn storage_bytes(&self, org_id: &str) -> Result<u64> {
        self.upgrade().await?;
        self.shared
            .storage
            .bytes(self.shared.store.pool(), org_id)
            .await
    }
}
