//! `plantd-bench SUITE`: benchmarks of plantd that print tables (not tests), each running the
//! release server as a separate process: `api`, `identity`, `console`, `telemetry`, `sim`,
//! `connectors`, `alerts`, `licenses`, `fleet`, `edge` (the agent's memory and disk at 1,000 tags), `edge-forward` (its backfill over MQTT beside Mosquitto's bridge), `ota`, `ml-datasets`, `bi` (SQL beside DuckDB), `regions` (replication lag through NATS); and `ml-forest`, the
//! isolation forest itself beside scikit-learn, then the live scorer's cost (`ml-live` alone)
//! (docs/benchmarks.md).

mod alerts;
mod api;
mod bi;
mod connectors;
mod console;
mod edge;
mod edge_forward;
mod fleet;
mod harness;
mod identity;
mod licenses;
mod migration;
mod ml_datasets;
mod ml_forest;
mod nodes;
mod ota;
mod regions;
mod sim;
mod telemetry;

use anyhow::Result;
use harness::Suite;

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<()> {
    let o = harness::options()?;
    match o.suite {
        Suite::Identity => identity::run(&o).await,
        Suite::Console => console::run(&o).await,
        Suite::Telemetry => telemetry::run(&o).await,
        Suite::Sim => sim::run(&o).await,
        Suite::Connectors => connectors::run(&o).await,
        Suite::Alerts => alerts::run(&o).await,
        Suite::Licenses => licenses::run(&o).await,
        Suite::Api => api::run(&o).await,
        Suite::Fleet => fleet::run(&o).await,
        Suite::Edge => edge::run(&o).await,
        Suite::EdgeForward => edge_forward::run(&o).await,
        Suite::Ota => ota::run(&o).await,
        Suite::MlDatasets => ml_datasets::run(&o).await,
        Suite::MlForest => ml_forest::run(&o).await,
        Suite::MlLive => ml_forest::live_scoring(&o).await,
        Suite::Bi => bi::run(&o).await,
        Suite::Regions => regions::run(&o).await,
        Suite::Migration => migration::run(&o).await,
        Suite::Nodes => nodes::run(&o).await,
    }
}
