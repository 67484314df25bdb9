//! One module per domain of the API, each declaring its routes once (`routes()`); this file
//! lists the domains.

mod alerts;
mod api_keys;
mod assets;
mod audit;
mod auth;
mod bi;
mod bi_embed;
mod dashboards;
mod data_sources;
mod fleet;
mod licenses;
mod ml_datasets;
mod ml_models;
mod notifications;
mod oauth_apps;
mod orgs;
mod ota;
mod products;
mod provisioning;
mod regions;
mod stream;
mod system;
mod telemetry;
mod users;
mod webhooks;

use crate::routing::Route;

/// Every route of the API, by domain. The domains of replicated data (users, sign-in) and the
/// system routes are served by every region (`Route::anywhere`); `orgs` and `api_keys` mark
/// theirs route by route.
pub fn all() -> Vec<Route> {
    let anywhere = |routes: Vec<Route>| routes.into_iter().map(Route::anywhere).collect();
    [
        anywhere(system::routes()),
        data_sources::routes(),
        dashboards::routes(),
        alerts::routes(),
        webhooks::routes(),
        notifications::routes(),
        telemetry::routes(),
        assets::routes(),
        stream::routes(),
        api_keys::routes(),
        orgs::routes(),
        anywhere(users::routes()),
        anywhere(auth::routes()),
        oauth_apps::routes(),
        products::routes(),
        provisioning::routes(),
        licenses::routes(),
        fleet::routes(),
        ml_datasets::routes(),
        ml_models::routes(),
        ota::routes(),
        audit::routes(),
        bi::routes(),
        bi_embed::routes(),
        regions::routes(),
    ]
    .into_iter()
    .flatten()
    .collect()
}
