//! The plant at a glance (the console's overview): every tag's latest value with its state,
//! what needs attention first, searched and paged so that a plant of 100,000 tags sends a page
//! of them and not all.

use std::collections::HashMap;

use plantd_model::Timestamp;
use plantd_model::alert::{Alert, Severity};

use crate::telemetry::Reading;
use crate::{App, AppResult};

/// Rows on one page of the overview.
pub const OVERVIEW_PAGE_ROWS: usize = 200;

/// What the overview shows of the tags.
#[derive(Clone, Debug, Default)]
pub struct OverviewQuery {
    /// Case-insensitive part of an asset's name (all its tags) or of a tag's name.
    pub search: Option<String>,
    /// Only tags in alarm or stale.
    pub abnormal_only: bool,
    /// 1-based.
    pub page: usize,
}

/// How a tag stands, in the order the overview shows them: alarms first (most severe first),
/// then stale values, then the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TagState {
    Alarm(SeverityRank),
    Stale,
    Normal,
}

/// A severity ordered most severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SeverityRank(u8);

impl SeverityRank {
    fn of(s: Severity) -> Self {
        Self(match s {
            Severity::Critical => 0,
            Severity::Warning => 1,
            Severity::Info => 2,
        })
    }
    pub fn severity(self) -> Severity {
        match self.0 {
            0 => Severity::Critical,
            1 => Severity::Warning,
            _ => Severity::Info,
        }
    }
}

impl TagState {
    pub fn abnormal(self) -> bool {
        self != TagState::Normal
    }
}

/// One tag on the overview.
#[derive(Clone, Debug)]
pub struct OverviewRow {
    pub asset_id: String,
    pub reading: Reading,
    pub unit: Option<String>,
    pub state: TagState,
}

/// One page of the overview, and counts of the whole organization.
#[derive(Clone, Debug)]
pub struct Overview {
    /// The page's rows, grouped by asset: assets with the worst state first, then by name;
    /// within an asset, by state, then tag name.
    pub rows: Vec<OverviewRow>,
    /// Rows matching the search and filter, on every page.
    pub matching: usize,
    pub page: usize,
    pub pages: usize,
    /// The organization's assets and tags, tags in alarm and stale ones (abnormal ones counted
    /// once, as alarms when both).
    pub assets: usize,
    pub tags: usize,
    pub in_alarm: usize,
    pub stale: usize,
    /// The page shows every tag of the organization (no search, no filter, one page): a tag
    /// that appears later belongs on it too.
    pub complete: bool,
    /// Open alerts, newest first.
    pub open_alerts: Vec<Alert>,
}

impl App {
    /// One page of the overview (see [`OverviewQuery`]).
    pub async fn overview(&self, org_id: &str, q: &OverviewQuery) -> AppResult<Overview> {
        let series = self.tsdb().series_sources(org_id).await?;
        let mut asset_names: Vec<String> = series.iter().map(|(a, _, _)| a.clone()).collect();
        asset_names.dedup();
        let latest = self.tsdb().latest_of_assets(org_id, &asset_names).await?;
        let sources = self.store().org_data_sources(org_id).await?;
        let units = self.tag_units(org_id).await?;
        let open_alerts = self.store().open_alerts_of(org_id).await?;
        let now = Timestamp::now();

        // The most severe open alert of each (asset, tag); an alert without a tag marks every
        // tag of its asset.
        let mut alarms: HashMap<(&str, Option<&str>), SeverityRank> = HashMap::new();
        for a in &open_alerts {
            let rank = SeverityRank::of(a.severity);
            let slot = alarms
                .entry((a.asset_id.as_str(), a.tag_name.as_deref()))
                .or_insert(rank);
            *slot = (*slot).min(rank);
        }
        let source_of: HashMap<(&str, &str), Option<&str>> = series
            .iter()
            .map(|(a, t, d)| ((a.as_str(), t.as_str()), d.as_deref()))
            .collect();

        let needle = q
            .search
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_lowercase);
        let (mut tags, mut in_alarm, mut stale) = (0, 0, 0);
        // Each asset's rows that match, with the asset's worst state.
        let mut groups: Vec<(TagState, String, Vec<OverviewRow>)> = Vec::new();
        for (asset, values) in latest {
            let asset_matches = needle
                .as_deref()
                .is_none_or(|n| asset.to_lowercase().contains(n));
            let mut rows = Vec::new();
            for v in values {
                let source = source_of
                    .get(&(asset.as_str(), v.tag_name.as_str()))
                    .copied()
                    .flatten()
                    .and_then(|id| sources.iter().find(|d| d.id == id));
                let reading = Reading::of(v, source, now);
                let alarm = [Some(reading.tag_name.as_str()), None]
                    .into_iter()
                    .filter_map(|t| alarms.get(&(asset.as_str(), t)).copied())
                    .min();
                let state = match alarm {
                    Some(rank) => TagState::Alarm(rank),
                    None if reading.stale => TagState::Stale,
                    None => TagState::Normal,
                };
                tags += 1;
                match state {
                    TagState::Alarm(_) => in_alarm += 1,
                    TagState::Stale => stale += 1,
                    TagState::Normal => {}
                }
                let wanted = (asset_matches
                    || needle
                        .as_deref()
                        .is_some_and(|n| reading.tag_name.to_lowercase().contains(n)))
                    && (!q.abnormal_only || state.abnormal());
                if wanted {
                    rows.push(OverviewRow {
                        unit: None,
                        asset_id: asset.clone(),
                        reading,
                        state,
                    });
                }
            }
            if !rows.is_empty() {
                rows.sort_by(|a, b| {
                    (a.state, &a.reading.tag_name).cmp(&(b.state, &b.reading.tag_name))
                });
                groups.push((rows[0].state, asset, rows));
            }
        }
        groups.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let matching: usize = groups.iter().map(|g| g.2.len()).sum();
        let pages = matching.div_ceil(OVERVIEW_PAGE_ROWS).max(1);
        let page = q.page.clamp(1, pages);
        let mut rows: Vec<OverviewRow> = groups
            .into_iter()
            .flat_map(|g| g.2)
            .skip((page - 1) * OVERVIEW_PAGE_ROWS)
            .take(OVERVIEW_PAGE_ROWS)
            .collect();
        for row in &mut rows {
            row.unit = units
                .get(&(row.asset_id.clone(), row.reading.tag_name.clone()))
                .cloned();
        }
        Ok(Overview {
            complete: needle.is_none() && !q.abnormal_only && pages == 1,
            rows,
            matching,
            page,
            pages,
            assets: asset_names.len(),
            tags,
            in_alarm,
            stale,
            open_alerts,
        })
    }
}
