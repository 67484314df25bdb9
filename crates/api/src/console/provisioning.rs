//! The console's provisioning page (issue 34): on an edge agent its mode and retention; the
//! provisioned assets with their data source's state; a CSV or YAML file imported (multipart,
//! its bad lines listed) and a QR label's payload pasted (`provisioning.js`).

use axum::extract::State;
use axum::response::Response;
use maud::html;
use plantd_model::Scope;
use plantd_model::data_source::DataSourceStatus;

use super::browser::Browser;
use super::kit::{OrPage, action_button, time};
use super::layout::shell;
use crate::state::AppState;

pub(crate) async fn page(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let assets = state.app.provisioned_assets(org).await.or_page(&browser)?;
    let sources = state.app.data_sources(org).await.or_page(&browser)?;
    let edge = state.app.edge_config(org).await.ok();
    let write = browser.may(Scope::WriteAssets);
    let body = html! {
        h1 { "Provisioning" }
        @if let Some(edge) = &edge {
            p id="edge-mode" {
                "Edge agent in " strong { (edge.mode.as_str()) } " mode (" a href="/setup" { "setup wizard" } "). Kept here: raw points "
                (edge.retention.raw_days) " days, 1-minute aggregates " (edge.retention.minute_days)
                " days, 1-hour " (edge.retention.hour_days) " days, 1-day " (edge.retention.day_days)
                " days, ML predictions " (edge.retention.ml_predictions_days) " days, alert history "
                (edge.retention.alert_history_days) " days."
            }
            @match &edge.cloud {
                Some(c) => {
                    p id="edge-cloud" {
                        "Enrolled with " code { (c.url) } " as device " code { (c.device_id) } " since " (time(c.enrolled_at)) ". "
                        @if write {
                            (action_button("POST", "/v1/provisioning/sync/cloud", "Sync assets from the cloud", "", None))
                        }
                    }
                }
                None => { p id="edge-cloud" { "Not enrolled with a cloud (plantd edge --enroll TOKEN --cloud URL)." } }
            }
            @if let Some(f) = &edge.forwarding {
                p id="edge-forwarding" {
                    @if f.connected {
                        span class="badge ok" { "forwarding" } " to "
                    } @else {
                        span class="badge warning" title=[f.last_error.as_deref()] { "cloud unreachable" } " trying "
                    }
                    strong { (f.region.as_deref().unwrap_or("?")) } " (" code { (f.mqtt_url.as_deref().unwrap_or("no MQTT address")) } "). "
                    "Waiting on this agent: " strong { (f.pending_points) } " points in " (f.pending_batches) " batches. "
                    "Sent since start: " (f.forwarded_points) " points"
                    @if let Some(at) = f.last_forwarded_at { ", the last " (time(at)) }
                    ". Backlog rate: " (f.backfill_points_per_second) " points/s."
                    @if let Some(e) = f.failovers.last() {
                        " Last region change: " (e.from) " → " (e.to) " " (time(e.at)) " (" (e.reason) ")."
                    }
                }
                @if edge.regions.len() > 1 {
                    p id="edge-regions" {
                        "Regions in order: "
                        (edge.regions.iter().map(|r| r.region.as_str()).collect::<Vec<_>>().join(" → "))
                    }
                }
            }
        }
        table class="list" id="provisioned" {
            thead { tr { th scope="col" { "Asset" } th scope="col" { "Type" } th scope="col" { "Protocol" } th scope="col" { "Address" } th scope="col" { "Sensors" } th scope="col" { "Came by" } th scope="col" { "Source" } th scope="col" { "Updated" } } }
            tbody {
                @for a in &assets {
                    @let source = sources.iter().find(|s| s.id == a.data_source_id);
                    tr {
                        td { (a.asset.asset_id) }
                        td { (a.asset.asset_type) }
                        td { (a.asset.protocol.as_str()) }
                        td { code { (a.asset.host) ":" (a.asset.port) } }
                        td { (a.asset.sensors.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")) }
                        td { (a.method) }
                        td {
                            @match source {
                                Some(s) if !s.enabled => { span class="badge" { "disabled" } }
                                Some(s) if s.status == DataSourceStatus::Connected => { span class="badge ok" { "connected" } }
                                Some(s) => { span class="badge warning" title=[s.last_error.as_deref()] { "disconnected" } }
                                None => { span class="badge" { "?" } }
                            }
                        }
                        td { (time(a.updated_at)) }
                    }
                }
            }
        }
        @if assets.is_empty() {
            p class="empty" { "No asset provisioned yet: import a CSV or YAML file, or a label's payload." }
        }
        @if write {
            div class="forms" {
                section {
                    h2 { "Import a file" }
                    form id="provision-file" {
                        label for="provision-file-input" { "CSV (columns asset_id, asset_type, protocol, host, port, sensors) or YAML (assets: [...])" }
                        input id="provision-file-input" name="file" type="file" accept=".csv,.yaml,.yml,text/csv,application/yaml" required;
                        p class="field-error" data-error-for="file" {}
                        ul class="upload-errors" hidden {}
                        button type="submit" class="primary" { "Import" }
                        p class="form-error" role="alert" {}
                        output class="result" {}
                    }
                }
                section {
                    h2 { "A QR label" }
                    form id="provision-qr" {
                        label for="provision-qr-payload" { "The label's payload {id, t, h, s: [{n, a}]}" }
                        textarea id="provision-qr-payload" name="payload" rows="4" required placeholder=r#"{"id": "Tank_07", "t": "tank", "h": "10.1.2.3", "s": [{"n": "Level", "a": 0}]}"# {}
                        ul class="upload-errors" hidden {}
                        button type="submit" class="primary" { "Provision" }
                        p class="form-error" role="alert" {}
                        output class="result" {}
                    }
                }
            }
        }
        @if browser.may(Scope::Admin) {
            section {
                h2 { "Discover devices" }
                form id="discover" {
                    label for="discover-hosts" { "Addresses, subnets (/22 or longer) or host names, separated by spaces or commas" }
                    input id="discover-hosts" name="hosts" type="text" required placeholder="10.0.0.0/24 plc-7.local";
                    label for="discover-ports" { "TCP ports for Modbus and OPC UA (default 502 and 4840)" }
                    input id="discover-ports" name="ports" type="text" placeholder="502 5020-5030 4840";
                    ul class="upload-errors" hidden {}
                    button type="submit" class="primary" { "Scan" }
                    p class="form-error" role="alert" {}
                    output class="result" {}
                }
                table class="list" id="discovered" hidden {
                    thead { tr { th scope="col" { "Protocol" } th scope="col" { "Address" } th scope="col" { "Identity" } } }
                    tbody {}
                }
            }
        }
    };
    Ok(shell(&browser, body, &["provisioning.js"]))
}
