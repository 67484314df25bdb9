//! Labeling of ML datasets (docs/api.md, "Labeling"): label classes with their exact counts,
//! each row's label, skip and flag, and labels imported and exported as CSV or JSON.

use std::collections::{HashMap, HashSet};

use plantd_ml::csv_in::{self, CsvRefusal};
use plantd_model::ml::{CLASS_COLORS, LabelClass, RowLabel, check_label_class};
use plantd_model::validation::Validator;
use plantd_model::{FieldError, Timestamp};
pub use plantd_store::LabelChange;
use serde::Deserialize;
use serde_json::Value;

use crate::app::App;
use crate::error::{AppError, AppResult};

/// `POST /v1/ml/datasets/{id}/label-classes`.
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewLabelClass {
    pub name: String,
    /// `#rrggbb`; default: the first of ten distinct colours no class of the dataset has.
    pub color: Option<String>,
    #[serde(default)]
    pub description: String,
}

/// The largest label import: 64 MiB.
pub const MAX_LABEL_FILE_BYTES: usize = 64 * 1024 * 1024;
/// Lines a label import holds at most.
const MAX_IMPORT_LINES: usize = 2_000_000;
/// Label changes written per transaction by an import.
const IMPORT_BATCH: usize = 5000;

/// What an import did.
#[derive(Clone, Debug, serde::Serialize, utoipa::ToSchema)]
pub struct LabelImport {
    pub imported: u64,
    pub cleared: u64,
}

/// How labels are exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LabelFormat {
    Csv,
    Json,
}

impl App {
    pub async fn label_classes(
        &self,
        org_id: &str,
        dataset_id: &str,
    ) -> AppResult<Vec<LabelClass>> {
        self.dataset(org_id, dataset_id).await?;
        Ok(self.store().label_classes(dataset_id).await?)
    }

    pub async fn create_label_class(
        &self,
        org_id: &str,
        dataset_id: &str,
        new: NewLabelClass,
    ) -> AppResult<LabelClass> {
        let existing = self.label_classes(org_id, dataset_id).await?;
        let name = new.name.trim().to_string();
        // The first colour of the palette no class has yet (in turn once all are taken).
        let color = new
            .color
            .unwrap_or_else(|| {
                CLASS_COLORS
                    .iter()
                    .find(|c| !existing.iter().any(|e| e.color == **c))
                    .unwrap_or(&CLASS_COLORS[existing.len() % CLASS_COLORS.len()])
                    .to_string()
            })
            .to_ascii_lowercase();
        let mut v = Validator::new();
        check_label_class(&mut v, &name, &color, &new.description);
        v.finish()?;
        let class = LabelClass {
            id: plantd_model::new_id(),
            dataset_id: dataset_id.to_string(),
            name,
            color,
            description: new.description,
            count: 0,
            created_at: Timestamp::now(),
        };
        match self.store().insert_label_class(&class).await {
            Ok(true) => Ok(class),
            Ok(false) => Err(AppError::invalid(
                "name",
                format!(
                    "a dataset has at most {} label classes",
                    plantd_model::ml::MAX_LABEL_CLASSES
                ),
            )),
            Err(plantd_store::StoreError::Conflict(m)) => {
                Err(AppError::Invalid(vec![FieldError::new("name", m)]))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The row id of a path: an integer naming a row of the working copy, else not found.
    async fn working_row(&self, org_id: &str, dataset_id: &str, row_id: &str) -> AppResult<u64> {
        let d = self.dataset(org_id, dataset_id).await?;
        match row_id.parse::<u64>() {
            Ok(r) if r >= 1 && r <= d.row_count => Ok(r),
            _ => Err(AppError::NotFound("row")),
        }
    }

    pub async fn change_row_label(
        &self,
        org_id: &str,
        dataset_id: &str,
        row_id: &str,
        change: LabelChange,
    ) -> AppResult<RowLabel> {
        let row = self.working_row(org_id, dataset_id, row_id).await?;
        if let LabelChange::Set(class) = &change
            && !self.store().label_class_exists(dataset_id, class).await?
        {
            return Err(AppError::invalid(
                "label_class_id",
                "is not a label class of this dataset",
            ));
        }
        let mut out = self
            .store()
            .change_labels(dataset_id, &[(row, change)])
            .await?;
        out.pop()
            .ok_or_else(|| AppError::internal("labeling a row", std::io::Error::other("no row")))
    }

    /// Imports labels by class name: every line checked before anything is written.
    pub async fn import_labels(
        &self,
        org_id: &str,
        dataset_id: &str,
        file: &[u8],
    ) -> AppResult<LabelImport> {
        let d = self.dataset(org_id, dataset_id).await?;
        let classes: HashMap<String, String> = self
            .store()
            .label_classes(dataset_id)
            .await?
            .into_iter()
            .map(|c| (c.name, c.id))
            .collect();
        let json = file
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|b| *b == b'[');
        // (where, row id as sent, label: `Ok(None)` clears, `Err` is not a label)
        let entries: Vec<(String, Value, Result<Option<String>, Value>)> = if json {
            let items: Vec<Value> = serde_json::from_slice(file).map_err(|e| {
                AppError::invalid(
                    "file",
                    format!("is not a JSON array of {{row_id, label}}: {e}"),
                )
            })?;
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| {
                    // A label is a class name; null or "" clears; anything else is refused below.
                    let label = match item.get("label") {
                        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
                        Some(Value::String(_)) | Some(Value::Null) => Ok(None),
                        other => Err(other.cloned().unwrap_or(Value::Null)),
                    };
                    let row = item.get("row_id").cloned().unwrap_or(Value::Null);
                    (format!("[{i}]"), row, label)
                })
                .collect()
        } else {
            csv_in::read_label_csv(file)
                .map_err(|r| match r {
                    CsvRefusal::Lines { first, .. } => AppError::Invalid(
                        first
                            .into_iter()
                            .map(|l| FieldError::new("file", l))
                            .collect(),
                    ),
                    CsvRefusal::Header(m) | CsvRefusal::Read(m) => AppError::invalid("file", m),
                    CsvRefusal::Stopped => AppError::invalid("file", "was cut short"),
                })?
                .into_iter()
                .map(|(line, row, label)| {
                    let label = Ok((!label.is_empty()).then_some(label));
                    (format!("line {line}"), Value::String(row), label)
                })
                .collect()
        };
        if entries.len() > MAX_IMPORT_LINES {
            return Err(AppError::invalid(
                "file",
                format!("holds {} labels; at most {MAX_IMPORT_LINES}", entries.len()),
            ));
        }
        let mut bad = Vec::new();
        let mut seen = HashSet::new();
        let mut changes = Vec::with_capacity(entries.len());
        for (at, row, label) in entries {
            let row_id = match &row {
                Value::Number(n) => n.as_u64(),
                Value::String(s) => s.trim().parse::<u64>().ok(),
                _ => None,
            };
            let Some(row_id) = row_id.filter(|r| *r >= 1 && *r <= d.row_count) else {
                bad.push(format!(
                    "{at}: row_id {row} is not a row of the dataset (1 to {})",
                    d.row_count
                ));
                continue;
            };
            if !seen.insert(row_id) {
                bad.push(format!("{at}: row {row_id} is labelled twice"));
                continue;
            }
            match label {
                Err(v) => bad.push(format!(
                    "{at}: label {v} is not a class name (a string) or null"
                )),
                Ok(None) => changes.push((row_id, LabelChange::Clear)),
                Ok(Some(name)) => match classes.get(&name) {
                    Some(id) => changes.push((row_id, LabelChange::Set(id.clone()))),
                    None => bad.push(format!(
                        "{at}: '{name}' is not a label class of the dataset"
                    )),
                },
            }
        }
        if !bad.is_empty() {
            let total = bad.len();
            let mut details: Vec<FieldError> = bad
                .into_iter()
                .take(csv_in::MAX_NAMED_LINES)
                .map(|m| FieldError::new("file", m))
                .collect();
            details.push(FieldError::new(
                "file",
                format!("{total} labels are refused; nothing was stored"),
            ));
            return Err(AppError::Invalid(details));
        }
        let cleared = changes
            .iter()
            .filter(|(_, c)| matches!(c, LabelChange::Clear))
            .count() as u64;
        for batch in changes.chunks(IMPORT_BATCH) {
            self.store().change_labels(dataset_id, batch).await?;
        }
        Ok(LabelImport {
            imported: changes.len() as u64 - cleared,
            cleared,
        })
    }

    /// The labelled rows as the import reads them: `(content type, body)`.
    pub async fn export_labels(
        &self,
        org_id: &str,
        dataset_id: &str,
        format: LabelFormat,
    ) -> AppResult<String> {
        let classes: HashMap<String, String> = self
            .label_classes(org_id, dataset_id)
            .await?
            .into_iter()
            .map(|c| (c.id, c.name))
            .collect();
        let rows = self.store().labelled_rows(dataset_id).await?;
        let named = rows
            .into_iter()
            .filter_map(|(r, c)| classes.get(&c).map(|n| (r, n.clone())));
        Ok(match format {
            LabelFormat::Json => {
                let items: Vec<Value> = named
                    .map(|(r, n)| serde_json::json!({"row_id": r, "label": n}))
                    .collect();
                Value::Array(items).to_string()
            }
            LabelFormat::Csv => {
                let mut w = csv::Writer::from_writer(Vec::new());
                let _ = w.write_record(["row_id", "label"]);
                for (r, n) in named {
                    let _ = w.write_record([r.to_string(), n]);
                }
                String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
            }
        })
    }
}
