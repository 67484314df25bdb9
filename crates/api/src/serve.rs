//! [`serve`]: the HTTP server of one application, with its workers, until shutdown.

use plantd_app::App;
use std::future::Future;
use std::net::SocketAddr;
use tokio::net::TcpListener;

use crate::router;

/// Serves `app` on `listener` until `shutdown` completes: starts the application's workers,
/// then drains requests in flight, stops the workers and writes pending usage counts.
pub async fn serve(
    listener: TcpListener,
    app: App,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
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
