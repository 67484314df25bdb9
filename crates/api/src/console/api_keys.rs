//! API keys (owners and admins): the organization's keys, revoke, and a form whose created
//! secret is shown once.

use axum::extract::State;
use axum::response::Response;
use maud::html;
use plantd_model::Scope;

use super::browser::Browser;
use super::kit::{ALL, OrPage, action_button, field, maybe_time, time};
use super::layout::shell;
use crate::state::AppState;

pub(crate) async fn page(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let keys = state
        .app
        .api_keys(browser.org_id(), ALL)
        .await
        .or_page(&browser)?;
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
                            (action_button("DELETE", &format!("/v1/api-keys/{}", k.id), "Revoke", "danger",
                                Some(format!("Revoke the key “{}”? Programs using it stop working at once.", k.name))))
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
    Ok(shell(&browser, body, &[]))
}
