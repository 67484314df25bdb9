//! A dashboard's widgets read through the BI engine (docs/api.md, "Embedded dashboards" and
//! "Reports"): each widget's query becomes SQL over the BI tables, run under the reader's
//! row-level-security conditions inside the engine, so an embedded dashboard and a report see
//! exactly the rows SQL under the same conditions would. The SQL is built here from the
//! widget's own fields (asset, tags, range, aggregation) and the value a view chose for a
//! variable (one the variable offers), every name a SQL string literal: no SQL text of a
//! reader's enters it.

use plantd_bi::{BiError, Rls};
use plantd_model::Timestamp;
use plantd_model::bi::{
    AlertRow, BiConfig, DashboardData, LatestValue, SeriesData, VariableValue, WidgetData,
};
use plantd_model::dashboard::{Layout, Widget, WidgetQuery, WidgetType};
use plantd_model::telemetry::Aggregation;
use plantd_model::validation::Validator;
use std::collections::HashMap;

use crate::app::App;
use crate::dashboards::Dashboard;
use crate::error::{AppError, AppResult};

/// Points a line chart holds per tag at most (buckets are widened to stay under it).
const CHART_POINTS: i64 = 400;
/// Rows one widget's query may answer (8 tags of `CHART_POINTS`, with room).
const WIDGET_ROWS: usize = 8 * CHART_POINTS as usize + 100;
/// Alerts an alert list shows.
const ALERT_ROWS: usize = 50;
/// The range a widget shows when its query names none.
const DEFAULT_RANGE_SECS: i64 = 3_600;

/// A SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn time_literal(t: Timestamp) -> String {
    format!("TIMESTAMP {}", literal(&t.to_rfc3339()))
}

/// The value of each variable of `layout`: the one `chosen` (`var-<name>` of a view's address)
/// if the variable offers it (or offers no list and it is an asset name), else a 400 on
/// `var-<name>`; the default when none is chosen. Names no variable has are refused too.
pub(crate) fn variable_values(
    layout: &Layout,
    chosen: &HashMap<String, String>,
) -> AppResult<Vec<VariableValue>> {
    let mut v = Validator::new();
    for name in chosen.keys() {
        v.check(
            layout.variables.iter().any(|x| &x.name == name),
            &format!("var-{name}"),
            "the dashboard has no such variable",
        );
    }
    let mut out = Vec::new();
    for var in &layout.variables {
        let value = chosen.get(&var.name).unwrap_or(&var.default).clone();
        let field = format!("var-{}", var.name);
        if var.options.is_empty() {
            if let Err(e) = plantd_model::telemetry::check_name(&value) {
                v.add(field, e);
            }
        } else {
            v.check(
                var.options.contains(&value) || value == var.default,
                &field,
                format!("must be one of {}", var.options.join(", ")),
            );
        }
        out.push(VariableValue {
            name: var.name.clone(),
            label: var.label.clone(),
            value,
            options: var.options.clone(),
        });
    }
    v.finish()?;
    Ok(out)
}

/// The asset a widget reads: its query's, a `$variable` read as the variable's value.
fn asset_of(variables: &[VariableValue], q: &WidgetQuery) -> Option<String> {
    let asset = q.asset_id.as_deref()?;
    match asset.strip_prefix('$') {
        Some(name) => variables
            .iter()
            .find(|v| v.name == name)
            .map(|v| v.value.clone()),
        None => Some(asset.to_string()),
    }
}

/// Which table a chart of `range` seconds reads, its own bucket width, and the step its points
/// are combined over (a multiple of the table's width, so that at most `CHART_POINTS` remain).
fn chart_source(range: i64) -> (&'static str, i64, i64) {
    let (table, width) = match range {
        r if r <= 3_600 => ("telemetry", 1),
        r if r <= 2 * 86_400 => ("telemetry_1m", 60),
        r if r <= 60 * 86_400 => ("telemetry_1h", 3_600),
        _ => ("telemetry_1d", 86_400),
    };
    let wanted = (range + CHART_POINTS - 1) / CHART_POINTS;
    let step = ((wanted + width - 1) / width).max(1) * width;
    (table, width, step)
}

/// The SQL of a line chart: one row per tag and step, `(t, tag, v)`.
fn chart_sql(
    asset: &str,
    tags: &[String],
    agg: Aggregation,
    start: Timestamp,
    end: Timestamp,
) -> (String, i64) {
    let range = (end.millis() - start.millis()) / 1000;
    let (table, width, step) = chart_source(range);
    let step_ms = step * 1000;
    let raw = width == 1;
    let (time, value) = if raw {
        (
            "timestamp",
            match agg {
                Aggregation::Avg => "avg(value)",
                Aggregation::Min => "min(value)",
                Aggregation::Max => "max(value)",
                Aggregation::Sum => "sum(value)",
                Aggregation::Count => "CAST(count(value) AS DOUBLE)",
            },
        )
    } else {
        (
            "bucket",
            match agg {
                Aggregation::Avg => "sum(sum) / sum(count)",
                Aggregation::Min => "min(min)",
                Aggregation::Max => "max(max)",
                Aggregation::Sum => "sum(sum)",
                Aggregation::Count => "CAST(sum(count) AS DOUBLE)",
            },
        )
    };
    let tag_list = tags
        .iter()
        .map(|t| literal(t))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT (CAST({time} AS BIGINT) / {step_ms}) * {step_ms} AS t, CAST(tag_name AS VARCHAR) AS tag, {value} AS v \
         FROM {table} WHERE asset_id = {asset} AND tag_name IN ({tag_list}) \
         AND {time} >= {start} AND {time} < {end} GROUP BY 1, 2 ORDER BY 2, 1",
        asset = literal(asset),
        start = time_literal(start),
        end = time_literal(end),
    );
    (sql, if raw && step == 1 { 0 } else { step })
}

/// The SQL of the newest value of each tag within the range: `(tag, value, at, quality)`.
fn latest_sql(asset: &str, tags: &[String], start: Timestamp, end: Timestamp) -> String {
    let tag_list = tags
        .iter()
        .map(|t| literal(t))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "SELECT CAST(tag_name AS VARCHAR) AS tag, last_value(value ORDER BY timestamp) AS value, \
         max(timestamp) AS at, last_value(CAST(quality AS VARCHAR) ORDER BY timestamp) AS quality \
         FROM telemetry WHERE asset_id = {asset} AND tag_name IN ({tag_list}) \
         AND timestamp >= {start} AND timestamp < {end} GROUP BY 1",
        asset = literal(asset),
        start = time_literal(start),
        end = time_literal(end),
    )
}

/// The SQL of an alert list: open alerts, of one asset when the widget names it.
fn alerts_sql(asset: Option<&str>) -> String {
    let of_asset = asset
        .map(|a| format!(" AND asset_id = {}", literal(a)))
        .unwrap_or_default();
    format!(
        "SELECT rule_name, severity, status, asset_id, tag_name, value, title, triggered_at \
         FROM alerts WHERE status IN ('active', 'acknowledged'){of_asset} \
         ORDER BY triggered_at DESC LIMIT {ALERT_ROWS}"
    )
}

fn text_at(row: &[serde_json::Value], i: usize) -> Option<String> {
    row.get(i).and_then(|v| v.as_str()).map(str::to_string)
}

fn number_at(row: &[serde_json::Value], i: usize) -> Option<f64> {
    row.get(i).and_then(serde_json::Value::as_f64)
}

fn time_at(row: &[serde_json::Value], i: usize) -> Option<Timestamp> {
    row.get(i)
        .and_then(|v| v.as_str())
        .and_then(|s| Timestamp::parse(s).ok())
}

/// A widget's own failure (its SQL, or its time limit) shows on the widget; storage's fails
/// the whole read.
fn widget_error(e: BiError) -> AppResult<String> {
    match e {
        BiError::Query(_) | BiError::Timeout(_) => Ok(e.to_string()),
        BiError::Source(_) => Err(AppError::internal(
            "a dashboard widget's read of storage failed",
            e,
        )),
    }
}

impl App {
    /// What each widget of `dashboard` shows now, with the variables `chosen` (else their
    /// defaults), read through the BI engine under `rls` (within the organization's query
    /// timeout). The caller holds a query slot.
    pub(crate) async fn dashboard_data(
        &self,
        org_id: &str,
        config: &BiConfig,
        rls: &[Rls],
        dashboard: &Dashboard,
        chosen: &HashMap<String, String>,
    ) -> AppResult<DashboardData> {
        let variables = variable_values(&dashboard.layout, chosen)?;
        let now = Timestamp::now();
        let mut widgets = Vec::with_capacity(dashboard.layout.widgets.len());
        for w in &dashboard.layout.widgets {
            widgets.push(
                self.widget_data(org_id, config, rls, &variables, w, now)
                    .await?,
            );
        }
        Ok(DashboardData {
            dashboard_id: dashboard.id.clone(),
            name: dashboard.name.clone(),
            description: dashboard.description.clone(),
            columns: dashboard.layout.columns,
            generated_at: now,
            variables,
            widgets,
        })
    }

    async fn widget_data(
        &self,
        org_id: &str,
        config: &BiConfig,
        rls: &[Rls],
        variables: &[VariableValue],
        w: &Widget,
        now: Timestamp,
    ) -> AppResult<WidgetData> {
        let range = w
            .query
            .as_ref()
            .and_then(|q| q.range.as_deref())
            .and_then(plantd_model::dashboard::parse_range)
            .unwrap_or(DEFAULT_RANGE_SECS);
        let start = Timestamp::from_millis(now.millis() - range * 1000);
        let asset = w.query.as_ref().and_then(|q| asset_of(variables, q));
        let mut out = WidgetData {
            id: w.id.clone(),
            kind: w.kind,
            title: w.title.clone(),
            x: w.x,
            y: w.y,
            w: w.w,
            h: w.h,
            asset_id: asset.clone(),
            start,
            end: now,
            options: w.options.clone(),
            series: Vec::new(),
            latest: Vec::new(),
            alerts: Vec::new(),
            text: w.text.clone(),
            error: None,
        };
        let tags = w.query.as_ref().map(|q| q.tags.clone()).unwrap_or_default();
        let (sql, rows) = match w.kind {
            WidgetType::Text => return Ok(out),
            WidgetType::AlertList => (alerts_sql(asset.as_deref()), ALERT_ROWS),
            _ if asset.is_none() || tags.is_empty() => {
                out.error = Some("the widget names no asset or no tags".into());
                return Ok(out);
            }
            WidgetType::LineChart => {
                let agg = w
                    .query
                    .as_ref()
                    .and_then(|q| q.aggregation)
                    .unwrap_or(Aggregation::Avg);
                let (sql, step) =
                    chart_sql(asset.as_deref().unwrap_or_default(), &tags, agg, start, now);
                out.series = tags
                    .iter()
                    .map(|t| SeriesData {
                        tag: t.clone(),
                        step_secs: step,
                        points: Vec::new(),
                    })
                    .collect();
                (sql, WIDGET_ROWS)
            }
            WidgetType::Stat | WidgetType::Gauge => (
                latest_sql(asset.as_deref().unwrap_or_default(), &tags[..1], start, now),
                tags.len(),
            ),
            WidgetType::Table => (
                latest_sql(asset.as_deref().unwrap_or_default(), &tags, start, now),
                tags.len(),
            ),
        };
        let answer = match self.run_sql(org_id, config, rls, &sql, rows).await {
            Ok(a) => a,
            Err(e) => {
                out.error = Some(widget_error(e)?);
                return Ok(out);
            }
        };
        match w.kind {
            WidgetType::LineChart => {
                for row in &answer.rows {
                    let (Some(t), Some(tag)) =
                        (row.first().and_then(|v| v.as_i64()), text_at(row, 1))
                    else {
                        continue;
                    };
                    if let (Some(s), Some(v)) = (
                        out.series.iter_mut().find(|s| s.tag == tag),
                        number_at(row, 2),
                    ) {
                        s.points.push((t, v));
                    }
                }
            }
            WidgetType::AlertList => {
                out.alerts = answer
                    .rows
                    .iter()
                    .map(|r| AlertRow {
                        rule_name: text_at(r, 0),
                        severity: text_at(r, 1),
                        status: text_at(r, 2),
                        asset_id: text_at(r, 3),
                        tag_name: text_at(r, 4),
                        value: number_at(r, 5),
                        title: text_at(r, 6),
                        triggered_at: time_at(r, 7),
                    })
                    .collect();
            }
            _ => {
                let shown = if w.kind == WidgetType::Table {
                    &tags[..]
                } else {
                    &tags[..1]
                };
                out.latest = shown
                    .iter()
                    .map(|tag| {
                        let row = answer
                            .rows
                            .iter()
                            .find(|r| text_at(r, 0).as_deref() == Some(tag));
                        LatestValue {
                            tag: tag.clone(),
                            value: row.and_then(|r| number_at(r, 1)),
                            timestamp: row.and_then(|r| time_at(r, 2)),
                            quality: row.and_then(|r| text_at(r, 3)),
                        }
                    })
                    .collect();
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_read_the_finest_table_that_keeps_them_under_400_points() {
        assert_eq!(chart_source(900), ("telemetry", 1, 3));
        assert_eq!(chart_source(3_600), ("telemetry", 1, 9));
        assert_eq!(chart_source(86_400), ("telemetry_1m", 60, 240));
        assert_eq!(chart_source(7 * 86_400), ("telemetry_1h", 3_600, 3_600));
        assert_eq!(chart_source(30 * 86_400), ("telemetry_1h", 3_600, 7_200));
        assert_eq!(chart_source(365 * 86_400), ("telemetry_1d", 86_400, 86_400));
        for range in [60, 3_600, 86_400, 30 * 86_400, 366 * 86_400] {
            let (_, width, step) = chart_source(range);
            assert!(range / step <= CHART_POINTS && step % width == 0);
        }
    }

    #[test]
    fn names_in_widget_sql_are_literals() {
        let sql = latest_sql(
            "p'; DROP TABLE x; --",
            &["t'1".into()],
            Timestamp::from_millis(0),
            Timestamp::from_millis(1000),
        );
        assert!(sql.contains("asset_id = 'p''; DROP TABLE x; --'"));
        assert!(sql.contains("IN ('t''1')"));
    }
}
