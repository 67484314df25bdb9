//! How a route is declared, once, in its domain's module: the handler (whose `#[utoipa::path]`
//! gives method, path and OpenAPI operation) and its [`Policy`] (the application's: who may
//! call it, how it is audited, its endpoint limit), plus what only HTTP has (a larger body, the
//! key in the query string). The router, the request pipeline and the OpenAPI document are all
//! built from these declarations, so a route cannot exist without its policy.
//!
//! ```ignore
//! route!(list_rules, Policy::scope(Scope::ReadAlerts, AuditEvent::AlertRuleList))
//! ```

use axum::http::Method;
use axum::routing::MethodRouter;
use utoipa::openapi::RefOr;
use utoipa::openapi::path::PathItem;
use utoipa::openapi::schema::Schema;

pub use plantd_app::access::{Access, Policy};

use crate::state::AppState;

/// One declared route: method and path (with the `/v1` prefix), its policy, its handler and
/// its OpenAPI operation.
pub struct Route {
    pub method: Method,
    pub path: String,
    pub policy: Policy,
    /// Whether the key may come as `?access_token=` (only where clients cannot send headers:
    /// browser WebSockets).
    pub query_token: bool,
    /// A larger body than the default limit (bytes).
    pub body_limit: Option<usize>,
    /// Served by every region for any organization (replicated data: the organization's
    /// settings and members, users, API keys, sign-in; regions). Other routes serve an
    /// organization's resident data, answered only by its primary region (a 307 elsewhere).
    pub anywhere: bool,
    pub(crate) handler: MethodRouter<AppState>,
    pub(crate) item: PathItem,
    pub(crate) schemas: Vec<(String, RefOr<Schema>)>,
}

/// The prefix of every route of the REST API.
pub const PREFIX: &str = "/v1";

impl Route {
    /// A route from the output of `utoipa_axum::routes!` for one handler (see [`route!`]).
    pub fn new(
        (schemas, paths, handler): utoipa_axum::router::UtoipaMethodRouter<AppState>,
        policy: Policy,
    ) -> Self {
        let mut paths = paths.paths.into_iter();
        let (path, item) = paths.next().expect("a handler declares its path");
        assert!(paths.next().is_none(), "one handler, one path: {path}");
        let methods = [
            (Method::GET, item.get.is_some()),
            (Method::POST, item.post.is_some()),
            (Method::PUT, item.put.is_some()),
            (Method::DELETE, item.delete.is_some()),
            (Method::PATCH, item.patch.is_some()),
        ];
        let mut declared = methods.into_iter().filter(|(_, on)| *on);
        let (method, _) = declared.next().expect("a handler declares its method");
        assert!(declared.next().is_none(), "one handler, one method: {path}");
        Self {
            method,
            path: format!("{PREFIX}{path}"),
            policy,
            query_token: false,
            body_limit: None,
            anywhere: false,
            handler,
            item,
            schemas,
        }
    }
}

impl Route {
    /// The key may come as `?access_token=`.
    pub fn query_token(mut self) -> Self {
        self.query_token = true;
        self
    }

    /// Served by every region (see [`Route::anywhere`]).
    pub fn anywhere(mut self) -> Self {
        self.anywhere = true;
        self
    }

    /// At the path its handler declares, without the `/v1` prefix (SPEC 4.14's `/api/v1`).
    pub fn at_root(mut self) -> Self {
        self.path = self.path[PREFIX.len()..].to_string();
        self.anywhere = true;
        self
    }

    /// Bodies of up to `bytes`.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = Some(bytes);
        self
    }
}

/// Declares a route: `route!(handler, policy)`.
macro_rules! route {
    ($handler:ident, $policy:expr) => {
        $crate::routing::Route::new(utoipa_axum::routes!($handler), $policy)
    };
}
pub(crate) use route;
