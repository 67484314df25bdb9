//! Data sources: their status and tags, test, enable or disable and delete, and a create form
//! per protocol; a source's browse page (what the device offers, and choosing what is
//! collected: `assets/browse.js`). Changes go through `/v1` from the forms.

use axum::extract::State;
use axum::response::Response;
use maud::{Markup, html};
use plantd_model::Scope;
use plantd_model::data_source::DataSourceStatus;

use super::browser::Browser;
use super::kit::{OrPage, PathId, field, input};
use super::layout::{shell, shell_titled};
use crate::state::AppState;

/// The create form of one protocol: `config.*` fields become the `config` object.
fn source_form(kind: &str, title: &str, fields: &[(&str, &str, &str, bool, &str)]) -> Markup {
    html! {
        section {
            h3 { (title) }
            form class="api-form" data-method="POST" data-action="/v1/data-sources" {
                input type="hidden" name="type" value=(kind);
                (field(&format!("{kind}-name"), "name", "Name", input(&format!("{kind}-name"), "name", "text", true, "")))
                @for (name, label, input_type, required, placeholder) in fields {
                    @let id = format!("{kind}-{}", name.replace('.', "-"));
                    (field(&id, name, label, input(&id, name, input_type, *required, placeholder)))
                }
                button type="submit" class="primary" { "Add " (title) " source" }
                p class="form-error" role="alert" {}
            }
        }
    }
}

pub(crate) async fn page(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let sources = state
        .app
        .data_sources(browser.org_id())
        .await
        .or_page(&browser)?;
    let write = browser.may(Scope::WriteAssets);
    let body = html! {
        h1 { "Data sources" }
        @if sources.is_empty() { p class="quiet" { "No data sources yet." } }
        @else {
            table class="list" {
                thead { tr { th scope="col" { "Name" } th scope="col" { "Type" } th scope="col" { "Endpoint" } th scope="col" { "Status" } th scope="col" class="num" { "Tags" } th scope="col" { "Last problem" } @if write { th scope="col" { "Actions" } } } }
                tbody {
                    @for s in sources.iter() {
                        tr data-source-id=(s.id) {
                            td { @if write { a href=(format!("/data-sources/{}", s.id)) title="Browse what it offers and choose what is collected" { (s.name) } } @else { (s.name) } }
                            td { (s.source_type.as_str()) }
                            td { code { (s.endpoint) } }
                            td {
                                @if !s.enabled { span class="badge stale" { "○ disabled" } }
                                @else if s.status == DataSourceStatus::Connected { span class="badge ok" { "● connected" } }
                                @else { span class="badge warning" { "◆ disconnected" } }
                            }
                            td class="num" { (s.tag_count) }
                            td { @if let Some(e) = &s.last_error { small { (e) } } @else { "–" } }
                            @if write {
                                td class="actions" {
                                    form class="api-form inline" data-method="POST" data-action=(format!("/v1/data-sources/{}/test", s.id)) data-show-result="test" {
                                        button type="submit" { "Test" }
                                        output class="result" {}
                                        p class="form-error" role="alert" {}
                                    }
                                    form class="api-form inline" data-method="PUT" data-action=(format!("/v1/data-sources/{}", s.id)) {
                                        input type="hidden" name="enabled" data-type="boolean" value=(if s.enabled { "false" } else { "true" });
                                        button type="submit" { (if s.enabled { "Disable" } else { "Enable" }) }
                                    }
                                    form class="api-form inline" data-method="DELETE" data-action=(format!("/v1/data-sources/{}", s.id)) data-confirm=(format!("Delete the data source “{}”? Its connector stops; stored points stay.", s.name)) {
                                        button type="submit" class="danger" { "Delete" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if write {
            h2 { "Add a data source" }
            div class="forms" {
                (source_form("opcua", "OPC UA", &[
                    ("config.endpoint", "Endpoint", "text", true, "opc.tcp://plc.example:4840/"),
                    ("config.security_mode", "Security mode (None, Sign, SignAndEncrypt)", "text", false, "None"),
                    ("config.username", "User name (optional)", "text", false, ""),
                    ("config.password", "Password (optional)", "password", false, ""),
                    ("config.root_node", "Root node (optional)", "text", false, "ns=2;s=Simulation"),
                ]))
                (source_form("modbus", "Modbus TCP", &[
                    ("config.host", "Host", "text", true, "10.0.0.5"),
                    ("config.port", "Port", "number", false, "502"),
                    ("config.unit_id", "Unit id", "number", false, "1"),
                ]))
                (source_form("mqtt", "MQTT", &[
                    ("config.broker_url", "Broker URL", "text", true, "mqtt://broker.example:1883"),
                    ("config.topics", "Topics (comma-separated)", "list", true, "plant/+/telemetry"),
                    ("config.payload_format", "Payload format (json, sparkplug_b)", "text", false, "json"),
                    ("config.username", "User name (optional)", "text", false, ""),
                    ("config.password", "Password (optional)", "password", false, ""),
                ]))
            }
        }
    };
    Ok(shell(&browser, body, &[]))
}

/// One source: what the device offers, level by level, and what is collected (OPC UA: a tree
/// whose variables can be chosen, saved as `config.nodes`; MQTT: the topics heard while
/// listening, saved as `config.topics`; Modbus: the register map).
pub(crate) async fn browse(
    State(state): State<AppState>,
    browser: Browser,
    PathId(id): PathId,
) -> Result<Response, Response> {
    let s = state
        .app
        .data_source(browser.org_id(), &id)
        .await
        .or_page(&browser)?;
    let kind = s.source_type.as_str();
    let body = html! {
        div class="page-head" {
            h1 { (s.name) }
            a class="button" href="/data-sources" { "All data sources" }
        }
        p class="quiet" {
            (kind) " · " code { (s.endpoint) } " · "
            @if !s.enabled { span class="badge stale" { "○ disabled" } }
            @else if s.status == DataSourceStatus::Connected { span class="badge ok" { "● connected" } }
            @else { span class="badge warning" { "◆ disconnected" } }
            " · " (s.tag_count) " tags"
        }
        div id="browse" data-source-id=(s.id) data-type=(kind) {
            @match kind {
                "opcua" => {
                    p { "The server's objects and variables, as the connector names them (asset = the object, tag = the variable). Open an object to see what is under it; tick the variables to collect, then save. Only numbers and booleans can be collected." }
                    p id="browse-mode" class="quiet" {}
                    div class="browse-actions" {
                        button type="button" id="browse-save" class="primary" disabled { "Collect the ticked variables" }
                        button type="button" id="browse-auto" { "Collect everything under the root node" }
                    }
                    ul id="browse-tree" class="tree" role="tree" aria-label="Address space" {}
                }
                "mqtt" => {
                    p { "The topics the broker carries, heard while listening (retained messages arrive at once). Tick the topics to collect, then save: they replace the source's topic filters." }
                    form id="browse-listen" class="filters" {
                        label for="browse-filter" { "Topic filter" }
                        input id="browse-filter" name="node" value="#" maxlength="1024";
                        label for="browse-seconds" { "Seconds" }
                        input id="browse-seconds" name="listen_seconds" type="number" min="1" max="30" value="5";
                        button type="submit" { "Listen" }
                    }
                    div class="browse-actions" {
                        button type="button" id="browse-save" class="primary" disabled { "Collect the ticked topics" }
                    }
                    table class="list" id="browse-topics" {
                        thead { tr { th scope="col" { "Collect" } th scope="col" { "Topic" } th scope="col" { "Payload" } th scope="col" class="num" { "Messages" } th scope="col" { "Latest" } } }
                        tbody {}
                    }
                }
                _ => {
                    p { "A Modbus device does not describe itself: these are the registers the source's map reads. Change the map with " code { "PUT /v1/data-sources/" (s.id) } " (" code { "config.registers" } ")." }
                    table class="list" id="browse-registers" {
                        thead { tr { th scope="col" { "Register" } th scope="col" { "Type" } th scope="col" { "Asset" } th scope="col" { "Tag" } } }
                        tbody {}
                    }
                }
            }
            p class="form-error" id="browse-error" role="alert" {}
            p class="quiet" id="browse-status" aria-live="polite" {}
        }
    };
    Ok(shell_titled(&browser, &s.name, body, &["browse.js"]))
}
