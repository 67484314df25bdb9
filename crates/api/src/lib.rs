//! The plantd cloud REST API: HTTP and nothing else. Each domain's routes are declared once in
//! `routes/` (handler, policy, OpenAPI operation); the router, the request pipeline
//! (authentication, rate limits, scopes, audit) and the OpenAPI document are built from them.
//! Handlers parse requests, call the application ([`plantd_app::App`]) and render its answers
//! in the SPEC's envelopes; [`ApiError`](error::ApiError) is made from the application's
//! errors in one place. [`serve`] runs it with the application's workers until shutdown.

pub mod audit_record;
mod console;
pub mod csrf;
pub mod envelope;
pub mod error;
pub mod extract;
pub mod oauth_server;
pub mod openapi;
pub mod pages;
pub mod pipeline;
pub mod rendered;
pub mod router;
pub mod routes;
pub mod routing;
pub mod state;
pub mod stream_slots;

pub use plantd_app::AppConfig;

use plantd_app::App;
use plantd_store::Store;
use std::future::Future;
use std::net::SocketAddr;
use tokio::net::TcpListener;

/// Serves the API on `listener` until `shutdown` completes, then drains requests in flight,
/// stops the workers and writes pending usage counts.
pub async fn serve(
    listener: TcpListener,
    store: Store,
    config: AppConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut config = config;
    if config.public_url.is_none() {
        let mut addr = listener.local_addr()?;
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        config.public_url = Some(format!("http://{addr}"));
    }
    let app = App::new(store, config);
    let workers = app.start().await;
    let result = axum::serve(
        listener,
        router::build(app).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await;
    workers.stop().await;
    result
}
