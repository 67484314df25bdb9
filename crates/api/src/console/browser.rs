//! The person signed in to the console (`Browser`), from the session cookie of the identity
//! API; without a current session a page redirects to the login page, which returns to it.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use plantd_app::{AppError, Caller};
use plantd_model::Timestamp;
use plantd_model::org::Role;

use crate::csrf;
use crate::state::AppState;

/// The person signed in to the console, with what the page header shows.
pub(crate) struct Browser {
    pub(crate) caller: Caller,
    pub(crate) email: String,
    pub(crate) org_name: String,
    pub(crate) role: Role,
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

impl FromRequestParts<AppState> for Browser {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let Some(token) = csrf::session_cookie(&parts.headers) else {
            return Err(to_login(parts));
        };
        let app = &state.app;
        let caller = match app.session_caller(&token, true, Timestamp::now()).await {
            Ok(c) => c,
            Err(AppError::Unauthenticated(_)) => return Err(to_login(parts)),
            Err(e) => return Err(crate::error::ApiError::from(e).into_response()),
        };
        let found = async {
            let (user, role) = app.me(&caller).await?;
            let org = app.organization(&caller.org_id).await?;
            Ok::<_, AppError>((user, role, org))
        }
        .await;
        match found {
            Ok((user, role, org)) => Ok(Browser {
                caller,
                email: user.email,
                org_name: org.name,
                role,
            }),
            Err(AppError::NotFound(_)) | Err(AppError::Unauthenticated(_)) => Err(to_login(parts)),
            Err(e) => Err(crate::error::ApiError::from(e).into_response()),
        }
    }
}
