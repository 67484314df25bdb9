//! How a route is declared, once, in its domain's module: the handler (whose `#[utoipa::path]`
//! gives method, path and OpenAPI operation) and its [`Policy`] (who may call it, how it is
//! audited, its endpoint limit). The router, the request pipeline and the OpenAPI document are
//! all built from these declarations, so a route cannot exist without its policy.
//!
//! ```ignore
//! route!(list_rules, Policy::scope(Scope::ReadAlerts, AuditEvent::AlertRuleList))
//! ```

use axum::http::Method;
use axum::routing::MethodRouter;
use plantd_model::Scope;
use plantd_model::audit::AuditEvent;
use utoipa::openapi::RefOr;
use utoipa::openapi::path::PathItem;
use utoipa::openapi::schema::Schema;

use crate::state::AppState;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// No credentials needed (health, API documents).
    Public,
    /// Any valid key, whatever its scopes (the caller's own organization, user and status).
    AnyKey,
    /// A key holding this scope (or `admin`).
    Scope(Scope),
}

/// An endpoint limit (SPEC 8.5), counted per API key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointLimit {
    pub limit: u64,
    pub window_secs: i64,
}

/// Who may call a route, how it is audited and which limits apply to it.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    pub access: Access,
    /// The audit event of a call (its category and resource type follow from it).
    pub event: AuditEvent,
    pub endpoint_limit: Option<EndpointLimit>,
    /// Whether the key may come as `?access_token=` (only where clients cannot send headers).
    pub query_token: bool,
    /// A larger body than the default limit (bytes).
    pub body_limit: Option<usize>,
}

impl Policy {
    const fn new(access: Access, event: AuditEvent) -> Self {
        Self {
            access,
            event,
            endpoint_limit: None,
            query_token: false,
            body_limit: None,
        }
    }

    /// No credentials needed.
    pub const fn public(event: AuditEvent) -> Self {
        Self::new(Access::Public, event)
    }

    /// Any valid key.
    pub const fn any_key(event: AuditEvent) -> Self {
        Self::new(Access::AnyKey, event)
    }

    /// A key holding `scope` (or `admin`).
    pub const fn scope(scope: Scope, event: AuditEvent) -> Self {
        Self::new(Access::Scope(scope), event)
    }

    /// At most `limit` calls per key per `window_secs` (SPEC 8.5).
    pub const fn limit(mut self, limit: u64, window_secs: i64) -> Self {
        self.endpoint_limit = Some(EndpointLimit { limit, window_secs });
        self
    }

    /// The key may come as `?access_token=`.
    pub const fn query_token(mut self) -> Self {
        self.query_token = true;
        self
    }

    /// Bodies of up to `bytes`.
    pub const fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = Some(bytes);
        self
    }
}

/// One declared route: method and path (with the `/v1` prefix), its policy, its handler and
/// its OpenAPI operation.
pub struct Route {
    pub method: Method,
    pub path: String,
    pub policy: Policy,
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
            handler,
            item,
            schemas,
        }
    }
}

/// Declares a route: `route!(handler, policy)`.
macro_rules! route {
    ($handler:ident, $policy:expr) => {
        $crate::routing::Route::new(utoipa_axum::routes!($handler), $policy)
    };
}
pub(crate) use route;
