//! The person signed in to the console (`Browser`), from the session cookie of the identity
//! API; without a current session a page redirects to the login page, which returns to it.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use plantd_app::{AppError, Caller};
use plantd_model::Timestamp;
use plantd_model::org::Role;

use super::page::{ConsolePage, Here, REGIONS_PAGE};
use crate::csrf;
use crate::state::AppState;

/// The person signed in to the console, with what the page header shows, on the page they
/// asked for.
pub(crate) struct Browser {
    pub(crate) caller: Caller,
    pub(crate) email: String,
    pub(crate) org_name: String,
    pub(crate) role: Role,
    /// The page's declaration (the router puts it on each page's requests).
    pub(crate) page: &'static ConsolePage,
    /// Every page, for the navigation.
    pub(crate) pages: &'static [ConsolePage],
}

impl Browser {
    pub(crate) fn org_id(&self) -> &str {
        &self.caller.org_id
    }

    /// Whether the person may change what `scope` guards (the pages hide forms otherwise; the
    /// API refuses regardless).
    pub(crate) fn may(&self, scope: plantd_model::Scope) -> bool {
        self.caller.scopes.iter().any(|s| s.grants(scope))
    }

    /// Whether the person's role may see `page` (the rule of the API behind it).
    pub(crate) fn may_see(&self, page: &ConsolePage) -> bool {
        page.needs.is_none_or(|(scope, _)| self.may(scope))
    }
}

/// Where a page that needs a session sends the browser: the login page, then back.
fn to_login(parts: &Parts) -> Response {
    let back = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let query = serde_urlencoded::to_string([("next", back)]).unwrap_or_default();
    Redirect::to(&format!("/login?{query}")).into_response()
}

/// Why a page is not shown: no session (the login page, then back), a role that may not see it
/// (a 403 page with the page's reason, rendered by the layout), or a failure.
pub(crate) enum NotShown {
    Login(Response),
    /// The organization's data is served by its primary region: the same page there.
    Elsewhere(Response),
    Forbidden(Browser, &'static str),
    Failed(Response),
}

/// The signed-in person, or why the page is not shown.
impl FromRequestParts<AppState> for Browser {
    type Rejection = NotShown;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, NotShown> {
        let Some(Here { page, pages }) = parts.extensions.get::<Here>().copied() else {
            return Err(NotShown::Failed(
                crate::error::ApiError::internal("a console page without its declaration")
                    .into_response(),
            ));
        };
        let Some(token) = csrf::session_cookie(&parts.headers) else {
            return Err(NotShown::Login(to_login(parts)));
        };
        let app = &state.app;
        let caller = match app.session_caller(&token, true, Timestamp::now()).await {
            Ok(c) => c,
            Err(AppError::Unauthenticated(_)) => return Err(NotShown::Login(to_login(parts))),
            Err(e) => {
                return Err(NotShown::Failed(
                    crate::error::ApiError::from(e).into_response(),
                ));
            }
        };
        // Resident data lives in the organization's primary region: its pages are shown there
        // (the Regions page, which says where, is shown everywhere).
        if page.path != REGIONS_PAGE {
            match app.resident_elsewhere(&caller.org_id).await {
                Ok(Some(root)) => {
                    let here = parts.uri.path_and_query().map_or("/", |p| p.as_str());
                    return Err(NotShown::Elsewhere(
                        Redirect::to(&format!("{root}{here}")).into_response(),
                    ));
                }
                Ok(None) => {}
                Err(e) => {
                    return Err(NotShown::Failed(
                        crate::error::ApiError::from(e).into_response(),
                    ));
                }
            }
        }
        let found = async {
            let (user, role) = app.me(&caller).await?;
            let org = app.organization(&caller.org_id).await?;
            Ok::<_, AppError>((user, role, org))
        }
        .await;
        match found {
            Ok((user, role, org)) => {
                let browser = Browser {
                    caller,
                    email: user.email,
                    org_name: org.name,
                    role,
                    page,
                    pages,
                };
                match page.needs {
                    Some((_, why)) if !browser.may_see(page) => {
                        Err(NotShown::Forbidden(browser, why))
                    }
                    _ => Ok(browser),
                }
            }
            Err(AppError::NotFound(_)) | Err(AppError::Unauthenticated(_)) => {
                Err(NotShown::Login(to_login(parts)))
            }
            Err(e) => Err(NotShown::Failed(
                crate::error::ApiError::from(e).into_response(),
            )),
        }
    }
}
