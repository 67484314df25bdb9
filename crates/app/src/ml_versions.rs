//! Versions, validation and quality of ML datasets (docs/api.md, "Versions", "Validation and
//! quality"): versions made and rolled back by generation, compared row by row where their
//! chunks differ; validation rules checked when made and run over every row; column profiles.

use std::collections::HashMap;

use plantd_ml::chunk::Chunk;
use plantd_ml::profile::Profiler;
use plantd_ml::rules::{Checker, check_rule};
use plantd_model::Timestamp;
use plantd_model::ml::{
    ColumnChange, ColumnProfile, Comparison, DatasetVersion, Quality, RuleType, ValidationResult,
    ValidationRule,
};
use plantd_model::page::{Page, Paged};
use plantd_model::validation::Validator;
use plantd_store::Span;
use serde::Deserialize;
use serde_json::Value;

use crate::app::App;
use crate::caller::Caller;
use crate::error::{AppError, AppResult};
use crate::ml_datasets::corrupt;

/// `POST /v1/ml/datasets/{id}/validation-rules`.
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRule {
    pub name: String,
    pub rule_type: RuleType,
    pub column: String,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub config: Value,
}

/// The version a comparison names for the working copy.
pub const WORKING: &str = "working";

/// Reads one side of a comparison row by row, decoding each chunk once.
struct Side {
    spans: Vec<Span>,
    at: usize,
    chunk: Option<(String, Chunk)>,
}

impl Side {
    /// The span holding `row`, moving forward only.
    fn span(&mut self, row: u64) -> Option<&Span> {
        while self
            .spans
            .get(self.at)
            .is_some_and(|s| s.first_row_id + s.row_count <= row)
        {
            self.at += 1;
        }
        self.spans.get(self.at).filter(|s| s.first_row_id <= row)
    }
}

impl App {
    pub async fn dataset_versions(
        &self,
        org_id: &str,
        dataset_id: &str,
        page: Page,
    ) -> AppResult<Paged<DatasetVersion>> {
        self.dataset(org_id, dataset_id).await?;
        let (items, total) = self
            .store()
            .dataset_versions(dataset_id, (page.limit(), page.offset()))
            .await?;
        Ok(Paged { items, total })
    }

    pub async fn dataset_version(
        &self,
        org_id: &str,
        dataset_id: &str,
        version: &str,
    ) -> AppResult<DatasetVersion> {
        self.dataset(org_id, dataset_id).await?;
        self.store()
            .dataset_version(dataset_id, version)
            .await
            .map_err(AppError::missing("version"))
    }

    /// Freezes the working copy as the next version.
    pub async fn create_dataset_version(
        &self,
        caller: &Caller,
        dataset_id: &str,
        notes: &str,
    ) -> AppResult<DatasetVersion> {
        self.dataset(&caller.org_id, dataset_id).await?;
        let mut v = Validator::new();
        v.check(
            notes.chars().count() <= 2000,
            "notes",
            "must be at most 2000 characters",
        );
        v.finish()?;
        Ok(self
            .store()
            .create_dataset_version(dataset_id, notes, caller.actor(), Timestamp::now())
            .await?)
    }

    pub async fn rollback_dataset(
        &self,
        org_id: &str,
        dataset_id: &str,
        version: &str,
    ) -> AppResult<plantd_model::ml::Dataset> {
        let v = self.dataset_version(org_id, dataset_id, version).await?;
        self.store()
            .rollback_dataset(dataset_id, v.generation)
            .await?;
        self.dataset(org_id, dataset_id).await
    }

    /// A version's generation and row count, or the working copy's (`working_rows`).
    async fn side(
        &self,
        dataset_id: &str,
        working_rows: u64,
        version: &str,
        field: &str,
    ) -> AppResult<(Option<i64>, u64)> {
        if version == WORKING {
            return Ok((None, working_rows));
        }
        match self.store().dataset_version(dataset_id, version).await {
            Ok(v) => Ok((Some(v.generation), v.row_count)),
            Err(plantd_store::StoreError::NotFound) => Err(AppError::invalid(
                field,
                format!("'{version}' is not a version of the dataset (or '{WORKING}')"),
            )),
            Err(e) => Err(e.into()),
        }
    }

    pub async fn compare_versions(
        &self,
        org_id: &str,
        dataset_id: &str,
        v1: &str,
        v2: &str,
    ) -> AppResult<Comparison> {
        let d = self.dataset(org_id, dataset_id).await?;
        let (g1, n1) = self.side(dataset_id, d.row_count, v1, "v1").await?;
        let (g2, n2) = self.side(dataset_id, d.row_count, v2, "v2").await?;
        let mut a = Side {
            spans: self
                .store()
                .dataset_spans(dataset_id, g1, (1, u64::MAX))
                .await?,
            at: 0,
            chunk: None,
        };
        let mut b = Side {
            spans: self
                .store()
                .dataset_spans(dataset_id, g2, (1, u64::MAX))
                .await?,
            at: 0,
            chunk: None,
        };
        let mut changed = 0u64;
        let mut row = 1u64;
        let common = n1.min(n2);
        while row <= common {
            let (Some(sa), Some(sb)) = (a.span(row).cloned(), b.span(row).cloned()) else {
                break;
            };
            let end = (sa.first_row_id + sa.row_count).min(sb.first_row_id + sb.row_count);
            if sa.chunk_id == sb.chunk_id && sa.first_row_id == sb.first_row_id {
                // The same chunk at the same rows: nothing differs.
                row = end;
                continue;
            }
            for (side, span) in [(&mut a, &sa), (&mut b, &sb)] {
                if side
                    .chunk
                    .as_ref()
                    .is_none_or(|(id, _)| *id != span.chunk_id)
                {
                    let data = self.store().chunk_data(&span.chunk_id).await?;
                    side.chunk = Some((
                        span.chunk_id.clone(),
                        Chunk::decode(&data).map_err(corrupt)?,
                    ));
                }
            }
            if let (Some((_, ca)), Some((_, cb))) = (&a.chunk, &b.chunk) {
                for r in row..end.min(common + 1) {
                    let ia = (r - sa.first_row_id) as usize;
                    let ib = (r - sb.first_row_id) as usize;
                    if !ca.same_row(ia, cb, ib) {
                        changed += 1;
                    }
                }
            }
            row = end;
        }
        // Labels: a row's state on each side, compared by content.
        let holds = |g: Option<i64>, from: i64, to: Option<i64>| match g {
            None => to.is_none(),
            Some(g) => from <= g && to.is_none_or(|t| t > g),
        };
        let mut states: HashMap<u64, [Option<plantd_model::ml::RowLabel>; 2]> = HashMap::new();
        for (label, from, to) in self.store().label_records(dataset_id, g1, g2).await? {
            let entry = states.entry(label.row_id).or_default();
            if holds(g1, from, to) {
                entry[0] = Some(label.clone());
            }
            if holds(g2, from, to) {
                entry[1] = Some(label);
            }
        }
        let labels_changed = states.values().filter(|[x, y]| x != y).count() as u64;
        let before = self.profile(dataset_id, g1, &d.columns).await?;
        let after = self.profile(dataset_id, g2, &d.columns).await?;
        Ok(Comparison {
            v1: v1.to_string(),
            v2: v2.to_string(),
            rows_added: n2.saturating_sub(n1),
            rows_removed: n1.saturating_sub(n2),
            rows_changed: changed,
            labels_changed,
            columns: before
                .into_iter()
                .zip(after)
                .map(|(before, after)| ColumnChange {
                    name: before.name.clone(),
                    column_type: before.column_type,
                    before,
                    after,
                })
                .collect(),
        })
    }

    async fn profile(
        &self,
        dataset_id: &str,
        generation: Option<i64>,
        columns: &[plantd_model::ml::Column],
    ) -> AppResult<Vec<ColumnProfile>> {
        let p = self
            .scan_rows(dataset_id, generation, Profiler::new(columns), |p, _, c| {
                p.add(c)
            })
            .await?;
        Ok(p.finish())
    }

    pub async fn validation_rules(
        &self,
        org_id: &str,
        dataset_id: &str,
    ) -> AppResult<Vec<ValidationRule>> {
        self.dataset(org_id, dataset_id).await?;
        Ok(self.store().validation_rules(dataset_id).await?)
    }

    pub async fn create_validation_rule(
        &self,
        org_id: &str,
        dataset_id: &str,
        new: NewRule,
    ) -> AppResult<ValidationRule> {
        let d = self.dataset(org_id, dataset_id).await?;
        let name = new.name.trim().to_string();
        let mut v = Validator::new();
        v.check(
            (1..=100).contains(&name.chars().count()),
            "name",
            "must be 1 to 100 characters",
        );
        let column = d.columns.iter().find(|c| c.name == new.column);
        check_rule(&mut v, new.rule_type, column, &new.config);
        v.finish()?;
        let rule = ValidationRule {
            id: plantd_model::new_id(),
            dataset_id: dataset_id.to_string(),
            name,
            rule_type: new.rule_type,
            column: new.column,
            config: if new.config.is_null() {
                serde_json::json!({})
            } else {
                new.config
            },
            created_at: Timestamp::now(),
        };
        if !self.store().insert_rule(&rule).await? {
            return Err(AppError::invalid(
                "name",
                format!(
                    "a dataset has at most {} validation rules",
                    plantd_model::ml::MAX_RULES
                ),
            ));
        }
        Ok(rule)
    }

    /// Runs every rule over every row of the working copy; the result is kept as the last.
    pub async fn validate_dataset(
        &self,
        org_id: &str,
        dataset_id: &str,
    ) -> AppResult<ValidationResult> {
        let d = self.dataset(org_id, dataset_id).await?;
        let rules = self.store().validation_rules(dataset_id).await?;
        let checker = self
            .scan_rows(
                dataset_id,
                None,
                Checker::new(&rules, &d.columns),
                |c, first, chunk| c.add(first, chunk),
            )
            .await?;
        let result = checker.finish(Timestamp::now());
        self.store()
            .set_last_validation(dataset_id, &result)
            .await?;
        Ok(result)
    }

    pub async fn dataset_quality(&self, org_id: &str, dataset_id: &str) -> AppResult<Quality> {
        let d = self.dataset(org_id, dataset_id).await?;
        let columns = self.profile(dataset_id, None, &d.columns).await?;
        Ok(Quality {
            row_count: d.row_count,
            columns,
            last_validation: self.store().last_validation(dataset_id).await?,
        })
    }
}
