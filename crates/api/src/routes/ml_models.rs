//! ML training and models (SPEC 4.6): training jobs (queued, run by a worker, cancelled), and
//! models (test, deploy to assets, undeploy, download). `read:assets` reads, `write:assets`
//! trains, tests and deploys; training is limited to 10 jobs an hour.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use plantd_app::ml_models::{DeployRequest, ModelTest, TestResult};
use plantd_app::ml_training::NewTrainingJob;
use plantd_model::Scope::{ReadAssets, WriteAssets};
use plantd_model::audit::AuditEvent;
use plantd_model::ml_models::{Model, TrainingJob};
use plantd_model::page::PageQuery;

use crate::envelope::{Data, List, created, list, ok, page_of_query};
use crate::error::ApiResult;
use crate::extract::{Auth, ById, ValidJson, ValidQuery};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(
            list_jobs,
            Policy::scope(ReadAssets, AuditEvent::MlTrainingList)
        ),
        route!(
            create_job,
            Policy::scope(WriteAssets, AuditEvent::MlTrainingCreate).limit(10, 3600)
        ),
        route!(
            get_job,
            Policy::scope(ReadAssets, AuditEvent::MlTrainingRead)
        ),
        route!(
            cancel_job,
            Policy::scope(WriteAssets, AuditEvent::MlTrainingCancel)
        ),
        route!(
            list_models,
            Policy::scope(ReadAssets, AuditEvent::MlModelList)
        ),
        route!(
            get_model,
            Policy::scope(ReadAssets, AuditEvent::MlModelRead)
        ),
        // A batch of 10,000 rows of a hundred features.
        route!(
            test_model,
            Policy::scope(ReadAssets, AuditEvent::MlModelTest)
        )
        .body_limit(16 * 1024 * 1024),
        route!(
            deploy_model,
            Policy::scope(WriteAssets, AuditEvent::MlModelDeploy)
        ),
        route!(
            undeploy_model,
            Policy::scope(WriteAssets, AuditEvent::MlModelUndeploy)
        ),
        route!(
            download_model,
            Policy::scope(ReadAssets, AuditEvent::MlModelDownload)
        ),
    ]
}

/// Training jobs, newest first.
#[utoipa::path(get, path = "/ml/training", tag = "ml", params(PageQuery),
    responses((status = 200, body = List<TrainingJob>)))]
async fn list_jobs(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.training_jobs(&caller.org_id, page).await?;
    Ok(list(page, paged, |j| j))
}

/// Start training an isolation forest on a dataset's number columns; the job is queued and
/// runs off the request. 10 an hour.
#[utoipa::path(post, path = "/ml/training", tag = "ml", request_body = NewTrainingJob,
    responses((status = 201, body = Data<TrainingJob>)))]
async fn create_job(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewTrainingJob>,
) -> ApiResult<Response> {
    let job = state.app.create_training_job(&caller, body).await?;
    Ok(created(&job.id.clone(), job))
}

#[utoipa::path(get, path = "/ml/training/{id}", tag = "ml", params(("id" = String, Path)),
    responses((status = 200, body = Data<TrainingJob>)))]
async fn get_job(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.training_job(r.org(), &r.id).await?))
}

/// Cancel a queued or running job (a running one stops within a second); a finished job is
/// `409 job_finished`.
#[utoipa::path(delete, path = "/ml/training/{id}", tag = "ml", params(("id" = String, Path)),
    responses((status = 200, body = Data<TrainingJob>),
        (status = 409, description = "The job finished (`job_finished`)")))]
async fn cancel_job(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.cancel_training_job(r.org(), &r.id).await?))
}

/// Models, newest first.
#[utoipa::path(get, path = "/ml/models", tag = "ml", params(PageQuery),
    responses((status = 200, body = List<Model>)))]
async fn list_models(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.models(&caller.org_id, page).await?;
    Ok(list(page, paged, |m| m))
}

#[utoipa::path(get, path = "/ml/models/{id}", tag = "ml", params(("id" = String, Path)),
    responses((status = 200, body = Data<Model>)))]
async fn get_model(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.model(r.org(), &r.id).await?))
}

/// Score one row (`features`: name to number) or a batch (`rows`); each answer carries
/// `anomaly_score` and `is_anomaly` (the score above the model's threshold).
#[utoipa::path(post, path = "/ml/models/{id}/test", tag = "ml", params(("id" = String, Path)),
    request_body = ModelTest, responses((status = 200, body = Data<TestResult>)))]
async fn test_model(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<ModelTest>,
) -> ApiResult<Response> {
    Ok(ok(state.app.test_model(r.org(), &r.id, body).await?))
}

/// Score the assets' live telemetry: each feature reads its tag (default: the feature's
/// name), the score is written as the tag `anomaly_score:<model id>` of each asset.
#[utoipa::path(post, path = "/ml/models/{id}/deploy", tag = "ml", params(("id" = String, Path)),
    request_body = DeployRequest, responses((status = 200, body = Data<Model>)))]
async fn deploy_model(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<DeployRequest>,
) -> ApiResult<Response> {
    Ok(ok(state.app.deploy_model(r.org(), &r.id, body).await?))
}

/// Stop live scoring.
#[utoipa::path(post, path = "/ml/models/{id}/undeploy", tag = "ml", params(("id" = String, Path)),
    responses((status = 200, body = Data<Model>)))]
async fn undeploy_model(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.undeploy_model(r.org(), &r.id).await?))
}

/// The model in its versioned JSON format (`docs/ml-model-format.md`): enough to score
/// elsewhere.
#[utoipa::path(get, path = "/ml/models/{id}/download", tag = "ml", params(("id" = String, Path)),
    responses((status = 200, description = "The model (application/json)", content_type = "application/json")))]
async fn download_model(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    let body = state.app.model_download(r.org(), &r.id).await?;
    let disposition = format!("attachment; filename=\"model-{}.json\"", r.id);
    Ok((
        [
            (header::CONTENT_TYPE, "application/json".to_string()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        body,
    )
        .into_response())
}
