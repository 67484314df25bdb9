//! Regions (SPEC 4.14), under `/api/v1` on the instance's root: the region list and details
//! (public, so that peers probe them), the served regions' health, the replication of the
//! caller's organization and its region view (SPEC 2.9).

use axum::extract::{Path, State};
use axum::response::Response;
use plantd_app::region_migration::MigrationScheduled;
use plantd_app::regions::{OrgRegionView, RegionHealth, RegionView};
use plantd_app::replication::ReplicationStatus;
use plantd_model::Scope;
use plantd_model::Timestamp;
use plantd_model::audit::AuditEvent;
use serde::{Deserialize, Serialize};

use crate::envelope::{Data, ok};
use crate::error::ApiResult;
use crate::extract::{Auth, ValidJson};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(list_regions, Policy::public(AuditEvent::RegionList)).at_root(),
        route!(
            regions_health,
            Policy::any_key(AuditEvent::RegionHealthRead)
        )
        .at_root(),
        route!(
            replication,
            Policy::any_key(AuditEvent::RegionReplicationRead)
        )
        .at_root(),
        route!(get_region, Policy::public(AuditEvent::RegionRead)).at_root(),
        route!(
            org_region,
            Policy::any_key(AuditEvent::OrganizationRegionRead)
        )
        .at_root(),
        route!(
            set_org_region,
            Policy::scope(Scope::Admin, AuditEvent::OrganizationRegionChange)
        )
        .at_root(),
    ]
}

/// SPEC 2.9's set-region request.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetRegion {
    /// The region to move to (served by this deployment).
    #[schema(example = "eu-west")]
    pub region: String,
    /// When the migration starts (RFC 3339); absent, now or past: at once.
    pub migration_time: Option<Timestamp>,
}

/// The six regions of SPEC 2.9, each with whether this deployment serves it and its addresses.
#[utoipa::path(get, path = "/api/v1/regions", tag = "regions",
    responses((status = 200, body = Data<Vec<RegionView>>)))]
async fn list_regions(State(state): State<AppState>) -> ApiResult<Response> {
    Ok(ok(state.app.regions()))
}

/// One region; an unknown id is a 404.
#[utoipa::path(get, path = "/api/v1/regions/{region_id}", tag = "regions",
    params(("region_id" = String, Path, description = "us-east, us-west, eu-west, eu-central, ap-southeast or ap-northeast")),
    responses((status = 200, body = Data<RegionView>)))]
async fn get_region(
    State(state): State<AppState>,
    Path(region_id): Path<String>,
) -> ApiResult<Response> {
    Ok(ok(state.app.region(&region_id)?))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct HealthList {
    pub regions: Vec<RegionHealth>,
}

/// The served regions' health: each peer probed now (its round trip in `latency_ms`).
#[utoipa::path(get, path = "/api/v1/regions/health", tag = "regions",
    responses((status = 200, body = Data<HealthList>)))]
async fn regions_health(State(state): State<AppState>) -> ApiResult<Response> {
    Ok(ok(HealthList {
        regions: state.app.regions_health().await,
    }))
}

/// How far each replica of the caller's organization's replicated data is behind its primary
/// region, read from the deployment's JetStream consumers.
#[utoipa::path(get, path = "/api/v1/regions/replication", tag = "regions",
    responses((status = 200, body = Data<ReplicationStatus>)))]
async fn replication(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    Ok(ok(state.app.replication_status(&caller.org_id).await?))
}

/// The caller's organization's region view (SPEC 2.9): its primary region, strict residency,
/// the regions served and the primary region's addresses. Answered by every region.
#[utoipa::path(get, path = "/api/v1/organizations/current/region", tag = "regions",
    responses((status = 200, body = Data<OrgRegionView>)))]
async fn org_region(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    Ok(ok(state.app.org_region_view(&caller.org_id).await?))
}

/// Move the caller's organization's resident data to another served region (Enterprise):
/// scheduled for `migration_time`; while it runs the organization is read-only (409 on writes,
/// `Retry-After` on ingest) and its region view shows the migration's progress.
#[utoipa::path(put, path = "/api/v1/organizations/current/region", tag = "regions",
    request_body = SetRegion,
    responses((status = 200, body = Data<MigrationScheduled>),
        (status = 409, description = "The region is not served or is the current one, a migration is scheduled or running, or the deployment has no NATS")))]
async fn set_org_region(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<SetRegion>,
) -> ApiResult<Response> {
    Ok(ok(state
        .app
        .schedule_region_migration(&caller, &body.region, body.migration_time)
        .await?))
}
