//! The OTA pages: firmware packages (upload with progress from `assets/ota.js`, release,
//! download), deployments (the list and a form with strategy, phases, thresholds and timeout)
//! and one deployment (its phases and devices, kept live by `assets/ota.js`, with cancel,
//! continue and rollback). Every change goes through `/v1`.

use axum::extract::State;
use axum::response::Response;
use maud::{Markup, html};
use plantd_model::Scope;
use plantd_model::ota::{DeploymentStatus, DeviceState, PackageStatus, Targets};
use plantd_model::page::Page;

use super::browser::Browser;
use super::kit::{ALL, OrPage, PathId, action_button, byte_size, field, maybe_time, time};
use super::layout::{shell, shell_titled};
use crate::state::AppState;

fn deployment_badge(s: DeploymentStatus) -> Markup {
    let class = match s {
        DeploymentStatus::Completed => "ok",
        DeploymentStatus::Failed => "critical",
        DeploymentStatus::RolledBack => "warning",
        DeploymentStatus::Cancelled => "revoked",
        DeploymentStatus::Paused | DeploymentStatus::Scheduled => "stale",
        DeploymentStatus::InProgress => "active",
    };
    html! { span class=(format!("badge {class}")) data-status=(s.as_str()) { (s.as_str()) } }
}

fn device_badge(s: DeviceState) -> Markup {
    let class = match s {
        DeviceState::Succeeded => "ok",
        DeviceState::Failed => "critical",
        DeviceState::RolledBack | DeviceState::RollingBack => "warning",
        DeviceState::Cancelled => "revoked",
        DeviceState::Pending => "stale",
        _ => "active",
    };
    html! { span class=(format!("badge {class}")) { (s.as_str()) } }
}

/// Packages with the upload form.
pub(crate) async fn packages(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let list = state
        .app
        .packages(browser.org_id(), ALL)
        .await
        .or_page(&browser)?;
    let write = browser.may(Scope::WriteAssets);
    let body = html! {
        h1 { "Firmware" }
        p class="quiet" { "Packages are signed with the organization's Ed25519 key (" a href="/v1/ota/public-key" { "public key" } "); a draft is deployed once released." }
        table class="list" id="packages" {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Version" } th scope="col" { "Device type" } th scope="col" { "Size" } th scope="col" { "SHA-256" } th scope="col" { "Status" } th scope="col" { "Uploaded" } th scope="col" { "Actions" } } }
            tbody {
                @for p in &list.items {
                    tr data-package-id=(p.id) {
                        td { (p.name) }
                        td { code { (p.version) } }
                        td { (p.device_type) }
                        td { (byte_size(p.size_bytes)) }
                        td { code title=(p.sha256) { (p.sha256[..12]) "…" } }
                        td {
                            @match p.status {
                                PackageStatus::Released => span class="badge ok" { "released" },
                                PackageStatus::Draft => span class="badge stale" { "draft" },
                            }
                        }
                        td { (time(p.created_at)) }
                        td class="actions" {
                            a href=(format!("/v1/ota/packages/{}/download", p.id)) download { "Download" }
                            @if write && p.status == PackageStatus::Draft {
                                " "
                                (action_button("POST", &format!("/v1/ota/packages/{}/release", p.id), "Release", "primary",
                                    Some(format!("Release {} {}? It can then be deployed; a release cannot be undone.", p.name, p.version))))
                            }
                        }
                    }
                }
            }
        }
        @if write {
            section {
                h2 { "Upload a package" }
                form id="package-upload" {
                    label for="pkg-file" { "File (up to 2 GiB)" }
                    input id="pkg-file" name="file" type="file" required;
                    p class="field-error" data-error-for="file" {}
                    (field("pkg-version", "version", "Version", html! { input id="pkg-version" name="version" required maxlength="64" placeholder="2.4.1"; }))
                    (field("pkg-name", "name", "Name (default: the file's name)", html! { input id="pkg-name" name="name" maxlength="200"; }))
                    (field("pkg-type", "device_type", "Device type", html! { input id="pkg-type" name="device_type" maxlength="64" placeholder="gateway-x1"; }))
                    (field("pkg-notes", "release_notes", "Release notes", html! { textarea id="pkg-notes" name="release_notes" maxlength="10000" {} }))
                    progress id="pkg-progress" max="100" value="0" hidden {}
                    button type="submit" class="primary" { "Upload" }
                    p class="form-error" role="alert" {}
                }
            }
        }
    };
    Ok(shell(&browser, body, &["ota.js"]))
}

/// Deployments with the creation form.
pub(crate) async fn deployments(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let list = state
        .app
        .deployments(org, None, ALL)
        .await
        .or_page(&browser)?;
    let packages = state.app.packages(org, ALL).await.or_page(&browser)?.items;
    let groups = state.app.groups(org, ALL).await.or_page(&browser)?.items;
    let package_name = |id: &str| {
        packages
            .iter()
            .find(|p| p.id == id)
            .map_or(id.to_string(), |p| format!("{} {}", p.name, p.version))
    };
    let body = html! {
        h1 { "Deployments" }
        table class="list" id="deployments" {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Package" } th scope="col" { "Status" } th scope="col" { "Phase" } th scope="col" { "Succeeded" } th scope="col" { "Failed" } th scope="col" { "Devices" } th scope="col" { "Created" } } }
            tbody {
                @for d in &list.items {
                    tr {
                        td { a href=(format!("/ota/deployments/{}", d.id)) { (d.name) } }
                        td { (package_name(&d.package_id)) }
                        td { (deployment_badge(d.status)) }
                        td { (d.current_phase) " / " (d.phases.len()) }
                        td { (d.device_counts.get(&DeviceState::Succeeded).copied().unwrap_or(0)) }
                        td { (d.device_counts.get(&DeviceState::Failed).copied().unwrap_or(0)) }
                        td { (d.device_counts.values().sum::<u64>()) }
                        td { (time(d.created_at)) }
                    }
                }
            }
        }
        @if browser.may(Scope::WriteAssets) {
            section {
                h2 { "Deploy a package" }
                form class="api-form" data-method="POST" data-action="/v1/ota/deployments" data-redirect="/ota/deployments/{id}" {
                    (field("dep-name", "name", "Name", html! { input id="dep-name" name="name" required maxlength="200" placeholder="2.4.1 to line 7"; }))
                    label for="dep-package" { "Package (released)" }
                    select id="dep-package" name="package_id" required {
                        @for p in packages.iter().filter(|p| p.status == PackageStatus::Released) {
                            option value=(p.id) { (p.name) " " (p.version) }
                        }
                    }
                    p class="field-error" data-error-for="package_id" {}
                    input type="hidden" name="targets.type" value="group";
                    label for="dep-group" { "Device group" }
                    select id="dep-group" name="targets.group_id" required {
                        @for g in &groups { option value=(g.id) { (g.name) " (" (g.device_count) ")" } }
                    }
                    p class="field-error" data-error-for="targets.group_id" {}
                    label for="dep-strategy" { "Strategy" }
                    select id="dep-strategy" name="strategy" {
                        option value="phased" { "phased" }
                        option value="all_at_once" { "all at once" }
                    }
                    (field("dep-phases", "phases", "Phases (JSON; empty: 10%, 50%, 100%, each stopping above 20% failed)", html! {
                        textarea id="dep-phases" name="phases" data-type="json" placeholder="[{\"percent\": 10, \"failure_threshold_percent\": 20, \"wait_for_continue\": true}, {\"percent\": 100}]" {}
                    }))
                    label for="dep-rollback" { "Roll back automatically when a phase fails" }
                    select id="dep-rollback" name="rollback_enabled" data-type="boolean" {
                        option value="true" { "yes" }
                        option value="false" { "no" }
                    }
                    (field("dep-timeout", "device_timeout_seconds", "Device timeout (seconds)", html! { input id="dep-timeout" name="device_timeout_seconds" type="number" data-type="number" min="1" value="600"; }))
                    button type="submit" class="primary" { "Deploy" }
                    p class="form-error" role="alert" {}
                }
            }
        }
    };
    Ok(shell(&browser, body, &[]))
}

/// One deployment: phases, devices, and its actions; live while it runs.
pub(crate) async fn deployment(
    State(state): State<AppState>,
    browser: Browser,
    PathId(id): PathId,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let d = state.app.deployment(org, &id).await.or_page(&browser)?;
    let package = state
        .app
        .package(org, &d.package_id)
        .await
        .or_page(&browser)?;
    let devices = state
        .app
        .deployment_devices(
            org,
            &id,
            None,
            Page {
                page: 1,
                per_page: 500,
            },
        )
        .await
        .or_page(&browser)?;
    let write = browser.may(Scope::WriteAssets);
    let target = match &d.targets {
        Targets::Group { group_id } => match state.app.group(org, group_id).await {
            Ok(g) => format!("group {}", g.name),
            Err(_) => format!("group {group_id} (deleted)"),
        },
        Targets::Devices { device_ids } => format!("{} listed devices", device_ids.len()),
        Targets::Tags { tags } => format!("devices tagged {}", tags.join(", ")),
    };
    let body = html! {
        div id="deployment" data-id=(d.id) data-active=(d.status.is_active()) {
            h1 { (d.name) " " span id="deployment-status" { (deployment_badge(d.status)) } }
            p class="quiet" {
                (package.name) " " code { (package.version) } " · " (target) " · " (d.strategy.as_str())
                " · rollback " (if d.rollback_enabled { "automatic" } else { "by hand" })
                " · device timeout " (d.device_timeout_seconds) " s · started " (maybe_time(d.started_at)) " · finished " (maybe_time(d.finished_at))
            }
            @if let Some(reason) = &d.reason {
                p id="deployment-reason" class="form-error" { (reason) }
            }
            h2 { "Phases" }
            table class="list" id="phases" {
                thead { tr { th scope="col" { "Phase" } th scope="col" { "Share" } th scope="col" { "Stops above" } th scope="col" { "Then" } th scope="col" { "Devices" } th scope="col" { "Succeeded" } th scope="col" { "Failed" } th scope="col" { "Open" } } }
                tbody {
                    @for (i, p) in d.phases.iter().enumerate() {
                        @let progress = d.phase_progress.get(i);
                        tr data-phase=(i + 1) class=[(d.current_phase as usize == i + 1).then_some("current")] {
                            td { (i + 1) }
                            td { @if let Some(pc) = p.percent { (pc) "%" } @else if let Some(c) = p.count { "+" (c) } }
                            td { (p.failure_threshold_percent) "% failed" }
                            td { @if i + 1 == d.phases.len() { "done" } @else if p.wait_for_continue { "wait for continue" } @else if p.pause_seconds > 0 { "pause " (p.pause_seconds) " s" } @else { "next phase" } }
                            td data-count="devices" { (progress.map_or(0, |x| x.devices)) }
                            td data-count="succeeded" { (progress.map_or(0, |x| x.succeeded)) }
                            td data-count="failed" { (progress.map_or(0, |x| x.failed)) }
                            td data-count="open" { (progress.map_or(0, |x| x.open)) }
                        }
                    }
                }
            }
            @if write {
                div class="actions" {
                    @if d.status == DeploymentStatus::Paused {
                        (action_button("POST", &format!("/v1/ota/deployments/{}/continue", d.id), "Continue", "primary", None))
                    }
                    @if d.status.is_active() {
                        (action_button("POST", &format!("/v1/ota/deployments/{}/cancel", d.id), "Cancel", "danger",
                            Some("Cancel this deployment? Devices not reached yet are not updated.".to_string())))
                    }
                    @if !matches!(d.status, DeploymentStatus::RolledBack | DeploymentStatus::Cancelled) {
                        (action_button("POST", &format!("/v1/ota/deployments/{}/rollback", d.id), "Roll back", "danger",
                            Some("Roll back? Every device that installed the package returns to its previous version.".to_string())))
                    }
                }
            }
            h2 { "Devices" }
            p class="quiet" { (devices.total) " devices" @if devices.total > 500 { " (the first 500 shown)" } }
            table class="list" id="deployment-devices" {
                thead { tr { th scope="col" { "Device" } th scope="col" { "Phase" } th scope="col" { "State" } th scope="col" { "Message" } th scope="col" { "Updated" } } }
                tbody {
                    @for x in &devices.items {
                        tr data-device-id=(x.device_id) {
                            td { a href=(format!("/devices/{}", x.device_id)) { (x.device_name) } }
                            td { (x.phase) }
                            td data-state=(x.state.as_str()) { (device_badge(x.state)) }
                            td { (x.message.clone().unwrap_or_default()) }
                            td { (time(x.updated_at)) }
                        }
                    }
                }
            }
        }
    };
    Ok(shell_titled(&browser, &d.name, body, &["ota.js"]))
}
