//! Edge provisioning (SPEC 2.16, 4.15; issue 34): assets imported from a CSV, a YAML file or a
//! QR label become data sources named by their asset ids. Every line or entry is checked
//! before anything is written; an import with a bad line names each bad line and writes
//! nothing, and a good one is written in one transaction (`Store::provision_assets`).

use plantd_model::Validator;
use plantd_model::data_source::derive_endpoint;
use plantd_model::provisioning::{CSV_COLUMNS, EXTRA_KEYS, asset_rows, qr_entry};
use plantd_store::{AssetWrite, Provisioned, ProvisionedAsset};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashSet;

use crate::app::App;
use crate::error::{AppError, AppResult};

/// The largest file an import reads.
pub const MAX_IMPORT_BYTES: usize = 2 * 1024 * 1024;

/// The format of an imported file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    Csv,
    Yaml,
}

/// How assets came to the edge (kept with each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Csv,
    Yaml,
    Qr,
    Usb,
    Cloud,
    Clone,
    /// The demo assets an agent in `development` mode preloads.
    Development,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Csv => "csv",
            Method::Yaml => "yaml",
            Method::Qr => "qr",
            Method::Usb => "usb",
            Method::Cloud => "cloud",
            Method::Clone => "clone",
            Method::Development => "development",
        }
    }
}

/// What an import did.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ImportReport {
    /// Assets in the import, each now a data source.
    pub imported: usize,
    /// Data sources created, and updated (a source of that name existed).
    pub created: usize,
    pub updated: usize,
    pub assets: Vec<ImportedAsset>,
}

#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ImportedAsset {
    pub asset_id: String,
    pub data_source_id: String,
    pub created: bool,
}

impl From<Provisioned> for ImportedAsset {
    fn from(p: Provisioned) -> Self {
        Self {
            asset_id: p.asset_id,
            data_source_id: p.data_source_id,
            created: p.created,
        }
    }
}

/// The CSV's lines as entries named `line N` (the header is line 1), each cell under its
/// column's name; empty cells are left out (a default applies, or `is required`).
pub fn csv_entries(bytes: &[u8]) -> AppResult<Vec<(String, Value)>> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(bytes);
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| AppError::invalid("file", format!("the CSV cannot be read: {e}")))?
        .iter()
        .map(|h| h.to_ascii_lowercase())
        .collect();
    let mut v = Validator::new();
    for column in CSV_COLUMNS {
        if !header.iter().any(|h| h == column) {
            v.add(
                "header",
                format!(
                    "has no column '{column}'; the columns are {}",
                    CSV_COLUMNS.join(", ")
                ),
            );
        }
    }
    for h in &header {
        if !CSV_COLUMNS.contains(&h.as_str()) && !EXTRA_KEYS.contains(&h.as_str()) {
            v.add(
                "header",
                format!(
                    "unknown column '{h}'; the columns are {} (and optionally {})",
                    CSV_COLUMNS.join(", "),
                    EXTRA_KEYS.join(", ")
                ),
            );
        }
    }
    v.finish()?;
    let mut v = Validator::new();
    let mut entries = Vec::new();
    for record in reader.records() {
        let record = record
            .map_err(|e| AppError::invalid("file", format!("the CSV cannot be read: {e}")))?;
        // The file's line, counted from the record's byte offset (the reader does not count the
        // blank lines it skips).
        let line = record.position().map_or(0, |p| {
            // The position is where the previous record ended: past any blank lines.
            let mut at = (p.byte() as usize).min(bytes.len());
            while at < bytes.len() && matches!(bytes[at], b'\n' | b'\r') {
                at += 1;
            }
            bytes[..at].iter().filter(|b| **b == b'\n').count() + 1
        });
        if record.iter().all(str::is_empty) {
            continue;
        }
        let at = format!("line {line}");
        if record.len() != header.len() {
            v.add(
                at,
                format!(
                    "has {} cells; the header has {}",
                    record.len(),
                    header.len()
                ),
            );
            continue;
        }
        let obj: Map<String, Value> = header
            .iter()
            .zip(record.iter())
            .filter(|(_, cell)| !cell.is_empty())
            .map(|(h, cell)| (h.clone(), Value::String(cell.to_string())))
            .collect();
        entries.push((at, Value::Object(obj)));
    }
    v.finish()?;
    Ok(entries)
}

/// The YAML's assets, named `assets[i]`: a mapping with `assets: [...]`, or the list itself.
pub fn yaml_entries(bytes: &[u8]) -> AppResult<Vec<(String, Value)>> {
    let doc: Value = serde_yaml_ng::from_slice(bytes)
        .map_err(|e| AppError::invalid("file", format!("the YAML cannot be read: {e}")))?;
    let list = match doc {
        Value::Array(list) => list,
        Value::Object(mut top) => {
            if let Some(k) = top.keys().find(|k| k.as_str() != "assets") {
                return Err(AppError::invalid(
                    k.clone(),
                    "unknown key at the top of the file; it holds assets: [...]",
                ));
            }
            match top.remove("assets") {
                Some(Value::Array(list)) => list,
                _ => return Err(AppError::invalid("assets", "must be a list of assets")),
            }
        }
        _ => {
            return Err(AppError::invalid(
                "file",
                "must hold assets: [...] (or the list of assets)",
            ));
        }
    };
    Ok(named_entries(list))
}

/// A list of assets as entries named by their place, `assets[i]` (YAML, a clone, the cloud's
/// list).
pub(crate) fn named_entries(list: Vec<Value>) -> Vec<(String, Value)> {
    list.into_iter()
        .enumerate()
        .map(|(i, a)| (format!("assets[{i}]"), a))
        .collect()
}

impl App {
    /// Writes points an edge agent in `demo` mode generates (no device connections), through
    /// the same ingest as a connector's.
    pub async fn write_generated(
        &self,
        org_id: &str,
        points: Vec<plantd_model::telemetry::Point>,
    ) -> AppResult<crate::telemetry::Stored> {
        let tier = self.store().org(org_id).await?.tier;
        let caller = crate::Caller {
            credential: crate::Credential::Generator,
            org_id: org_id.to_string(),
            user_id: None,
            scopes: vec![plantd_model::Scope::WriteTelemetry],
            tier,
        };
        self.ingest(&caller, crate::telemetry::Batch::Points(points), None)
            .await
    }

    /// Imports a file: a CSV (columns asset_id, asset_type, protocol, host, port, sensors) or a
    /// YAML file (docs/api.md, "Edge provisioning").
    pub async fn import_file(
        &self,
        org_id: &str,
        format: FileFormat,
        bytes: &[u8],
        method: Method,
    ) -> AppResult<ImportReport> {
        let entries = match format {
            FileFormat::Csv => csv_entries(bytes)?,
            FileFormat::Yaml => yaml_entries(bytes)?,
        };
        self.provision(org_id, entries, method).await
    }

    /// Imports a QR label's payload `{id, t, h, s: [{n, a}]}`.
    pub async fn import_qr(&self, org_id: &str, payload: &Value) -> AppResult<ImportReport> {
        // The label's own problems (unknown keys) and its asset's are answered together.
        let mut v = Validator::new();
        let Some(entry) = qr_entry(payload, &mut v) else {
            return Err(v.finish().err().map_or_else(
                || AppError::invalid("body", "must be the label's JSON object"),
                AppError::from,
            ));
        };
        let entries = vec![("label".to_string(), entry)];
        self.provision_checked(org_id, entries, Method::Qr, v).await
    }

    /// Assets as JSON entries (a clone or a cloud sync), named `assets[i]`.
    pub async fn import_entries(
        &self,
        org_id: &str,
        assets: Vec<Value>,
        method: Method,
    ) -> AppResult<ImportReport> {
        self.import_entries_checked(org_id, assets, method, Validator::new())
            .await
    }

    /// Assets as JSON entries named `assets[i]`, refused with `v`'s problems too (a clone's
    /// rules).
    pub(crate) async fn import_entries_checked(
        &self,
        org_id: &str,
        assets: Vec<Value>,
        method: Method,
        v: Validator,
    ) -> AppResult<ImportReport> {
        self.provision_checked(org_id, named_entries(assets), method, v)
            .await
    }

    /// The organization's provisioned assets, by asset id.
    pub async fn provisioned_assets(&self, org_id: &str) -> AppResult<Vec<ProvisionedAsset>> {
        Ok(self.store().provisioned_assets(org_id).await?)
    }

    async fn provision(
        &self,
        org_id: &str,
        entries: Vec<(String, Value)>,
        method: Method,
    ) -> AppResult<ImportReport> {
        self.provision_checked(org_id, entries, method, Validator::new())
            .await
    }

    /// Provisions `entries`, refused with `v`'s problems too.
    async fn provision_checked(
        &self,
        org_id: &str,
        entries: Vec<(String, Value)>,
        method: Method,
        mut v: Validator,
    ) -> AppResult<ImportReport> {
        let known: HashSet<String> = self
            .store()
            .provisioned_assets(org_id)
            .await?
            .into_iter()
            .map(|p| p.asset.asset_id)
            .collect();
        let checked = asset_rows(&entries, &known, &mut v);
        v.finish()?;
        let writes: Vec<AssetWrite<'_>> = checked
            .iter()
            .map(|a| AssetWrite {
                row: &a.row,
                endpoint: derive_endpoint(a.row.protocol, &a.config),
                config: a.config.clone(),
            })
            .collect();
        let done = self
            .store()
            .provision_assets(org_id, method.as_str(), &writes)
            .await?;
        let created = done.iter().filter(|p| p.created).count();
        Ok(ImportReport {
            imported: done.len(),
            created,
            updated: done.len() - created,
            assets: done.into_iter().map(ImportedAsset::from).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(e: AppError) -> Vec<(String, String)> {
        match e {
            AppError::Invalid(errors) => errors.into_iter().map(|f| (f.field, f.message)).collect(),
            other => panic!("not a validation error: {other}"),
        }
    }

    #[test]
    fn csv_lines_become_entries_and_a_bad_header_is_named() {
        let csv = "\u{feff}asset_id,asset_type,protocol,host,port,sensors\n\
                   Pump_01,centrifugal_pump,modbus,10.0.0.5,502,Flow:0;Pressure:2\n\
                   \n\
                   Motor_01,electric_motor,opcua,plc.local,4840,Speed\n";
        let entries = csv_entries(csv.as_bytes()).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].0, "line 2");
        assert_eq!(entries[1].0, "line 4");
        assert_eq!(entries[0].1["sensors"], "Flow:0;Pressure:2");
        let bad = csv_entries(b"asset_id,kind,protocol,host,port\n").unwrap_err();
        let m = messages(bad);
        assert!(
            m.iter()
                .any(|(f, t)| f == "header" && t.contains("'sensors'")),
            "{m:?}"
        );
        assert!(
            m.iter().any(|(f, t)| f == "header" && t.contains("'kind'")),
            "{m:?}"
        );
        let short = csv_entries(b"asset_id,asset_type,protocol,host,port,sensors\nP,t,modbus\n")
            .unwrap_err();
        assert_eq!(messages(short)[0].0, "line 2");
    }

    #[test]
    fn yaml_takes_a_list_or_assets() {
        let a = yaml_entries(b"assets:\n  - id: P1\n    type: pump\n").unwrap();
        assert_eq!(a[0].0, "assets[0]");
        assert_eq!(a[0].1["id"], "P1");
        let b = yaml_entries(b"- id: P1\n- id: P2\n").unwrap();
        assert_eq!(b.len(), 2);
        let m = messages(yaml_entries(b"asets: []\n").unwrap_err());
        assert_eq!(m[0].0, "asets");
        let m = messages(yaml_entries(b"assets: [\n").unwrap_err());
        assert_eq!(m[0].0, "file");
    }
}
