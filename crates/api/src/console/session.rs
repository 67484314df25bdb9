//! Signing in and out of the console: the login form (back to the page asked for) and logout.

use axum::Extension;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use plantd_app::access::{Actor, AuditTrail};
use plantd_app::sessions::Login;
use serde::Deserialize;

use super::browser::Browser;
use super::layout::bare;
use crate::csrf;
use crate::oauth_server::PageForm;
use crate::state::AppState;

#[derive(Deserialize, Default)]
pub(crate) struct LoginForm {
    email: Option<String>,
    password: Option<String>,
    next: Option<String>,
}

/// A path on this server to return to after login (never another site). Browsers drop tabs
/// and newlines from a URL before reading it, so they are dropped here first; what is left
/// must be a path: one `/` followed by anything but `/` or `\` (`//host` and `/\host` name
/// another host), without control characters (which a header cannot carry).
fn local(next: Option<&str>) -> String {
    let Some(next) = next else {
        return "/".into();
    };
    let cleaned: String = next
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let mut chars = cleaned.chars();
    let path = chars.next() == Some('/')
        && !matches!(chars.next(), Some('/' | '\\'))
        && !cleaned.chars().any(char::is_control);
    if !path {
        return "/".into();
    }
    // A `Location` header carries visible ASCII: spaces and other characters are
    // percent-encoded, as a browser would.
    let mut out = String::with_capacity(cleaned.len());
    for b in cleaned.bytes() {
        if b.is_ascii_graphic() {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn login_form(status: StatusCode, next: &str, email: &str, error: Option<&str>) -> Response {
    let body = html! {
        section class="login" {
            h1 { "Log in to plantd" }
            @if let Some(e) = error {
                p class="error form-error" role="alert" { (e) }
            }
            form method="post" action="/login" {
                input type="hidden" name="next" value=(next);
                label for="email" { "Email" }
                input id="email" name="email" type="email" autocomplete="username" required value=(email) autofocus;
                label for="password" { "Password" }
                input id="password" name="password" type="password" autocomplete="current-password" required;
                button type="submit" class="primary" { "Log in" }
            }
            p class="hint" { a href="/password-reset" { "Forgot your password?" } }
        }
    };
    let mut r = bare("Log in", body);
    *r.status_mut() = status;
    r
}

pub(crate) async fn login_page(State(state): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    // An edge agent whose owner has no password yet: its setup wizard instead.
    if let Ok(Some(setup)) = state.app.edge_setup_state().await
        && setup.pending
    {
        return Redirect::to("/setup").into_response();
    }
    let q: LoginForm =
        serde_urlencoded::from_str(raw.as_deref().unwrap_or_default()).unwrap_or_default();
    login_form(StatusCode::OK, &local(q.next.as_deref()), "", None)
}

pub(crate) async fn login(
    State(state): State<AppState>,
    Extension(trail): Extension<AuditTrail>,
    PageForm { form }: PageForm<LoginForm>,
) -> Response {
    let next = local(form.next.as_deref());
    let email = form.email.unwrap_or_default();
    let login = Login {
        email: email.clone(),
        password: form.password.unwrap_or_default(),
        organization_id: None,
    };
    match state.app.login(login, &trail).await {
        Ok(new) => {
            let mut r = Redirect::to(&next).into_response();
            r.headers_mut().insert(
                header::SET_COOKIE,
                csrf::set_cookie(&new.token, state.app.issuer()),
            );
            r
        }
        Err(e) => match crate::pages::login_refusal_status(&e) {
            Some(status) => login_form(status, &next, &email, Some(&e.to_string())),
            None => crate::error::ApiError::from(e).into_response(),
        },
    }
}

/// Ends the session and forgets the cookie (a form from this origin only).
pub(crate) async fn logout(
    State(state): State<AppState>,
    Extension(trail): Extension<AuditTrail>,
    browser: Browser,
    PageForm { .. }: PageForm<std::collections::HashMap<String, String>>,
) -> Response {
    trail.act_as(Actor::from(&browser.caller));
    if let Some(id) = browser.caller.session_id() {
        trail.resource(id);
    }
    if let Err(e) = state.app.logout(&browser.caller).await {
        tracing::warn!(error = %e, "logout did not end the session");
    }
    let mut r = Redirect::to("/login").into_response();
    r.headers_mut()
        .insert(header::SET_COOKIE, csrf::clear_cookie(state.app.issuer()));
    r
}

#[cfg(test)]
mod tests {
    use super::local;

    #[test]
    fn next_is_a_path_on_this_server() {
        for (given, kept) in [
            (Some("/dashboards/1?range=24h"), "/dashboards/1?range=24h"),
            (Some("/"), "/"),
            (Some("/\t/evil.example"), "/"),
            (Some("/\n/evil.example"), "/"),
            (Some("\t//evil.example"), "/"),
            (Some("//evil.example"), "/"),
            (Some("/\\evil.example"), "/"),
            (Some("https://evil.example/"), "/"),
            (Some("/al\nerts"), "/alerts"),
            (Some("/a\u{7f}b"), "/"),
            (
                Some("/dashboards/Pumpe Süd"),
                "/dashboards/Pumpe%20S%C3%BCd",
            ),
            (Some(""), "/"),
            (None, "/"),
        ] {
            assert_eq!(local(given), kept, "{given:?}");
        }
    }
}
