//! The console's administration pages: data sources (a form per protocol, test, status), API
//! keys (created secrets shown once, revoke) and members (invite, remove). Changes go through
//! `/v1` from the pages' forms.

use axum::extract::State;
use axum::response::Response;
use maud::{Markup, html};
use plantd_model::Scope;
use plantd_model::data_source::DataSourceStatus;
use plantd_model::page::Page;

use super::browser::Browser;
use super::layout::{error_shell, failed, maybe_time, shell, time};
use crate::state::AppState;

pub(super) const ALL: Page = Page {
    page: 1,
    per_page: 1000,
};

/// A text field with its label and the place its error appears.
pub(super) fn field(id: &str, name: &str, label: &str, attrs: Markup) -> Markup {
    html! {
        label for=(id) { (label) }
        (attrs)
        p class="field-error" data-error-for=(name) {}
    }
}

/// An input of `kind` (`text`, `password`, `number`, or `list`: comma-separated values).
fn input(id: &str, name: &str, kind: &str, required: bool, placeholder: &str) -> Markup {
    match kind {
        "number" => html! {
            input id=(id) name=(name) type="number" data-type="number" required[required] placeholder=(placeholder);
        },
        "list" => html! {
            input id=(id) name=(name) type="text" data-type="list" required[required] placeholder=(placeholder);
        },
        _ => html! {
            input id=(id) name=(name) type=(kind) required[required] placeholder=(placeholder);
        },
    }
}

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

pub(crate) async fn data_sources(State(state): State<AppState>, browser: Browser) -> Response {
    let sources = match state.app.data_sources(browser.org_id()).await {
        Ok(s) => s,
        Err(e) => return failed(&browser, "Data sources", "/data-sources", &e),
    };
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
                            td { (s.name) }
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
    shell(Some(&browser), "Data sources", "/data-sources", body, &[])
}

pub(crate) async fn api_keys(State(state): State<AppState>, browser: Browser) -> Response {
    if !browser.may(Scope::Admin) {
        return error_shell(
            &browser,
            axum::http::StatusCode::FORBIDDEN,
            "API keys",
            "/api-keys",
            "API keys are managed by owners and admins.",
        );
    }
    let keys = match state.app.api_keys(browser.org_id(), ALL).await {
        Ok(k) => k,
        Err(e) => return failed(&browser, "API keys", "/api-keys", &e),
    };
    let body = html! {
        h1 { "API keys" }
        table class="list" {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Key" } th scope="col" { "Scopes" } th scope="col" { "Created" } th scope="col" { "Last used" } th scope="col" { "Expires" } th scope="col" { "Actions" } } }
            tbody {
                @for k in keys.items.iter().filter(|k| k.revoked_at.is_none()) {
                    tr {
                        td { (k.name) }
                        td { code { (k.prefix) "…" } }
                        td { (k.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")) }
                        td { (time(k.created_at)) }
                        td { (maybe_time(k.last_used_at)) }
                        td { (maybe_time(k.expires_at)) }
                        td class="actions" {
                            form class="api-form inline" data-method="DELETE" data-action=(format!("/v1/api-keys/{}", k.id)) data-confirm=(format!("Revoke the key “{}”? Programs using it stop working at once.", k.name)) {
                                button type="submit" class="danger" { "Revoke" }
                            }
                        }
                    }
                }
            }
        }
        section {
            h2 { "New key" }
            form class="api-form" data-method="POST" data-action="/v1/api-keys" data-show-result="secret" {
                (field("key-name", "name", "Name", html! { input id="key-name" name="name" required maxlength="200"; }))
                fieldset {
                    legend { "Scopes" }
                    @for s in Scope::ALL {
                        label class="check" {
                            input type="checkbox" name="scopes" value=(s.as_str()) data-type="multi";
                            " " (s.as_str())
                        }
                    }
                    p class="field-error" data-error-for="scopes" {}
                }
                (field("key-expires", "expires_at", "Expires (optional, RFC 3339)", html! { input id="key-expires" name="expires_at" placeholder="2027-01-01T00:00:00Z"; }))
                button type="submit" class="primary" { "Create key" }
                p class="form-error" role="alert" {}
                output class="result secret" {}
            }
        }
    };
    shell(Some(&browser), "API keys", "/api-keys", body, &[])
}

pub(crate) async fn members(State(state): State<AppState>, browser: Browser) -> Response {
    let members = match state.app.members(browser.org_id(), ALL).await {
        Ok(m) => m,
        Err(e) => return failed(&browser, "Members", "/members", &e),
    };
    let admin = browser.may(Scope::Admin);
    let me = browser.caller.user_id.clone().unwrap_or_default();
    let body = html! {
        h1 { "Members" }
        table class="list" {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Email" } th scope="col" { "Role" } th scope="col" { "Status" } th scope="col" { "Since" } @if admin { th scope="col" { "Actions" } } } }
            tbody {
                @for m in &members.items {
                    tr {
                        td { (m.name) }
                        td { (m.email) }
                        td { (m.role.as_str()) }
                        td { (m.status.as_str()) }
                        td { (time(m.joined_at)) }
                        @if admin {
                            td class="actions" {
                                @if m.id != me {
                                    form class="api-form inline" data-method="DELETE" data-action=(format!("/v1/organizations/current/members/{}", m.id)) data-confirm=(format!("Remove {} from the organization? Their sessions end at once.", m.email)) {
                                        button type="submit" class="danger" { "Remove" }
                                    }
                                } @else { "(you, " (browser.role.as_str()) ")" }
                            }
                        }
                    }
                }
            }
        }
        @if admin {
            section {
                h2 { "Invite" }
                form class="api-form" data-method="POST" data-action="/v1/organizations/current/members/invite" data-show-result="invitation" {
                    (field("invite-email", "email", "Email", html! { input id="invite-email" name="email" type="email" required; }))
                    label for="invite-role" { "Role" }
                    select id="invite-role" name="role" {
                        option value="member" { "member" }
                        option value="admin" { "admin" }
                        option value="owner" { "owner" }
                    }
                    p class="field-error" data-error-for="role" {}
                    button type="submit" class="primary" { "Send invitation" }
                    p class="form-error" role="alert" {}
                    output class="result" {}
                }
            }
        }
    };
    shell(Some(&browser), "Members", "/members", body, &[])
}
