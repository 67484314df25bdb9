//! The fleet pages: devices (filtered by status, group and tags, with a registration form whose
//! MQTT credentials are shown once), one device (its heartbeat figures with 24-hour charts drawn
//! on the server as SVG, its status history, its commands and a form to send one), groups and
//! enrollment tokens (the secret shown once). Every change goes through `/v1` from the forms.

use axum::extract::{RawQuery, State};
use axum::response::Response;
use maud::{Markup, PreEscaped, html};
use plantd_app::fleet::DeviceFilter;
use plantd_app::telemetry::SeriesRequest;
use plantd_model::Scope;
use plantd_model::Timestamp;
use plantd_model::device::{CommandStatus, DeviceStatus};
use plantd_model::page::Page;
use serde::Deserialize;

use super::browser::Browser;
use super::kit::{
    ALL, OrPage, PathId, action_button, field, format_value, maybe_time, pager, time,
};
use super::layout::{shell, shell_titled};
use crate::state::AppState;

#[derive(Deserialize, Default)]
struct DevicesQuery {
    status: Option<String>,
    group_id: Option<String>,
    tags: Option<String>,
    page: Option<String>,
}

const DEVICES_PER_PAGE: u32 = 100;

fn status_badge(s: DeviceStatus) -> Markup {
    let (class, glyph) = match s {
        DeviceStatus::Online => ("ok", "●"),
        DeviceStatus::Offline => ("warning", "◆"),
        DeviceStatus::Unknown => ("stale", "◌"),
    };
    html! { span class=(format!("badge {class}")) { (glyph) " " (s.as_str()) } }
}

fn command_badge(s: CommandStatus) -> Markup {
    let class = match s {
        CommandStatus::Succeeded => "ok",
        CommandStatus::Failed => "critical",
        CommandStatus::Expired => "expired",
        CommandStatus::Queued | CommandStatus::Sent => "active",
    };
    html! { span class=(format!("badge {class}")) { (s.as_str()) } }
}

/// Devices with filters and the registration form.
pub(crate) async fn devices(
    State(state): State<AppState>,
    browser: Browser,
    RawQuery(raw): RawQuery,
) -> Result<Response, Response> {
    let q: DevicesQuery =
        serde_urlencoded::from_str(raw.as_deref().unwrap_or_default()).unwrap_or_default();
    let org = browser.org_id();
    let groups = state.app.groups(org, ALL).await.or_page(&browser)?.items;
    let filter = DeviceFilter {
        status: q.status.as_deref().and_then(DeviceStatus::parse),
        group_id: q.group_id.clone().filter(|g| !g.is_empty()),
        tags: plantd_app::fleet::tag_list(q.tags.as_deref()),
    };
    let page: u32 = q
        .page
        .as_deref()
        .and_then(|p| p.parse().ok())
        .unwrap_or(1)
        .max(1);
    let list = state
        .app
        .devices(
            org,
            filter,
            Page {
                page,
                per_page: DEVICES_PER_PAGE,
            },
        )
        .await
        .or_page(&browser)?;
    let pages = list.total.div_ceil(u64::from(DEVICES_PER_PAGE)).max(1) as usize;
    let group_name = |id: &str| {
        groups
            .iter()
            .find(|g| g.id == id)
            .map_or(id.to_string(), |g| g.name.clone())
    };
    let body = html! {
        h1 { "Devices" }
        form class="filters" method="get" action="/devices" {
            label for="f-status" { "Status" }
            select id="f-status" name="status" {
                option value="" { "any" }
                @for s in DeviceStatus::ALL {
                    option value=(s.as_str()) selected[q.status.as_deref() == Some(s.as_str())] { (s.as_str()) }
                }
            }
            label for="f-group" { "Group" }
            select id="f-group" name="group_id" {
                option value="" { "any" }
                @for g in &groups {
                    option value=(g.id) selected[q.group_id.as_deref() == Some(g.id.as_str())] { (g.name) }
                }
            }
            label for="f-tags" { "Tags (all of)" }
            input id="f-tags" name="tags" value=(q.tags.clone().unwrap_or_default()) placeholder="press, north";
            button type="submit" { "Filter" }
        }
        p class="quiet" { (list.total) " devices" }
        table class="list" id="devices" {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Serial" } th scope="col" { "Status" } th scope="col" { "Last seen" } th scope="col" { "Firmware" } th scope="col" { "Groups" } th scope="col" { "Tags" } } }
            tbody {
                @for d in &list.items {
                    tr {
                        td { a href=(format!("/devices/{}", d.id)) { (d.name) } }
                        td { code { (d.serial_number) } }
                        td { (status_badge(d.status)) }
                        td { (maybe_time(d.last_seen_at)) }
                        td { (d.firmware_version.clone().unwrap_or_else(|| "–".into())) }
                        td { (d.group_ids.iter().map(|g| group_name(g)).collect::<Vec<_>>().join(", ")) }
                        td { (d.tags.join(", ")) }
                    }
                }
            }
        }
        (pager("/devices", &[("status", q.status.as_deref().unwrap_or_default()), ("group_id", q.group_id.as_deref().unwrap_or_default()), ("tags", q.tags.as_deref().unwrap_or_default())], page as usize, pages))
        @if browser.may(Scope::WriteAssets) {
            section {
                h2 { "Register a device" }
                form class="api-form" data-method="POST" data-action="/v1/fleet/devices" data-show-result="mqtt" {
                    (field("device-name", "name", "Name", html! { input id="device-name" name="name" required maxlength="200"; }))
                    (field("device-serial", "serial_number", "Serial number", html! { input id="device-serial" name="serial_number" required maxlength="128"; }))
                    (field("device-tags", "tags", "Tags (comma-separated)", html! { input id="device-tags" name="tags" data-type="list"; }))
                    label for="device-group" { "Group" }
                    select id="device-group" name="group_ids" data-type="list" {
                        option value="" { "none" }
                        @for g in &groups { option value=(g.id) { (g.name) } }
                    }
                    p class="field-error" data-error-for="group_ids" {}
                    button type="submit" class="primary" { "Register" }
                    p class="form-error" role="alert" {}
                    p class="quiet" { "The device's MQTT login appears here once; its password is not shown again." }
                    output class="result secret" {}
                }
            }
        }
    };
    Ok(shell(&browser, body, &[]))
}

/// The heartbeat figures charted on a device's page.
const CHARTED: [&str; 4] = [
    "cpu_percent",
    "memory_percent",
    "disk_percent",
    "temperature_c",
];

/// A line of one series over 24 hours, as inline SVG (no script needed).
fn sparkline(t: &[i64], v: &[f64], start: i64, end: i64) -> Markup {
    let (w, h) = (480.0, 80.0);
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let span = if hi > lo { hi - lo } else { 1.0 };
    let points: Vec<String> = t
        .iter()
        .zip(v)
        .map(|(&t, &v)| {
            let x = (t - start) as f64 / (end - start) as f64 * w;
            let y = h - (v - lo) / span * (h - 4.0) - 2.0;
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let svg = format!(
        r#"<svg class="sparkline" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="last 24 hours, from {} to {}"><polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{}"/></svg>"#,
        format_value(lo),
        format_value(hi),
        points.join(" ")
    );
    PreEscaped(svg)
}

/// One device: health, charts, status history, commands and the command form.
pub(crate) async fn device(
    State(state): State<AppState>,
    browser: Browser,
    PathId(id): PathId,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let d = state.app.device(org, &id).await.or_page(&browser)?;
    let health = state.app.device_health(org, &id).await.or_page(&browser)?;
    let commands = state
        .app
        .device_commands(
            org,
            &id,
            Page {
                page: 1,
                per_page: 20,
            },
        )
        .await
        .or_page(&browser)?;
    let end = Timestamp::now();
    let start = Timestamp::from_millis(end.millis() - 24 * 3_600_000);
    let series = state
        .app
        .telemetry_series(
            org,
            &SeriesRequest {
                data_source_id: None,
                asset_id: d.asset_id.clone(),
                tags: CHARTED.iter().map(|t| t.to_string()).collect(),
                start,
                end,
                width: 480,
            },
        )
        .await
        .unwrap_or_default();
    let figures = health.heartbeat.as_object().cloned().unwrap_or_default();
    let body = html! {
        h1 { (d.name) " " (status_badge(d.status)) }
        p class="quiet" { "Serial " code { (d.serial_number) } " · asset " code { (d.asset_id) } " · last seen " (maybe_time(d.last_seen_at)) " · firmware " (d.firmware_version.clone().unwrap_or_else(|| "–".into())) }
        h2 { "Health" }
        @if figures.is_empty() {
            p class="quiet" { "No heartbeat yet." }
        } @else {
            table class="list" id="heartbeat" {
                thead { tr { th scope="col" { "Figure" } th scope="col" { "Last heartbeat" } th scope="col" { "Last 24 hours" } } }
                tbody {
                    @for (name, value) in &figures {
                        tr {
                            td { (name) }
                            td { (value.as_f64().map_or_else(|| value.as_str().unwrap_or_default().to_string(), format_value)) }
                            td {
                                @if let Some(s) = series.iter().find(|s| &s.tag_name == name) {
                                    @if let Some(v) = s.value.as_ref().or(s.avg.as_ref()) {
                                        (sparkline(&s.t, v, start.millis(), end.millis()))
                                    }
                                }
                            }
                        }
                    }
                }
            }
            p class="quiet" { "Heartbeat at " (maybe_time(health.heartbeat_at)) }
        }
        h2 { "Status history" }
        ul id="status-history" {
            @for c in &health.status_history {
                li { (status_badge(c.status)) " " (time(c.at)) }
            }
        }
        h2 { "Commands" }
        table class="list" id="commands" {
            thead { tr { th scope="col" { "Command" } th scope="col" { "Params" } th scope="col" { "Status" } th scope="col" { "Created" } th scope="col" { "Completed" } th scope="col" { "Result" } } }
            tbody {
                @for c in &commands.items {
                    tr {
                        td { code { (c.command) } }
                        td { code { (c.params.to_string()) } }
                        td { (command_badge(c.status)) }
                        td { (time(c.created_at)) }
                        td { (maybe_time(c.completed_at)) }
                        td { code { (c.result.as_ref().map(|r| r.to_string()).unwrap_or_default()) } }
                    }
                }
            }
        }
        @if browser.may(Scope::WriteAssets) {
            section {
                h3 { "Send a command" }
                form class="api-form" data-method="POST" data-action=(format!("/v1/fleet/devices/{}/command", d.id)) {
                    (field("cmd-name", "command", "Command", html! { input id="cmd-name" name="command" required maxlength="128" placeholder="reboot"; }))
                    (field("cmd-params", "params", "Parameters (JSON object)", html! { textarea id="cmd-params" name="params" data-type="json" placeholder="{\"delay_s\": 5}" {} }))
                    (field("cmd-ttl", "ttl_seconds", "Time to live (seconds)", html! { input id="cmd-ttl" name="ttl_seconds" type="number" data-type="number" min="1" value="3600"; }))
                    button type="submit" class="primary" { "Send" }
                    p class="form-error" role="alert" {}
                }
                (action_button("DELETE", &format!("/v1/fleet/devices/{}", d.id), "Delete device", "danger",
                    Some(format!("Delete “{}”? It is disconnected and its credentials stop working.", d.name))))
            }
        }
    };
    Ok(shell_titled(&browser, &d.name, body, &[]))
}

/// Groups and enrollment tokens.
pub(crate) async fn enrollment(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let groups = state.app.groups(org, ALL).await.or_page(&browser)?.items;
    let tokens = state
        .app
        .enrollment_tokens(org, ALL)
        .await
        .or_page(&browser)?
        .items;
    let write = browser.may(Scope::WriteAssets);
    let body = html! {
        h1 { "Groups and enrollment" }
        h2 { "Groups" }
        table class="list" id="groups" {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Description" } th scope="col" { "Devices" } th scope="col" { "Actions" } } }
            tbody {
                @for g in &groups {
                    tr {
                        td { a href=(format!("/devices?group_id={}", g.id)) { (g.name) } }
                        td { (g.description) }
                        td { (g.device_count) }
                        td class="actions" {
                            @if write {
                                (action_button("DELETE", &format!("/v1/fleet/groups/{}", g.id), "Delete", "danger",
                                    Some(format!("Delete the group “{}”? Its devices stay.", g.name))))
                            }
                        }
                    }
                }
            }
        }
        @if write {
            form class="api-form" data-method="POST" data-action="/v1/fleet/groups" {
                (field("group-name", "name", "New group", html! { input id="group-name" name="name" required maxlength="200"; }))
                (field("group-description", "description", "Description", html! { input id="group-description" name="description" maxlength="2000"; }))
                button type="submit" class="primary" { "Add group" }
                p class="form-error" role="alert" {}
            }
        }
        h2 { "Enrollment tokens" }
        p class="quiet" { "A device registers itself with a token and no API key: POST /v1/fleet/devices with enrollment_token." }
        table class="list" id="tokens" {
            thead { tr { th scope="col" { "Token" } th scope="col" { "Group" } th scope="col" { "Tags" } th scope="col" { "Uses" } th scope="col" { "Expires" } th scope="col" { "Status" } th scope="col" { "Actions" } } }
            tbody {
                @for t in &tokens {
                    tr {
                        td { code { (t.prefix) "…" } }
                        td { (t.group_id.as_ref().and_then(|g| groups.iter().find(|x| &x.id == g)).map_or("–", |g| g.name.as_str())) }
                        td { (t.tags.join(", ")) }
                        td { (t.uses) " / " (t.max_uses.map_or("∞".to_string(), |m| m.to_string())) }
                        td { (maybe_time(t.expires_at)) }
                        td {
                            @match t.refusal(Timestamp::now()) {
                                None => span class="badge ok" { "usable" },
                                Some(("enrollment_token_revoked", _)) => span class="badge revoked" { "revoked" },
                                Some(_) => span class="badge expired" { "spent" },
                            }
                        }
                        td class="actions" {
                            @if write && t.revoked_at.is_none() {
                                (action_button("POST", &format!("/v1/fleet/enrollment/tokens/{}/revoke", t.id), "Revoke", "danger",
                                    Some("Revoke this token? Devices it enrolled keep working.".to_string())))
                            }
                        }
                    }
                }
            }
        }
        @if write {
            form class="api-form" data-method="POST" data-action="/v1/fleet/enrollment/token" data-show-result="secret" {
                label for="token-group" { "Group" }
                select id="token-group" name="group_id" {
                    option value="" { "none" }
                    @for g in &groups { option value=(g.id) { (g.name) } }
                }
                (field("token-tags", "tags", "Tags (comma-separated)", html! { input id="token-tags" name="tags" data-type="list"; }))
                (field("token-uses", "max_uses", "Maximum uses (empty: unlimited)", html! { input id="token-uses" name="max_uses" type="number" data-type="number" min="1"; }))
                (field("token-expires", "expires_at", "Expires (optional, RFC 3339)", html! { input id="token-expires" name="expires_at" placeholder="2027-01-01T00:00:00Z"; }))
                button type="submit" class="primary" { "Create token" }
                p class="form-error" role="alert" {}
                output class="result secret" {}
            }
        }
    };
    Ok(shell(&browser, body, &[]))
}
