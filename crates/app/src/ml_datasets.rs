//! ML datasets (SPEC 2.7, 4.5; docs/api.md, "ML datasets"): create (empty, with declared
//! columns, or filled from a telemetry query), list, read, the streamed CSV upload, the
//! preview, and the scan every profile and validation reads the rows with. Labels are in
//! `ml_labels.rs`, versions, rules and quality in `ml_versions.rs`.

use std::collections::BTreeMap;

use plantd_ml::chunk::{CHUNK_ROWS, Chunk};
use plantd_ml::csv_in::{self, CsvOutcome, CsvRefusal, EncodedChunk};
use plantd_ml::{Cell, ChunkError};
use plantd_model::page::{Page, Paged};
use plantd_model::validation::Validator;
use plantd_model::{FieldError, Timestamp};
use plantd_store::{NewDataset as StoredDataset, StoreError};
use plantd_tsdb::TelemetryFilter;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

pub use plantd_model::ml::{
    Column, ColumnType, Comparison, Dataset, DatasetSource, DatasetVersion, LabelClass, Quality,
    RowLabel, TelemetrySource, ValidationResult, ValidationRule,
};

use crate::app::App;
use crate::caller::Caller;
use crate::error::{AppError, AppResult};

/// The largest CSV file an upload takes: 1 GiB (docs/api.md, "Upload").
pub const MAX_DATASET_FILE_BYTES: u64 = 1024 * 1024 * 1024;
/// The most cells a dataset made from telemetry holds (buckets x series).
const MAX_TELEMETRY_CELLS: i64 = 10_000_000;

/// `POST /v1/ml/datasets`.
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewDataset {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The columns uploads must have; without them the first upload's header and inferred
    /// types make them.
    pub columns: Option<Vec<Column>>,
    /// Fill the dataset from telemetry instead.
    pub telemetry: Option<TelemetrySource>,
}

/// A row of a preview.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct PreviewRow {
    pub row_id: u64,
    #[schema(value_type = Object)]
    pub values: serde_json::Map<String, Value>,
    pub label_class_id: Option<String>,
    pub skipped: bool,
    pub flagged: bool,
}

/// `GET /v1/ml/datasets/{id}/preview`'s `data`.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct Preview {
    pub columns: Vec<Column>,
    pub rows: Vec<PreviewRow>,
}

type Parser = tokio::task::JoinHandle<Result<CsvOutcome, CsvRefusal>>;
type Writer = tokio::task::JoinHandle<Result<(), StoreError>>;

/// A CSV file being received: parsed on a thread of its own as it arrives, its chunks staged
/// in the database as they fill; nothing is part of the dataset until [`App::finish_upload`]
/// found the whole file good. Dropped unfinished, it removes what it staged.
pub struct DatasetUpload {
    dataset_id: String,
    upload_id: String,
    replace: bool,
    bytes: Option<mpsc::Sender<Vec<u8>>>,
    /// The parser and the chunk writer, until [`App::finish_upload`] waits for them.
    tasks: Option<(Parser, Writer)>,
    size: u64,
    store: plantd_store::Store,
    finished: bool,
}

impl DatasetUpload {
    /// Hands a piece of the file to the parser; refuses a file beyond the limit.
    pub async fn write(&mut self, piece: &[u8]) -> AppResult<()> {
        self.size += piece.len() as u64;
        if self.size > MAX_DATASET_FILE_BYTES {
            return Err(AppError::invalid(
                "file",
                format!("is larger than the limit of {MAX_DATASET_FILE_BYTES} bytes"),
            ));
        }
        let Some(tx) = &self.bytes else {
            return Err(AppError::invalid("file", "was sent twice"));
        };
        // The parser stopped early only when the chunk writer failed: finish() says why.
        let _ = tx.send(piece.to_vec()).await;
        Ok(())
    }
}

impl Drop for DatasetUpload {
    fn drop(&mut self) {
        if !self.finished {
            let store = self.store.clone();
            let id = self.upload_id.clone();
            // The parser reads to the end of what came, the writer stages its last chunk:
            // only then is every chunk of the upload there to remove.
            self.bytes.take();
            let tasks = self.tasks.take();
            tokio::spawn(async move {
                if let Some((parser, writer)) = tasks {
                    let _ = parser.await;
                    let _ = writer.await;
                }
                if let Err(e) = store.discard_upload(&id).await {
                    tracing::warn!(error = %e, "removing the chunks of a broken dataset upload");
                }
            });
        }
    }
}

/// The parser's input: the pieces of the file as the request brings them.
struct Pieces {
    rx: mpsc::Receiver<Vec<u8>>,
    current: Vec<u8>,
    at: usize,
}

impl std::io::Read for Pieces {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at >= self.current.len() {
            match self.rx.blocking_recv() {
                Some(p) => {
                    self.current = p;
                    self.at = 0;
                }
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// A refused file as the API's field errors: each bad line, then the total.
fn refusal(r: CsvRefusal) -> AppError {
    match r {
        CsvRefusal::Header(m) => AppError::invalid("file", m),
        CsvRefusal::Read(m) => AppError::invalid("file", format!("the upload broke off: {m}")),
        CsvRefusal::Stopped => AppError::invalid("file", "the upload was stopped"),
        CsvRefusal::Lines { first, total } => {
            let mut details: Vec<FieldError> = first
                .into_iter()
                .map(|l| FieldError::new("file", l))
                .collect();
            details.push(FieldError::new(
                "file",
                format!("{total} lines are not rows of the dataset's columns; nothing was stored"),
            ));
            AppError::Invalid(details)
        }
    }
}

pub(crate) fn corrupt(e: ChunkError) -> AppError {
    AppError::internal("reading a dataset chunk", e)
}

impl App {
    pub async fn create_dataset(&self, caller: &Caller, new: NewDataset) -> AppResult<Dataset> {
        let name = new.name.trim().to_string();
        let mut v = Validator::new();
        v.check(
            (1..=100).contains(&name.chars().count()),
            "name",
            "must be 1 to 100 characters",
        );
        v.check(
            new.description.chars().count() <= 2000,
            "description",
            "must be at most 2000 characters",
        );
        v.check(
            !(new.columns.is_some() && new.telemetry.is_some()),
            "columns",
            "a dataset from telemetry has the columns of its query",
        );
        if let Some(cols) = &new.columns {
            plantd_model::ml::check_columns(&mut v, "columns", cols);
        }
        if let Some(t) = &new.telemetry {
            t.check(&mut v);
            let buckets = (t.end.millis() - t.start.millis()) / t.interval.millis();
            let series = (t.asset_ids.len() * t.tags.len()) as i64;
            v.check(
                buckets * series <= MAX_TELEMETRY_CELLS,
                "telemetry.interval",
                format!(
                    "{buckets} buckets x {series} series is more than {MAX_TELEMETRY_CELLS} cells"
                ),
            );
        }
        v.finish()?;
        let (columns, source) = match &new.telemetry {
            Some(t) => (t.columns(), DatasetSource::Telemetry(t.clone())),
            None => (
                new.columns.clone().unwrap_or_default(),
                DatasetSource::Upload,
            ),
        };
        let id = plantd_model::new_id();
        self.store()
            .insert_dataset(&StoredDataset {
                id: &id,
                org_id: &caller.org_id,
                name: &name,
                description: &new.description,
                columns: &columns,
                source: &source,
                created_by: caller.actor(),
                now: Timestamp::now(),
            })
            .await?;
        if let Some(t) = &new.telemetry
            && let Err(e) = self
                .fill_from_telemetry(&caller.org_id, &id, t, &columns)
                .await
        {
            let _ = self.store().delete_dataset(&caller.org_id, &id).await;
            return Err(e);
        }
        self.dataset(&caller.org_id, &id).await
    }

    /// One row per bucket with a value in any series; cells of series without one are empty.
    async fn fill_from_telemetry(
        &self,
        org_id: &str,
        dataset_id: &str,
        t: &TelemetrySource,
        columns: &[Column],
    ) -> AppResult<()> {
        let series = columns.len() - 1;
        let mut rows: BTreeMap<i64, Vec<Option<f64>>> = BTreeMap::new();
        let mut col = 0;
        for asset in &t.asset_ids {
            for tag in &t.tags {
                let filter = TelemetryFilter {
                    data_source_id: None,
                    asset_id: Some(asset.clone()),
                    tag_name: Some(tag.clone()),
                    start: t.start,
                    end: t.end,
                };
                let all = Page {
                    page: 1,
                    per_page: u32::MAX,
                };
                let got = self
                    .telemetry_aggregated(
                        org_id,
                        &filter,
                        t.aggregation,
                        Some(t.interval.millis()),
                        all,
                    )
                    .await?;
                for r in got.items {
                    rows.entry(r.timestamp.millis())
                        .or_insert_with(|| vec![None; series])[col] = Some(r.value);
                }
                col += 1;
            }
        }
        if rows.is_empty() {
            return Err(AppError::invalid(
                "telemetry",
                "the query found no telemetry in the range: the dataset would be empty",
            ));
        }
        let types: Vec<ColumnType> = columns.iter().map(|c| c.column_type).collect();
        let upload_id = plantd_model::new_id();
        let mut chunk = Chunk::new(&types);
        let (mut seq, mut csv_bytes) = (0i64, 0u64);
        let stage = |chunk: Chunk, seq: i64, bytes: u64| {
            let data = chunk.encode();
            let rows = chunk.rows() as u32;
            let upload_id = upload_id.clone();
            async move {
                self.store()
                    .stage_chunk(dataset_id, &upload_id, seq, rows, bytes, &data)
                    .await
            }
        };
        let staged: AppResult<()> = async {
            for (ms, values) in rows {
                let when = Timestamp::from_millis(ms).to_rfc3339();
                csv_bytes += when.len() as u64 + 1;
                let mut cells = vec![Cell::Text(when)];
                for v in values {
                    let cell = v.filter(|x| x.is_finite()).map_or(Cell::Null, Cell::Number);
                    csv_bytes += cell.text().map_or(0, |t| t.len() as u64) + 1;
                    cells.push(cell);
                }
                chunk.push_row(cells);
                if chunk.rows() >= CHUNK_ROWS {
                    let full = std::mem::replace(&mut chunk, Chunk::new(&types));
                    stage(full, seq, std::mem::take(&mut csv_bytes)).await?;
                    seq += 1;
                }
            }
            if chunk.rows() > 0 {
                stage(chunk, seq, csv_bytes).await?;
            }
            self.store()
                .commit_upload(dataset_id, &upload_id, true, columns)
                .await?;
            Ok(())
        }
        .await;
        if staged.is_err() {
            let _ = self.store().discard_upload(&upload_id).await;
        }
        staged
    }

    pub async fn datasets(&self, org_id: &str, page: Page) -> AppResult<Paged<Dataset>> {
        let (items, total) = self
            .store()
            .datasets(org_id, (page.limit(), page.offset()))
            .await?;
        Ok(Paged { items, total })
    }

    pub async fn dataset(&self, org_id: &str, id: &str) -> AppResult<Dataset> {
        self.store()
            .dataset(org_id, id)
            .await
            .map_err(AppError::missing("dataset"))
    }

    /// Begins receiving a CSV for the dataset (appended, or replacing every row).
    pub async fn dataset_upload(
        &self,
        org_id: &str,
        dataset_id: &str,
        replace: bool,
    ) -> AppResult<DatasetUpload> {
        let d = self.dataset(org_id, dataset_id).await?;
        if matches!(d.source, DatasetSource::Telemetry(_)) {
            return Err(AppError::Refused {
                code: "dataset_from_telemetry",
                message:
                    "the dataset is made from telemetry; upload files to a dataset made for them"
                        .into(),
            });
        }
        let expected = (!d.columns.is_empty()).then_some(d.columns);
        let (bytes_tx, bytes_rx) = mpsc::channel::<Vec<u8>>(16);
        let (chunk_tx, mut chunk_rx) = mpsc::channel::<EncodedChunk>(4);
        let parser = tokio::task::spawn_blocking(move || {
            let input = Pieces {
                rx: bytes_rx,
                current: Vec::new(),
                at: 0,
            };
            csv_in::read_csv(input, expected.as_deref(), &mut |c| {
                chunk_tx.blocking_send(c).is_ok()
            })
        });
        let upload_id = plantd_model::new_id();
        let store = self.store().clone();
        let (id, up) = (dataset_id.to_string(), upload_id.clone());
        let writer = tokio::spawn(async move {
            let mut seq = 0;
            while let Some(c) = chunk_rx.recv().await {
                store
                    .stage_chunk(&id, &up, seq, c.rows, c.source_bytes, &c.data)
                    .await?;
                seq += 1;
            }
            Ok(())
        });
        Ok(DatasetUpload {
            dataset_id: dataset_id.to_string(),
            upload_id,
            replace,
            bytes: Some(bytes_tx),
            tasks: Some((parser, writer)),
            size: 0,
            store: self.store().clone(),
            finished: false,
        })
    }

    /// Ends an upload: when every line of the file was good, its rows become the dataset's in
    /// one transaction; else nothing is kept and the bad lines are named.
    pub async fn finish_upload(&self, org_id: &str, mut up: DatasetUpload) -> AppResult<Dataset> {
        up.bytes.take();
        let Some((parser, writer)) = up.tasks.take() else {
            return Err(AppError::invalid("file", "was sent twice"));
        };
        let parsed = parser
            .await
            .map_err(|e| AppError::internal("reading an uploaded CSV", e))?;
        let written = writer
            .await
            .map_err(|e| AppError::internal("storing an uploaded CSV", e))?;
        written?;
        let outcome = parsed.map_err(refusal)?;
        if outcome.rows == 0 {
            return Err(AppError::invalid(
                "file",
                "the file has a header and no rows",
            ));
        }
        let committed = self
            .store()
            .commit_upload(&up.dataset_id, &up.upload_id, up.replace, &outcome.columns)
            .await;
        match committed {
            Ok(()) => up.finished = true,
            Err(StoreError::Conflict(m)) => return Err(AppError::Conflict(m)),
            Err(e) => return Err(e.into()),
        }
        self.dataset(org_id, &up.dataset_id).await
    }

    /// A page of rows of the working copy, or of a version, with the dataset's columns; and
    /// how many rows there are.
    pub async fn dataset_preview(
        &self,
        org_id: &str,
        dataset_id: &str,
        version: Option<&str>,
        page: Page,
    ) -> AppResult<(Preview, u64)> {
        let d = self.dataset(org_id, dataset_id).await?;
        let (generation, total) = match version {
            Some(v) => {
                let v = self.dataset_version(org_id, dataset_id, v).await?;
                (Some(v.generation), v.row_count)
            }
            None => (None, d.row_count),
        };
        let from = page.offset() as u64 + 1;
        let to = (from + page.limit() as u64 - 1).min(total);
        let mut items = Vec::new();
        if from > to {
            let preview = Preview {
                columns: d.columns,
                rows: items,
            };
            return Ok((preview, total));
        }
        let labels = self
            .store()
            .row_labels(dataset_id, generation, (from, to))
            .await?;
        let mut labels = labels.into_iter().peekable();
        for span in self
            .store()
            .dataset_spans(dataset_id, generation, (from, to))
            .await?
        {
            let chunk =
                Chunk::decode(&self.store().chunk_data(&span.chunk_id).await?).map_err(corrupt)?;
            let first = from.max(span.first_row_id);
            let last = to.min(span.first_row_id + span.row_count - 1);
            for row_id in first..=last {
                let cells = chunk.row((row_id - span.first_row_id) as usize);
                let values = d
                    .columns
                    .iter()
                    .zip(cells)
                    .map(|(c, cell)| (c.name.clone(), cell.to_json()))
                    .collect();
                while labels.peek().is_some_and(|l| l.row_id < row_id) {
                    labels.next();
                }
                let label = labels.next_if(|l| l.row_id == row_id).unwrap_or_default();
                items.push(PreviewRow {
                    row_id,
                    values,
                    label_class_id: label.label_class_id,
                    skipped: label.skipped,
                    flagged: label.flagged,
                });
            }
        }
        let preview = Preview {
            columns: d.columns,
            rows: items,
        };
        Ok((preview, total))
    }

    /// Feeds every chunk of the working copy (`None`) or a generation to `f` in row order, on
    /// a blocking thread (decoding and profiling are computation), and gives back its state.
    pub(crate) async fn scan_rows<S: Send + 'static>(
        &self,
        dataset_id: &str,
        generation: Option<i64>,
        state: S,
        f: impl Fn(&mut S, u64, &Chunk) + Send + 'static,
    ) -> AppResult<S> {
        let spans = self
            .store()
            .dataset_spans(dataset_id, generation, (1, u64::MAX))
            .await?;
        let (tx, mut rx) = mpsc::channel::<(u64, Vec<u8>)>(2);
        let worker = tokio::task::spawn_blocking(move || {
            let mut state = state;
            while let Some((first, data)) = rx.blocking_recv() {
                f(&mut state, first, &Chunk::decode(&data)?);
            }
            Ok::<S, ChunkError>(state)
        });
        for s in spans {
            let data = self.store().chunk_data(&s.chunk_id).await?;
            if tx.send((s.first_row_id, data)).await.is_err() {
                break;
            }
        }
        drop(tx);
        worker
            .await
            .map_err(|e| AppError::internal("scanning a dataset", e))?
            .map_err(corrupt)
    }
}
