//! Members (owners and admins, as the API's members list): the organization's people and
//! pending invitations, remove, and the invite form.

use axum::extract::State;
use axum::response::Response;
use maud::html;

use super::browser::Browser;
use super::kit::{ALL, OrPage, action_button, field, time};
use super::layout::shell;
use crate::state::AppState;

pub(crate) async fn page(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let members = state
        .app
        .members(browser.org_id(), ALL)
        .await
        .or_page(&browser)?;
    let me = browser.caller.user_id.clone().unwrap_or_default();
    let body = html! {
        h1 { "Members" }
        table class="list" {
            thead { tr { th scope="col" { "Name" } th scope="col" { "Email" } th scope="col" { "Role" } th scope="col" { "Status" } th scope="col" { "Since" } th scope="col" { "Actions" } } }
            tbody {
                @for m in &members.items {
                    tr {
                        td { (m.name) }
                        td { (m.email) }
                        td { (m.role.as_str()) }
                        td { (m.status.as_str()) }
                        td { (time(m.joined_at)) }
                        td class="actions" {
                            @if m.id != me {
                                (action_button("DELETE", &format!("/v1/organizations/current/members/{}", m.id), "Remove", "danger",
                                    Some(format!("Remove {} from the organization? Their sessions end at once.", m.email))))
                            } @else { "(you, " (browser.role.as_str()) ")" }
                        }
                    }
                }
            }
        }
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
    };
    Ok(shell(&browser, body, &[]))
}
