//! ML datasets (SPEC 4.5): datasets with the streamed CSV upload and the preview, label
//! classes, each row's label, label import and export, versions with compare and rollback,
//! validation rules, validation and quality. `read:assets` reads, `write:assets` changes.

use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use plantd_app::ml_datasets::{DatasetUpload, MAX_DATASET_FILE_BYTES, NewDataset, Preview};
use plantd_app::ml_labels::LabelChange;
use plantd_app::ml_labels::{LabelFormat, LabelImport, MAX_LABEL_FILE_BYTES, NewLabelClass};
use plantd_app::ml_versions::NewRule;
use plantd_model::Scope::{ReadAssets, WriteAssets};
use plantd_model::audit::AuditEvent;
use plantd_model::ml::{
    Comparison, Dataset, DatasetVersion, LabelClass, Quality, RowLabel, ValidationResult,
    ValidationRule,
};
use plantd_model::page::{PageMeta, PageQuery};
use serde::{Deserialize, Serialize};

use crate::envelope::{Data, List, created, list, ok, page_of_query, paged_query};
use crate::error::{ApiError, ApiResult};
use crate::extract::{
    Auth, ById, PathOf, ValidJson, ValidQuery, field_bytes, form_error, multipart_form, text_field,
};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    let read = |e| Policy::scope(ReadAssets, e);
    let write = |e| Policy::scope(WriteAssets, e);
    vec![
        route!(list_datasets, read(AuditEvent::MlDatasetList)),
        route!(create_dataset, write(AuditEvent::MlDatasetCreate)),
        route!(get_dataset, read(AuditEvent::MlDatasetRead)),
        // The multipart framing around the largest file, on top of it.
        route!(upload_dataset, write(AuditEvent::MlDatasetUpload))
            .body_limit(MAX_DATASET_FILE_BYTES as usize + 1024 * 1024),
        route!(
            preview_dataset,
            read(AuditEvent::MlDatasetPreview).limit(60, 60)
        ),
        route!(list_label_classes, read(AuditEvent::MlLabelClassList)),
        route!(create_label_class, write(AuditEvent::MlLabelClassCreate)),
        route!(label_row, write(AuditEvent::MlRowLabel)),
        route!(unlabel_row, write(AuditEvent::MlRowUnlabel)),
        route!(skip_row, write(AuditEvent::MlRowSkip)),
        route!(flag_row, write(AuditEvent::MlRowFlag)),
        route!(import_labels, write(AuditEvent::MlLabelsImport))
            .body_limit(MAX_LABEL_FILE_BYTES + 1024 * 1024),
        route!(export_labels, read(AuditEvent::MlLabelsExport)),
        route!(list_versions, read(AuditEvent::MlVersionList)),
        route!(create_version, write(AuditEvent::MlVersionCreate))
            .body_limit(MAX_DATASET_FILE_BYTES as usize + 1024 * 1024),
        route!(compare_versions, read(AuditEvent::MlVersionCompare)),
        route!(get_version, read(AuditEvent::MlVersionRead)),
        route!(rollback_version, write(AuditEvent::MlVersionRollback)),
        route!(list_rules, read(AuditEvent::MlRuleList)),
        route!(create_rule, write(AuditEvent::MlRuleCreate)),
        route!(validate_dataset, write(AuditEvent::MlDatasetValidate)),
        route!(dataset_quality, read(AuditEvent::MlDatasetQuality)),
    ]
}

/// Datasets, newest first.
#[utoipa::path(get, path = "/ml/datasets", tag = "ml", params(PageQuery),
    responses((status = 200, body = List<Dataset>)))]
async fn list_datasets(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.datasets(&caller.org_id, page).await?;
    Ok(list(page, paged, |d| d))
}

/// Create a dataset: empty (its columns come from the first upload), with declared
/// `columns`, or filled from a `telemetry` query.
#[utoipa::path(post, path = "/ml/datasets", tag = "ml", request_body = NewDataset,
    responses((status = 201, body = Data<Dataset>), (status = 409, description = "A dataset with this name exists")))]
async fn create_dataset(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewDataset>,
) -> ApiResult<Response> {
    let d = state.app.create_dataset(&caller, body).await?;
    Ok(created(&d.id.clone(), d))
}

#[utoipa::path(get, path = "/ml/datasets/{id}", tag = "ml", params(("id" = String, Path)),
    responses((status = 200, body = Data<Dataset>)))]
async fn get_dataset(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.dataset(r.org(), &r.id).await?))
}

/// The upload's form (multipart/form-data).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct CsvForm {
    /// A CSV file (UTF-8, header first, up to 1 GiB), streamed.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UploadQuery {
    /// `append` (default) or `replace`.
    #[param(inline)]
    mode: Option<UploadMode>,
}

#[derive(Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UploadMode {
    Append,
    Replace,
}

/// Receives the `file` field of a form into an upload; other fields go to `other`.
async fn receive_csv(
    state: &AppState,
    org_id: &str,
    dataset_id: &str,
    replace: bool,
    form: &mut Multipart,
    mut other: impl FnMut(&str, String) -> ApiResult<()>,
) -> ApiResult<Option<DatasetUpload>> {
    let mut upload: Option<DatasetUpload> = None;
    while let Some(mut field) = form.next_field().await.map_err(form_error)? {
        let name = field.name().unwrap_or_default().to_string();
        if name == "file" {
            if upload.is_some() {
                return Err(ApiError::validation("file", "send one file"));
            }
            let mut up = state
                .app
                .dataset_upload(org_id, dataset_id, replace)
                .await?;
            while let Some(chunk) = field.chunk().await.map_err(form_error)? {
                up.write(&chunk).await?;
            }
            upload = Some(up);
        } else {
            let text = text_field(field, &name).await?;
            other(&name, text)?;
        }
    }
    Ok(upload)
}

/// Upload rows: a CSV in the multipart field `file`, appended (default) or replacing every
/// row (`mode=replace`). Streamed; a file with a bad line stores nothing and names the lines.
#[utoipa::path(post, path = "/ml/datasets/{id}/upload", tag = "ml", params(("id" = String, Path), UploadQuery),
    request_body(content = CsvForm, content_type = "multipart/form-data"),
    responses((status = 200, body = Data<Dataset>),
        (status = 409, description = "The dataset is made from telemetry (`dataset_from_telemetry`)")))]
async fn upload_dataset(
    State(state): State<AppState>,
    r: ById,
    ValidQuery(q): ValidQuery<UploadQuery>,
    form: Result<Multipart, MultipartRejection>,
) -> ApiResult<Response> {
    let mut form = multipart_form(form, "the field file")?;
    let replace = matches!(q.mode, Some(UploadMode::Replace));
    let up = receive_csv(&state, r.org(), &r.id, replace, &mut form, |name, _| {
        Err(ApiError::validation(
            name,
            "unknown field: the form takes file",
        ))
    })
    .await?
    .ok_or_else(|| ApiError::validation("file", "is required (a CSV file)"))?;
    Ok(ok(state.app.finish_upload(r.org(), up).await?))
}

paged_query! {
pub struct PreviewQuery {
    /// Preview a version instead of the working copy.
    pub version: Option<String>,
}
}

/// `GET /ml/datasets/{id}/preview`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct PreviewPage {
    data: Preview,
    meta: PageMeta,
}

/// Rows in row-id order with their values and label state. 60 requests a minute.
#[utoipa::path(get, path = "/ml/datasets/{id}/preview", tag = "ml", params(("id" = String, Path), PreviewQuery),
    responses((status = 200, body = PreviewPage)))]
async fn preview_dataset(
    State(state): State<AppState>,
    r: ById,
    ValidQuery(q): ValidQuery<PreviewQuery>,
) -> ApiResult<Response> {
    let page = q.page()?;
    let (data, total) = state
        .app
        .dataset_preview(r.org(), &r.id, q.version.as_deref(), page)
        .await?;
    Ok(axum::Json(PreviewPage {
        data,
        meta: PageMeta::new(page, total),
    })
    .into_response())
}

/// The dataset's label classes with the rows of the working copy labelled with each.
#[utoipa::path(get, path = "/ml/datasets/{id}/label-classes", tag = "ml", params(("id" = String, Path)),
    responses((status = 200, body = Data<Vec<LabelClass>>)))]
async fn list_label_classes(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.label_classes(r.org(), &r.id).await?))
}

#[utoipa::path(post, path = "/ml/datasets/{id}/label-classes", tag = "ml", params(("id" = String, Path)),
    request_body = NewLabelClass,
    responses((status = 201, body = Data<LabelClass>)))]
async fn create_label_class(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<NewLabelClass>,
) -> ApiResult<Response> {
    let c = state.app.create_label_class(r.org(), &r.id, body).await?;
    Ok(created(&c.id.clone(), c))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelRequest {
    label_class_id: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FlagRequest {
    flagged: bool,
}

async fn change(
    state: &AppState,
    caller: &plantd_app::Caller,
    (dataset_id, row_id): (String, String),
    c: LabelChange,
) -> ApiResult<Response> {
    Ok(ok(state
        .app
        .change_row_label(&caller.org_id, &dataset_id, &row_id, c)
        .await?))
}

/// Label a row (clears its skip).
#[utoipa::path(post, path = "/ml/datasets/{dataset_id}/rows/{row_id}/label", tag = "ml",
    params(("dataset_id" = String, Path), ("row_id" = u64, Path)), request_body = LabelRequest,
    responses((status = 200, body = Data<RowLabel>)))]
async fn label_row(
    State(state): State<AppState>,
    caller: Auth,
    PathOf(path): PathOf<(String, String)>,
    ValidJson(body): ValidJson<LabelRequest>,
) -> ApiResult<Response> {
    change(&state, &caller, path, LabelChange::Set(body.label_class_id)).await
}

/// Clear a row's label and skip.
#[utoipa::path(delete, path = "/ml/datasets/{dataset_id}/rows/{row_id}/label", tag = "ml",
    params(("dataset_id" = String, Path), ("row_id" = u64, Path)),
    responses((status = 200, body = Data<RowLabel>)))]
async fn unlabel_row(
    State(state): State<AppState>,
    caller: Auth,
    PathOf(path): PathOf<(String, String)>,
) -> ApiResult<Response> {
    change(&state, &caller, path, LabelChange::Clear).await
}

/// Skip a row (clears its label).
#[utoipa::path(post, path = "/ml/datasets/{dataset_id}/rows/{row_id}/skip", tag = "ml",
    params(("dataset_id" = String, Path), ("row_id" = u64, Path)),
    responses((status = 200, body = Data<RowLabel>)))]
async fn skip_row(
    State(state): State<AppState>,
    caller: Auth,
    PathOf(path): PathOf<(String, String)>,
) -> ApiResult<Response> {
    change(&state, &caller, path, LabelChange::Skip).await
}

/// Flag a row for review, or clear the flag.
#[utoipa::path(post, path = "/ml/datasets/{dataset_id}/rows/{row_id}/flag", tag = "ml",
    params(("dataset_id" = String, Path), ("row_id" = u64, Path)), request_body = FlagRequest,
    responses((status = 200, body = Data<RowLabel>)))]
async fn flag_row(
    State(state): State<AppState>,
    caller: Auth,
    PathOf(path): PathOf<(String, String)>,
    ValidJson(body): ValidJson<FlagRequest>,
) -> ApiResult<Response> {
    change(&state, &caller, path, LabelChange::Flag(body.flagged)).await
}

/// Import labels: a CSV `row_id,label` or a JSON array of `{row_id, label}` in the field
/// `file`; every line is checked before anything is stored.
#[utoipa::path(post, path = "/ml/datasets/{id}/labels/import", tag = "ml", params(("id" = String, Path)),
    request_body(content = CsvForm, content_type = "multipart/form-data"),
    responses((status = 200, body = Data<LabelImport>)))]
async fn import_labels(
    State(state): State<AppState>,
    r: ById,
    form: Result<Multipart, MultipartRejection>,
) -> ApiResult<Response> {
    let mut form = multipart_form(form, "the field file")?;
    let mut file = None;
    while let Some(field) = form.next_field().await.map_err(form_error)? {
        let name = field.name().unwrap_or_default().to_string();
        if name != "file" {
            return Err(ApiError::validation(
                &name,
                "unknown field: the form takes file",
            ));
        }
        file = Some(field_bytes(field, "file", MAX_LABEL_FILE_BYTES).await?);
    }
    let file = file.ok_or_else(|| ApiError::validation("file", "is required"))?;
    Ok(ok(state.app.import_labels(r.org(), &r.id, &file).await?))
}

/// A row of the JSON export (and import).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct LabelRow {
    row_id: u64,
    /// The class name.
    label: String,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ExportQuery {
    /// `csv` (default) or `json`.
    #[param(inline)]
    format: Option<LabelFormat>,
}

/// The labelled rows as a file the import reads back: CSV `row_id,label` or a JSON array.
#[utoipa::path(get, path = "/ml/datasets/{id}/labels/export", tag = "ml", params(("id" = String, Path), ExportQuery),
    responses((status = 200, description = "The labelled rows: CSV `row_id,label`, or a JSON array of {row_id, label}",
        content((String = "text/csv; charset=utf-8"), (Vec<LabelRow> = "application/json")))))]
async fn export_labels(
    State(state): State<AppState>,
    r: ById,
    ValidQuery(q): ValidQuery<ExportQuery>,
) -> ApiResult<Response> {
    let format = q.format.unwrap_or(LabelFormat::Csv);
    let body = state.app.export_labels(r.org(), &r.id, format).await?;
    let (content_type, ext) = match format {
        LabelFormat::Csv => ("text/csv; charset=utf-8", "csv"),
        LabelFormat::Json => ("application/json", "json"),
    };
    let disposition = format!("attachment; filename=\"labels-{}.{ext}\"", r.id);
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        body,
    )
        .into_response())
}

/// Versions, newest first.
#[utoipa::path(get, path = "/ml/datasets/{id}/versions", tag = "ml", params(("id" = String, Path), PageQuery),
    responses((status = 200, body = List<DatasetVersion>)))]
async fn list_versions(
    State(state): State<AppState>,
    r: ById,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.dataset_versions(r.org(), &r.id, page).await?;
    Ok(list(page, paged, |v| v))
}

/// The version form (multipart/form-data, both optional).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct VersionForm {
    /// A CSV that first replaces every row.
    #[schema(value_type = Option<String>, format = Binary)]
    file: Option<Vec<u8>>,
    notes: Option<String>,
}

/// Snapshot the working copy's rows and labels as the next version (`1.0`, then the next
/// major when rows changed, else the next minor).
#[utoipa::path(post, path = "/ml/datasets/{id}/versions", tag = "ml", params(("id" = String, Path)),
    request_body(content = VersionForm, content_type = "multipart/form-data"),
    responses((status = 201, body = Data<DatasetVersion>),
        (status = 409, description = "A file was sent to a dataset made from telemetry (`dataset_from_telemetry`)")))]
async fn create_version(
    State(state): State<AppState>,
    caller: Auth,
    PathOf(id): PathOf<String>,
    headers: HeaderMap,
    form: Result<Multipart, MultipartRejection>,
) -> ApiResult<Response> {
    let mut notes = String::new();
    // Without a body (no content type, or none sent) the version has no notes and no file.
    let bodiless = !headers.contains_key(header::CONTENT_TYPE)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|l| l.as_bytes() == b"0");
    let up = if bodiless {
        state.app.dataset(&caller.org_id, &id).await?;
        None
    } else {
        let mut form = multipart_form(form, "the optional fields notes and file")?;
        receive_csv(
            &state,
            &caller.org_id,
            &id,
            true,
            &mut form,
            |name, text| {
                if name == "notes" {
                    notes = text;
                    Ok(())
                } else {
                    Err(ApiError::validation(
                        name,
                        "unknown field: the form takes notes and file",
                    ))
                }
            },
        )
        .await?
    };
    if let Some(up) = up {
        state.app.finish_upload(&caller.org_id, up).await?;
    }
    let v = state
        .app
        .create_dataset_version(&caller, &id, &notes)
        .await?;
    Ok(created(&v.version.clone(), v))
}

#[utoipa::path(get, path = "/ml/datasets/{dataset_id}/versions/{version}", tag = "ml",
    params(("dataset_id" = String, Path), ("version" = String, Path)),
    responses((status = 200, body = Data<DatasetVersion>)))]
async fn get_version(
    State(state): State<AppState>,
    caller: Auth,
    PathOf((id, version)): PathOf<(String, String)>,
) -> ApiResult<Response> {
    Ok(ok(state
        .app
        .dataset_version(&caller.org_id, &id, &version)
        .await?))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct CompareQuery {
    /// A version.
    v1: String,
    /// A version, or `working` for the working copy.
    v2: String,
}

/// What changed between two versions: rows added, removed and changed (by row id), labels
/// changed, and each column's profile on both sides.
#[utoipa::path(get, path = "/ml/datasets/{id}/versions/compare", tag = "ml", params(("id" = String, Path), CompareQuery),
    responses((status = 200, body = Data<Comparison>)))]
async fn compare_versions(
    State(state): State<AppState>,
    r: ById,
    ValidQuery(q): ValidQuery<CompareQuery>,
) -> ApiResult<Response> {
    Ok(ok(state
        .app
        .compare_versions(r.org(), &r.id, &q.v1, &q.v2)
        .await?))
}

/// The working copy becomes the version's rows and labels; every version is kept.
#[utoipa::path(post, path = "/ml/datasets/{dataset_id}/versions/{version}/rollback", tag = "ml",
    params(("dataset_id" = String, Path), ("version" = String, Path)),
    responses((status = 200, body = Data<Dataset>)))]
async fn rollback_version(
    State(state): State<AppState>,
    caller: Auth,
    PathOf((id, version)): PathOf<(String, String)>,
) -> ApiResult<Response> {
    Ok(ok(state
        .app
        .rollback_dataset(&caller.org_id, &id, &version)
        .await?))
}

#[utoipa::path(get, path = "/ml/datasets/{id}/validation-rules", tag = "ml", params(("id" = String, Path)),
    responses((status = 200, body = Data<Vec<ValidationRule>>)))]
async fn list_rules(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.validation_rules(r.org(), &r.id).await?))
}

/// Add a rule: `range` {min, max}, `not_null`, `unique`, `allowed_values` {values},
/// `regex` {pattern}.
#[utoipa::path(post, path = "/ml/datasets/{id}/validation-rules", tag = "ml", params(("id" = String, Path)),
    request_body = NewRule, responses((status = 201, body = Data<ValidationRule>)))]
async fn create_rule(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<NewRule>,
) -> ApiResult<Response> {
    let rule = state
        .app
        .create_validation_rule(r.org(), &r.id, body)
        .await?;
    Ok(created(&rule.id.clone(), rule))
}

/// Check every rule on every row; the result is kept as the dataset's last validation.
#[utoipa::path(post, path = "/ml/datasets/{id}/validate", tag = "ml", params(("id" = String, Path)),
    responses((status = 200, body = Data<ValidationResult>)))]
async fn validate_dataset(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.validate_dataset(r.org(), &r.id).await?))
}

/// Each column's profile (count, nulls, distinct, min, max, mean, std, histogram or top
/// values) and the last validation.
#[utoipa::path(get, path = "/ml/datasets/{id}/quality", tag = "ml", params(("id" = String, Path)),
    responses((status = 200, body = Data<Quality>)))]
async fn dataset_quality(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.dataset_quality(r.org(), &r.id).await?))
}
