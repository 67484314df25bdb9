//! `plantd-bench SUITE`: benchmarks of plantd that print tables (not tests), each running the
//! release server as a separate process: `api`, `identity`, `console`, `telemetry`, `sim`, `connectors`, `alerts`, `licenses`
//! (docs/benchmarks.md).

mod alerts;
mod api;
mod connectors;
mod console;
mod harness;
mod identity;
mod licenses;
mod sim;
mod telemetry;

use anyhow::Result;

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<()> {
    let o = harness::options()?;
    match o.suite.as_str() {
        "identity" => identity::run(&o).await,
        "console" => console::run(&o).await,
        "telemetry" => telemetry::run(&o).await,
        "sim" => sim::run(&o).await,
        "connectors" => connectors::run(&o).await,
        "alerts" => alerts::run(&o).await,
        "licenses" => licenses::run(&o).await,
        _ => api::run(&o).await,
    }
}
