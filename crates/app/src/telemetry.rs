//! Telemetry (SPEC 2.3, 4.2, 8.3): the one way points enter storage, for the ingest endpoint
//! and the connectors alike (tier quotas, the durable write, alert evaluation, the live stream),
//! and the queries.

use plantd_model::page::{Page, Paged};
use plantd_model::telemetry::{Aggregation, MAX_DETAILS, Point};
use plantd_model::{FieldError, Tier, Timestamp};
use plantd_store::NewAuditRecord;
use plantd_tsdb::{AggregatedRow, LatestValue, RawRow, TelemetryFilter};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::app::App;
use crate::caller::Caller;
use crate::error::{AppError, AppResult};
use crate::events::Event;
use crate::rate_limit::{Bucket, Decision, point_windows};

/// What [`App::store_points`] did and how long it took.
#[derive(Clone, Copy, Debug)]
pub struct Stored {
    pub accepted: usize,
    /// The durable write (queueing for the group commit included).
    pub write: Duration,
    /// From the write to the batch's alert changes stored and published.
    pub alerts: Duration,
}

/// The rate-limit bucket counting an organization's telemetry points.
pub(crate) fn points_bucket(org_id: &str) -> String {
    format!("points:{org_id}")
}

impl App {
    /// The oldest timestamp a new point may carry (the raw retention).
    pub fn oldest_accepted(&self, now: Timestamp) -> Timestamp {
        self.tsdb().retention().oldest_accepted(now)
    }

    /// Stores a validated batch of the caller's organization, all or none: its data sources
    /// must be the organization's, then [`App::store_points`]. `audit` is committed with the
    /// points; `now` is the time the points were checked against.
    pub async fn ingest(
        &self,
        caller: &Caller,
        points: Vec<Point>,
        batch_source: Option<&str>,
        audit: Option<NewAuditRecord>,
        now: Timestamp,
    ) -> AppResult<Stored> {
        self.check_sources(&caller.org_id, &points, batch_source)
            .await?;
        self.store_points(&caller.org_id, caller.tier, Arc::new(points), audit, now)
            .await
    }

    /// The one way points enter storage (the ingest endpoint and the connectors): the tier's
    /// storage quota and ingestion limits, the durable write (with `audit` in the same commit),
    /// then alert evaluation and the live stream.
    pub async fn store_points(
        &self,
        org_id: &str,
        tier: Tier,
        points: Arc<Vec<Point>>,
        audit: Option<NewAuditRecord>,
        now: Timestamp,
    ) -> AppResult<Stored> {
        if let Some(limit_gb) = self.config().limits.telemetry(tier).storage_gb {
            let used = self.tsdb().storage_bytes(org_id).await?;
            if plantd_tsdb::over_quota(used, points.len(), limit_gb) {
                return Err(AppError::LimitReached {
                    message: format!(
                        "storage quota of {limit_gb} GB for the {tier} tier reached ({:.3} GB used); retention frees space, or raise the tier",
                        used as f64 / 1e9
                    ),
                    retry_after: self.config().retention_interval.as_secs().max(1),
                });
            }
        }
        self.admit_points(org_id, tier, points.len() as u64, now)?;
        let started = Instant::now();
        let accepted = self.tsdb().ingest(org_id, points.clone(), audit).await?;
        let write = started.elapsed();
        // Committed: evaluate alert rules, tell live subscribers.
        self.alert_engine()
            .evaluate(self.store(), self.events(), org_id, &points)
            .await;
        let alerts = started.elapsed() - write;
        self.events().publish(Event::Telemetry {
            org_id: org_id.into(),
            points,
        });
        Ok(Stored {
            accepted,
            write,
            alerts,
        })
    }

    /// Every named data source must be one of the organization's: the batch's is named
    /// `data_source_id`, a point's own (when it differs) `data[i].data_source_id`.
    async fn check_sources(
        &self,
        org_id: &str,
        points: &[Point],
        batch_source: Option<&str>,
    ) -> AppResult<()> {
        if batch_source.is_none() && points.iter().all(|p| p.data_source_id.is_none()) {
            return Ok(());
        }
        let sources = self.store().org_data_sources(org_id).await?;
        let known = |id: &str| sources.iter().any(|d| d.id == id);
        let mut errors = Vec::new();
        if let Some(ds) = batch_source
            && !known(ds)
        {
            errors.push(FieldError::new(
                "data_source_id",
                "is not a data source of this organization",
            ));
        }
        let mut checked: Option<&str> = batch_source;
        for (i, p) in points.iter().enumerate() {
            let Some(ds) = p.data_source_id.as_deref() else {
                continue;
            };
            if Some(ds) == batch_source || Some(ds) == checked {
                continue;
            }
            if known(ds) {
                checked = Some(ds);
            } else if errors.len() < MAX_DETAILS {
                errors.push(FieldError::new(
                    format!("data[{i}].data_source_id"),
                    "is not a data source of this organization",
                ));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(AppError::Invalid(errors))
        }
    }

    /// The tier's ingestion limits (SPEC 8.3), counted in points per organization.
    fn admit_points(&self, org_id: &str, tier: Tier, n: u64, now: Timestamp) -> AppResult<()> {
        let bucket = Bucket {
            name: points_bucket(org_id),
            label: "telemetry ingestion",
            windows: point_windows(self.config().limits.telemetry(tier)),
        };
        match self.limiter().check_n(&[bucket], n, now.unix_seconds()) {
            Decision::Allowed(_) => Ok(()),
            Decision::Refused {
                retry_after, scope, ..
            } => Err(AppError::LimitReached {
                message: format!(
                    "rate limit exceeded: {scope} points; this batch has {n} points; retry in {retry_after} s"
                ),
                retry_after,
            }),
        }
    }

    /// Raw points of the caller's organization, with quality.
    pub async fn telemetry_raw(
        &self,
        org_id: &str,
        filter: &TelemetryFilter,
        page: Page,
    ) -> AppResult<Paged<RawRow>> {
        Ok(self.tsdb().query_raw(org_id, filter, page).await?)
    }

    /// Aggregates per series and bucket (`interval_ms`), or over the whole range.
    pub async fn telemetry_aggregated(
        &self,
        org_id: &str,
        filter: &TelemetryFilter,
        aggregation: Aggregation,
        interval_ms: Option<i64>,
        page: Page,
    ) -> AppResult<Paged<AggregatedRow>> {
        Ok(self
            .tsdb()
            .query_aggregated(org_id, filter, aggregation, interval_ms, page)
            .await?)
    }

    /// The latest value of each tag of an asset (of `tags` when given).
    pub async fn latest_values(
        &self,
        org_id: &str,
        asset_id: &str,
        tags: Option<&[String]>,
    ) -> AppResult<Vec<LatestValue>> {
        Ok(self.tsdb().latest(org_id, asset_id, tags).await?)
    }
}
