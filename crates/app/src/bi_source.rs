//! The organization's storage as the BI engine reads it: every call answers the organization
//! the source was made for and nothing else (the engine's tables are built on it per query).

use async_trait::async_trait;
use plantd_bi::{
    PointColumns, PointFields, PointRead, RollupRow, Series, SeriesScope, Source, SourceError,
    Table,
};
use plantd_model::Timestamp;
use plantd_store::{AlertFilter, DeviceFilter};
use plantd_tsdb::TelemetryFilter;
use serde_json::{Value, json};

use crate::app::App;

/// Timestamps storage can hold (years 1 to 9999): a scan without bounds reads these.
const EARLIEST: i64 = -62_135_596_800_000;
const LATEST: i64 = 253_402_300_800_000;

/// Records a record table reads a page at a time.
const RECORD_PAGE: i64 = 10_000;

pub(crate) struct OrgSource {
    pub app: App,
    pub org_id: String,
}

fn failed(e: impl std::fmt::Display) -> SourceError {
    SourceError(e.to_string())
}

fn filter(asset: Option<&String>, tag: Option<&String>, lo: i64, hi: i64) -> TelemetryFilter {
    TelemetryFilter {
        data_source_id: None,
        asset_id: asset.cloned(),
        tag_name: tag.cloned(),
        start: Timestamp::from_millis(lo),
        end: Timestamp::from_millis(hi),
    }
}

/// The assets a scope names, each as a filter's asset (`None`: every asset); the single tag a
/// scope names, else `None` (several tags are filtered after the read).
fn split(scope: &SeriesScope) -> (Vec<Option<&String>>, Option<&String>) {
    let assets = match &scope.assets {
        Some(list) => list.iter().map(Some).collect(),
        None => vec![None],
    };
    let tag = match &scope.tags {
        Some(list) if list.len() == 1 => list.first(),
        _ => None,
    };
    (assets, tag)
}

fn tag_in(scope: &SeriesScope, tag: &str) -> bool {
    scope
        .tags
        .as_ref()
        .is_none_or(|t| t.iter().any(|x| x == tag))
}

#[async_trait]
impl Source for OrgSource {
    async fn series(&self, scope: &SeriesScope) -> Result<Vec<Series>, SourceError> {
        // The tags go to the statement (an empty list there means every tag, here none).
        let tags = match &scope.tags {
            Some(list) if list.is_empty() => return Ok(Vec::new()),
            Some(list) => list.as_slice(),
            None => &[],
        };
        let mut out = Vec::new();
        for asset in split(scope).0 {
            let f = filter(asset, None, EARLIEST, LATEST);
            let series = self
                .app
                .tsdb()
                .series_of(&self.org_id, &f, tags)
                .await
                .map_err(failed)?;
            out.extend(series.into_iter().map(|(id, asset_id, tag_name)| Series {
                id,
                asset_id,
                tag_name,
            }));
        }
        Ok(out)
    }

    async fn points(
        &self,
        series: &[i64],
        (after, end): (i64, i64),
        limit: usize,
        fields: PointFields,
    ) -> Result<PointRead, SourceError> {
        let want = plantd_tsdb::PointFields {
            timestamps: fields.timestamps,
            values: fields.values,
            quality: fields.quality,
        };
        let read = self
            .app
            .tsdb()
            .points_of_series(
                series,
                (after.max(EARLIEST - 1), end.min(LATEST)),
                limit,
                want,
            )
            .await
            .map_err(failed)?;
        Ok(PointRead {
            runs: read.runs,
            columns: PointColumns {
                ts: read.ts,
                values: read.values,
                quality: read.quality,
            },
            stopped: read.stopped,
        })
    }

    async fn rollups(
        &self,
        width: i64,
        scope: &SeriesScope,
        lo: i64,
        hi: i64,
    ) -> Result<Vec<RollupRow>, SourceError> {
        let (assets, tag) = split(scope);
        let mut out = Vec::new();
        for asset in assets {
            let f = filter(asset, tag, lo, hi);
            for b in self
                .app
                .tsdb()
                .query_buckets(&self.org_id, &f, Some(width))
                .await
                .map_err(failed)?
            {
                if tag_in(scope, &b.tag_name) {
                    out.push(RollupRow {
                        bucket: b.start.millis(),
                        asset_id: b.asset_id,
                        tag_name: b.tag_name,
                        count: b.stats.count as u64,
                        sum: b.stats.sum,
                        min: b.stats.min,
                        max: b.stats.max,
                    });
                }
            }
        }
        Ok(out)
    }

    async fn records(&self, table: Table) -> Result<Vec<Value>, SourceError> {
        let store = self.app.store();
        let org = self.org_id.as_str();
        let mut out = Vec::new();
        match table {
            Table::Alerts => loop {
                let (page, _) = store
                    .alerts(org, &AlertFilter::default(), RECORD_PAGE, out.len() as i64)
                    .await
                    .map_err(failed)?;
                let done = (page.len() as i64) < RECORD_PAGE;
                for a in page {
                    out.push(serde_json::to_value(a).map_err(failed)?);
                }
                if done {
                    break;
                }
            },
            Table::AlertRules => {
                for r in store.alert_rules(org).await.map_err(failed)? {
                    out.push(serde_json::to_value(r).map_err(failed)?);
                }
            }
            Table::DataSources => {
                // Built field by field: the stored config holds secrets and is not a column.
                for d in self.app.data_sources(org).await.map_err(failed)?.iter() {
                    out.push(json!({
                        "id": d.id,
                        "name": d.name,
                        "type": d.source_type.as_str(),
                        "endpoint": d.endpoint,
                        "status": d.status.as_str(),
                        "tag_count": d.tag_count,
                        "enabled": d.enabled,
                        "last_error": d.last_error,
                        "created_at": d.created_at,
                        "updated_at": d.updated_at,
                    }));
                }
            }
            Table::Devices => loop {
                let (page, _) = store
                    .devices(
                        org,
                        &DeviceFilter::default(),
                        (RECORD_PAGE, out.len() as i64),
                    )
                    .await
                    .map_err(failed)?;
                let done = (page.len() as i64) < RECORD_PAGE;
                for d in page {
                    out.push(serde_json::to_value(d).map_err(failed)?);
                }
                if done {
                    break;
                }
            },
            Table::Telemetry | Table::Telemetry1m | Table::Telemetry1h | Table::Telemetry1d => {
                return Err(SourceError(format!(
                    "{} is not a record table",
                    table.name()
                )));
            }
        }
        Ok(out)
    }
}
