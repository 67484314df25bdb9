//! The console's licenses page (administrators): products with a create form, licenses with
//! their status, activations and key, issued from a form and suspended, reinstated, renewed or
//! revoked in place. Every change goes through `/v1` from the forms, as on the other pages.

use axum::extract::State;
use axum::response::Response;
use maud::{Markup, html};
use plantd_app::licenses::LicenseFilter;
use plantd_model::license::{License, LicenseStatus, LicenseType};

use super::browser::Browser;
use super::kit::{ALL, OrPage, action_button, field, maybe_time};
use super::layout::shell;
use crate::state::AppState;

/// One action button on a license (`suspend`, `reinstate`, `renew`, `revoke`).
fn action(l: &License, verb: &str, label: &str, class: &str, confirm: Option<String>) -> Markup {
    action_button(
        "POST",
        &format!("/v1/licenses/{}/{verb}", l.id),
        label,
        class,
        confirm,
    )
}

fn actions(l: &License) -> Markup {
    let who = &l.customer_email;
    html! {
        @match l.status {
            LicenseStatus::Active | LicenseStatus::Expired => {
                (action(l, "suspend", "Suspend", "", Some(format!("Suspend the license of {who}? Its devices are refused until it is reinstated."))))
            }
            LicenseStatus::Suspended => (action(l, "reinstate", "Reinstate", "", None)),
            LicenseStatus::Revoked => {}
        }
        @if l.license_type == LicenseType::Subscription && l.status != LicenseStatus::Revoked {
            (action(l, "renew", "Renew", "", None))
        }
        @if l.status != LicenseStatus::Revoked {
            (action(l, "revoke", "Revoke", "danger", Some(format!("Revoke the license of {who} for good?"))))
        }
    }
}

pub(crate) async fn page(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let products = state.app.products(org, ALL).await.or_page(&browser)?.items;
    let licenses = state
        .app
        .licenses(org, &LicenseFilter::default(), ALL)
        .await
        .or_page(&browser)?
        .items;
    let product_name = |id: &str| {
        products
            .iter()
            .find(|p| p.id == id)
            .map_or("?", |p| p.name.as_str())
    };
    let body = html! {
        h1 { "Licenses" }
        h2 { "Products" }
        table class="list" {
            thead { tr { th scope="col" { "Name" } th scope="col" { "SKU" } th scope="col" { "Price" } th scope="col" { "Type" } th scope="col" { "Features" } th scope="col" { "Actions" } } }
            tbody {
                @for p in &products {
                    tr {
                        td { (p.name) }
                        td { code { (p.sku) } }
                        td { (format!("{:.2}", p.price)) }
                        td { (p.license_type.as_str()) }
                        td { (p.features.join(", ")) }
                        td class="actions" {
                            (action_button("DELETE", &format!("/v1/products/{}", p.id), "Delete", "danger",
                                Some(format!("Delete the product “{}”?", p.name))))
                        }
                    }
                }
            }
        }
        section {
            h3 { "New product" }
            form class="api-form" data-method="POST" data-action="/v1/products" {
                (field("product-name", "name", "Name", html! { input id="product-name" name="name" required maxlength="200"; }))
                (field("product-sku", "sku", "SKU", html! { input id="product-sku" name="sku" required maxlength="64"; }))
                (field("product-price", "price", "Price", html! { input id="product-price" name="price" type="number" data-type="number" min="0" step="any" required; }))
                label for="product-type" { "License type" }
                select id="product-type" name="license_type" {
                    option value="perpetual" { "perpetual" }
                    option value="subscription" { "subscription" }
                }
                (field("product-features", "features", "Features (comma-separated)", html! { input id="product-features" name="features" data-type="list" placeholder="mqtt, opcua, modbus"; }))
                (field("product-description", "description", "Description", html! { input id="product-description" name="description" maxlength="2000"; }))
                button type="submit" class="primary" { "Add product" }
                p class="form-error" role="alert" {}
            }
        }
        h2 { "Licenses" }
        table class="list" {
            thead { tr { th scope="col" { "Customer" } th scope="col" { "Product" } th scope="col" { "Status" } th scope="col" { "Activations" } th scope="col" { "Expires" } th scope="col" { "Key" } th scope="col" { "Actions" } } }
            tbody {
                @for l in &licenses {
                    tr {
                        td { (l.customer_email) }
                        td { (product_name(&l.product_id)) " (" (l.license_type.as_str()) ")" }
                        td { span class=(format!("badge {}", l.status.as_str())) { (l.status.as_str()) } }
                        td { (l.current_activations) " / " (l.max_activations) }
                        td { (maybe_time(l.expires_at)) }
                        td { input class="key" readonly value=(l.license_key) aria-label=(format!("License key of {}", l.customer_email)); }
                        td class="actions" { (actions(l)) }
                    }
                }
            }
        }
        @if !products.is_empty() {
            section {
                h3 { "Issue a license" }
                form class="api-form" data-method="POST" data-action="/v1/licenses" {
                    label for="license-product" { "Product" }
                    select id="license-product" name="product_id" {
                        @for p in &products { option value=(p.id) { (p.name) " (" (p.sku) ")" } }
                    }
                    p class="field-error" data-error-for="product_id" {}
                    label for="license-type" { "License type" }
                    select id="license-type" name="license_type" {
                        option value="" { "the product's" }
                        option value="perpetual" { "perpetual" }
                        option value="subscription" { "subscription" }
                    }
                    (field("license-days", "validity_days", "Validity in days (subscriptions)", html! { input id="license-days" name="validity_days" type="number" data-type="number" min="1"; }))
                    (field("license-max", "max_activations", "Devices", html! { input id="license-max" name="max_activations" type="number" data-type="number" min="1" value="1"; }))
                    (field("license-email", "customer_email", "Customer email", html! { input id="license-email" name="customer_email" type="email" required; }))
                    button type="submit" class="primary" { "Issue license" }
                    p class="form-error" role="alert" {}
                }
            }
        }
    };
    Ok(shell(&browser, body, &[]))
}
