//! The edge agent's setup wizard (`/setup`, issue 34): until the owner has a password, the
//! setup code and a new password (a form posted here: it logs in); then the host's network
//! (changed through `/v1/edge/network` where the host has NetworkManager), enrollment with a
//! cloud (`/v1/edge/enroll`) and assets from templates (`setup.js`: a CSV line posted to
//! `/v1/provisioning/import/csv`). On an instance that is not an edge agent: not found.

use axum::Extension;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use plantd_app::access::AuditTrail;
use plantd_app::edge_setup::SetupPassword;
use plantd_model::Scope;
use serde::Deserialize;

use super::browser::{Browser, NotShown};
use super::kit::OrPage;
use super::layout::{bare, shell};
use crate::csrf;
use crate::oauth_server::PageForm;
use crate::state::AppState;

#[derive(Deserialize, Default)]
pub(crate) struct SetupForm {
    code: Option<String>,
    setup_code: Option<String>,
    password: Option<String>,
    password_again: Option<String>,
}

fn not_an_edge() -> Response {
    crate::error::ApiError::NotFound(
        "the setup wizard (this instance is not an edge agent: `plantd edge`)".into(),
    )
    .into_response()
}

fn password_form(status: StatusCode, code: &str, error: Option<&str>) -> Response {
    let body = html! {
        section class="login" id="setup-password" {
            h1 { "Set up this edge agent" }
            p { "Step 1 of 4: the password of " code { (plantd_app::operator::FIRST_ADMIN_EMAIL) } ", this agent's owner. "
                "The setup code was printed when the agent started, and is kept in " code { "<data dir>/setup-code" } "." }
            @if let Some(e) = error {
                p class="error form-error" role="alert" { (e) }
            }
            form method="post" action="/setup" {
                label for="setup-code" { "Setup code" }
                input id="setup-code" name="setup_code" type="text" autocomplete="off" required value=(code) autofocus[code.is_empty()];
                label for="password" { "New password (at least 12 characters)" }
                input id="password" name="password" type="password" autocomplete="new-password" required autofocus[!code.is_empty()];
                label for="password-again" { "The password again" }
                input id="password-again" name="password_again" type="password" autocomplete="new-password" required;
                button type="submit" class="primary" { "Set the password" }
            }
        }
    };
    let mut r = bare("Set up this edge agent", body);
    *r.status_mut() = status;
    r
}

/// The wizard: its first step while the owner has no password, else (logged in) the others.
pub(crate) async fn page(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
    browser: Result<Browser, NotShown>,
) -> Response {
    let setup = match state.app.edge_setup_state().await {
        Ok(Some(s)) => s,
        Ok(None) => return not_an_edge(),
        Err(e) => return crate::error::ApiError::from(e).into_response(),
    };
    if setup.pending {
        let q: SetupForm =
            serde_urlencoded::from_str(raw.as_deref().unwrap_or_default()).unwrap_or_default();
        return password_form(StatusCode::OK, q.code.as_deref().unwrap_or_default(), None);
    }
    match browser {
        Ok(b) => steps(&state, &b).await.unwrap_or_else(|r| r),
        Err(not_shown) => not_shown.into_response(),
    }
}

/// The first step's form: the password set, the owner logged in, on to the next steps.
pub(crate) async fn set_password(
    State(state): State<AppState>,
    Extension(trail): Extension<AuditTrail>,
    PageForm { form }: PageForm<SetupForm>,
) -> Response {
    let code = form.setup_code.unwrap_or_default();
    let password = form.password.unwrap_or_default();
    if form.password_again.as_deref() != Some(password.as_str()) {
        return password_form(
            StatusCode::BAD_REQUEST,
            &code,
            Some("the two passwords differ"),
        );
    }
    match state
        .app
        .finish_edge_setup(
            SetupPassword {
                setup_code: code.clone(),
                password,
            },
            &trail,
        )
        .await
    {
        Ok(new) => {
            let mut r = Redirect::to("/setup").into_response();
            r.headers_mut().insert(
                header::SET_COOKIE,
                csrf::set_cookie(&new.token, state.app.issuer()),
            );
            r
        }
        Err(plantd_app::AppError::Invalid(errors)) => {
            let message: Vec<String> = errors
                .iter()
                .map(|e| format!("{}: {}", e.field.replace('_', " "), e.message))
                .collect();
            password_form(StatusCode::BAD_REQUEST, &code, Some(&message.join("; ")))
        }
        // Set meanwhile (another browser): log in.
        Err(plantd_app::AppError::Refused { .. }) => {
            Redirect::to("/login?next=/setup").into_response()
        }
        Err(e) => crate::error::ApiError::from(e).into_response(),
    }
}

/// Steps 2 to 4: the network, the cloud, the assets.
async fn steps(state: &AppState, browser: &Browser) -> Result<Response, Response> {
    let admin = browser.may(Scope::Admin);
    let network = if admin {
        Some(state.app.host_network().await.or_page(browser)?)
    } else {
        None
    };
    let edge = state
        .app
        .edge_config(browser.org_id())
        .await
        .or_page(browser)?;
    let templates = state.app.edge_templates().or_page(browser)?;
    let body = html! {
        h1 { "Set up this edge agent" }
        p { "The owner's password is set. The steps below can be taken now or later (this page stays at "
            code { "/setup" } "); the agent runs meanwhile." }
        section id="setup-network" {
            h2 { "Step 2: the network" }
            @match &network {
                None => p { "Only owners and admins see and set the host's network." },
                Some(n) => (network_step(n)),
            }
        }
        section id="setup-cloud" {
            h2 { "Step 3: the cloud" }
            @match &edge.cloud {
                Some(c) => p id="setup-enrolled" { "Enrolled with " code { (c.url) } " as device " code { (c.device_id) } "." },
                None => p { "Not enrolled: the agent keeps its data here. With an enrollment token of the cloud (its Fleet page) it becomes a device of the cloud and forwards its points over MQTT." },
            }
            @if admin {
                form class="api-form" data-method="POST" data-action="/v1/edge/enroll" data-redirect="/setup" {
                    label for="enroll-cloud" { "The cloud's address" }
                    input id="enroll-cloud" name="cloud_url" type="url" required placeholder="https://plant.example.com";
                    label for="enroll-token" { "Enrollment token" }
                    input id="enroll-token" name="token" type="text" autocomplete="off" required placeholder="pde_...";
                    button type="submit" class="primary" { @if edge.cloud.is_some() { "Enroll again" } @else { "Enroll" } }
                    p class="form-error" role="alert" {}
                }
            }
        }
        section id="setup-assets" {
            h2 { "Step 4: assets" }
            p { "Pick a kind of asset, name it and give its address: it becomes a data source of this agent (as a CSV import would; the "
                a href="/provisioning" { "Provisioning" } " page imports files, QR labels and finds devices)." }
            @if browser.may(Scope::WriteAssets) {
                form id="setup-template" {
                    label for="template" { "Kind" }
                    select id="template" name="template" required {
                        @for t in &templates {
                            option value=(t.asset_type) data-sensors=(sensors_cell(t, false)) data-modbus=(sensors_cell(t, true)) { (t.title) " (" (t.sensors.len()) " sensors)" }
                        }
                    }
                    label for="template-asset" { "Asset id" }
                    input id="template-asset" name="asset_id" type="text" required placeholder="Pump_02";
                    label for="template-protocol" { "Protocol" }
                    select id="template-protocol" name="protocol" {
                        option value="opcua" { "OPC UA (the sensors by name)" }
                        option value="modbus" { "Modbus TCP (the simulator's register map)" }
                    }
                    label for="template-host" { "Host" }
                    input id="template-host" name="host" type="text" required placeholder="10.0.0.21";
                    label for="template-port" { "Port" }
                    input id="template-port" name="port" type="number" min="1" max="65535" required value="4840";
                    ul class="upload-errors" hidden {}
                    button type="submit" class="primary" { "Add the asset" }
                    p class="form-error" role="alert" {}
                    output class="result" {}
                }
            }
        }
    };
    Ok(shell(browser, body, &["setup.js"]))
}

/// A template's sensors as a CSV `sensors` cell: names (OPC UA) or `name:register` (Modbus).
fn sensors_cell(t: &plantd_model::provisioning::AssetTemplate, modbus: bool) -> String {
    t.sensors
        .iter()
        .map(|s| {
            if modbus {
                format!("{}:{}", s.name, s.modbus_address)
            } else {
                s.name.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(";")
}

fn network_step(n: &plantd_app::edge_setup::HostNetwork) -> Markup {
    html! {
        p { "Host " strong { (n.hostname) } ". Gateways: " (if n.gateways.is_empty() { "none".to_string() } else { n.gateways.join(", ") })
            ". Name servers: " (if n.dns.is_empty() { "none".to_string() } else { n.dns.join(", ") }) "." }
        table class="list" id="setup-interfaces" {
            thead { tr { th scope="col" { "Interface" } th scope="col" { "State" } th scope="col" { "MAC" } th scope="col" { "Addresses" } } }
            tbody {
                @for i in &n.interfaces {
                    tr data-interface=(i.name) {
                        td { (i.name) @if i.loopback { " (loopback)" } }
                        td { (i.state) }
                        td { code { (i.mac.as_deref().unwrap_or("")) } }
                        td { (i.addresses.join(", ")) }
                    }
                }
            }
        }
        @match &n.cannot_apply {
            Some(why) => p id="setup-network-fixed" class="hint" { (why) },
            None => {
                form class="api-form" data-method="PUT" data-action="/v1/edge/network" data-redirect="/setup" data-confirm="Change this host's network? The console may move to the new address." {
                    label for="net-interface" { "Interface" }
                    select id="net-interface" name="interface" {
                        @for i in n.interfaces.iter().filter(|i| !i.loopback) { option value=(i.name) { (i.name) } }
                    }
                    label for="net-method" { "IPv4" }
                    select id="net-method" name="method" { option value="dhcp" { "DHCP" } option value="static" { "Static" } }
                    label for="net-address" { "Address with prefix (static)" }
                    input id="net-address" name="address" type="text" placeholder="192.168.1.20/24";
                    label for="net-gateway" { "Gateway (static)" }
                    input id="net-gateway" name="gateway" type="text" placeholder="192.168.1.1";
                    label for="net-dns" { "Name servers (static, comma-separated)" }
                    input id="net-dns" name="dns" type="text" data-type="list" placeholder="192.168.1.1";
                    button type="submit" class="primary" { "Apply" }
                    p class="form-error" role="alert" {}
                }
            }
        }
    }
}
