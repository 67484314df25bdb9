//! The one place where every route declares who may call it (its scope), how it is audited and
//! which endpoint limit of SPEC 8.5 applies. The pipeline refuses a route missing here, and a
//! test checks that this table and the OpenAPI document list the same routes.

use axum::http::Method;
use plantd_model::Scope;
use std::collections::HashMap;
use std::sync::LazyLock;

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

#[derive(Clone, Copy, Debug)]
pub struct RoutePolicy {
    pub method: &'static str,
    /// The route template as axum matches it, with the `/v1` prefix.
    pub path: &'static str,
    pub access: Access,
    /// Audit category and event type of a call to this route.
    pub category: &'static str,
    pub event_type: &'static str,
    pub resource_type: &'static str,
    pub endpoint_limit: Option<EndpointLimit>,
    /// Whether the key may come as `?access_token=` (only where clients cannot send headers).
    pub query_token: bool,
}

const fn route(
    method: &'static str,
    path: &'static str,
    access: Access,
    category: &'static str,
    event_type: &'static str,
    resource_type: &'static str,
) -> RoutePolicy {
    RoutePolicy {
        method,
        path,
        access,
        category,
        event_type,
        resource_type,
        endpoint_limit: None,
        query_token: false,
    }
}

const fn query_token(mut p: RoutePolicy) -> RoutePolicy {
    p.query_token = true;
    p
}

const fn limited(mut p: RoutePolicy, limit: u64, window_secs: i64) -> RoutePolicy {
    p.endpoint_limit = Some(EndpointLimit { limit, window_secs });
    p
}

use Access::{AnyKey, Public};
const READ_ASSETS: Access = Access::Scope(Scope::ReadAssets);
const WRITE_ASSETS: Access = Access::Scope(Scope::WriteAssets);
const READ_TELEMETRY: Access = Access::Scope(Scope::ReadTelemetry);
const WRITE_TELEMETRY: Access = Access::Scope(Scope::WriteTelemetry);
const READ_ALERTS: Access = Access::Scope(Scope::ReadAlerts);
const WRITE_ALERTS: Access = Access::Scope(Scope::WriteAlerts);
const ADMIN: Access = Access::Scope(Scope::Admin);
const DAY: i64 = 86_400;

pub static ROUTES: &[RoutePolicy] = &[
    route(
        "GET",
        "/v1/health",
        Public,
        "system",
        "health.read",
        "health",
    ),
    route(
        "GET",
        "/v1/openapi.json",
        Public,
        "system",
        "openapi.read",
        "openapi",
    ),
    route("GET", "/v1/docs", Public, "system", "docs.read", "docs"),
    route(
        "GET",
        "/v1/status",
        AnyKey,
        "system",
        "status.read",
        "status",
    ),
    // Data sources
    route(
        "GET",
        "/v1/data-sources",
        READ_ASSETS,
        "data_sources",
        "data_source.list",
        "data_source",
    ),
    route(
        "POST",
        "/v1/data-sources",
        WRITE_ASSETS,
        "data_sources",
        "data_source.create",
        "data_source",
    ),
    route(
        "GET",
        "/v1/data-sources/{id}",
        READ_ASSETS,
        "data_sources",
        "data_source.read",
        "data_source",
    ),
    route(
        "PUT",
        "/v1/data-sources/{id}",
        WRITE_ASSETS,
        "data_sources",
        "data_source.update",
        "data_source",
    ),
    route(
        "DELETE",
        "/v1/data-sources/{id}",
        WRITE_ASSETS,
        "data_sources",
        "data_source.delete",
        "data_source",
    ),
    route(
        "POST",
        "/v1/data-sources/{id}/test",
        WRITE_ASSETS,
        "data_sources",
        "data_source.test",
        "data_source",
    ),
    // Alerts
    route(
        "GET",
        "/v1/alert-rules",
        READ_ALERTS,
        "alerts",
        "alert_rule.list",
        "alert_rule",
    ),
    route(
        "POST",
        "/v1/alert-rules",
        WRITE_ALERTS,
        "alerts",
        "alert_rule.create",
        "alert_rule",
    ),
    route(
        "GET",
        "/v1/alert-rules/{id}",
        READ_ALERTS,
        "alerts",
        "alert_rule.read",
        "alert_rule",
    ),
    route(
        "PUT",
        "/v1/alert-rules/{id}",
        WRITE_ALERTS,
        "alerts",
        "alert_rule.update",
        "alert_rule",
    ),
    route(
        "DELETE",
        "/v1/alert-rules/{id}",
        WRITE_ALERTS,
        "alerts",
        "alert_rule.delete",
        "alert_rule",
    ),
    route(
        "POST",
        "/v1/alert-rules/{id}/enable",
        WRITE_ALERTS,
        "alerts",
        "alert_rule.enable",
        "alert_rule",
    ),
    route(
        "POST",
        "/v1/alert-rules/{id}/disable",
        WRITE_ALERTS,
        "alerts",
        "alert_rule.disable",
        "alert_rule",
    ),
    route(
        "GET",
        "/v1/alerts",
        READ_ALERTS,
        "alerts",
        "alert.list",
        "alert",
    ),
    route(
        "POST",
        "/v1/alerts/{id}/acknowledge",
        WRITE_ALERTS,
        "alerts",
        "alert.acknowledge",
        "alert",
    ),
    route(
        "POST",
        "/v1/alerts/{id}/resolve",
        WRITE_ALERTS,
        "alerts",
        "alert.resolve",
        "alert",
    ),
    // Webhooks
    route(
        "GET",
        "/v1/webhooks",
        ADMIN,
        "webhooks",
        "webhook.list",
        "webhook",
    ),
    route(
        "POST",
        "/v1/webhooks",
        ADMIN,
        "webhooks",
        "webhook.create",
        "webhook",
    ),
    route(
        "GET",
        "/v1/webhooks/{id}",
        ADMIN,
        "webhooks",
        "webhook.read",
        "webhook",
    ),
    route(
        "PUT",
        "/v1/webhooks/{id}",
        ADMIN,
        "webhooks",
        "webhook.update",
        "webhook",
    ),
    route(
        "DELETE",
        "/v1/webhooks/{id}",
        ADMIN,
        "webhooks",
        "webhook.delete",
        "webhook",
    ),
    route(
        "GET",
        "/v1/webhooks/{id}/deliveries",
        ADMIN,
        "webhooks",
        "webhook.deliveries",
        "webhook",
    ),
    // Telemetry (SPEC 8.5 endpoint limits)
    limited(
        route(
            "POST",
            "/v1/telemetry",
            WRITE_TELEMETRY,
            "telemetry",
            "telemetry.ingest",
            "telemetry",
        ),
        1000,
        60,
    ),
    limited(
        route(
            "GET",
            "/v1/telemetry",
            READ_TELEMETRY,
            "telemetry",
            "telemetry.query",
            "telemetry",
        ),
        100,
        60,
    ),
    route(
        "GET",
        "/v1/telemetry/latest",
        READ_TELEMETRY,
        "telemetry",
        "telemetry.latest",
        "telemetry",
    ),
    query_token(route(
        "GET",
        "/v1/ws",
        READ_TELEMETRY,
        "stream",
        "stream.open",
        "stream",
    )),
    // API keys
    route(
        "GET",
        "/v1/api-keys",
        ADMIN,
        "api_keys",
        "api_key.list",
        "api_key",
    ),
    route(
        "POST",
        "/v1/api-keys",
        ADMIN,
        "api_keys",
        "api_key.create",
        "api_key",
    ),
    route(
        "DELETE",
        "/v1/api-keys/{id}",
        ADMIN,
        "api_keys",
        "api_key.revoke",
        "api_key",
    ),
    route(
        "POST",
        "/v1/api-keys/{id}/rotate",
        ADMIN,
        "api_keys",
        "api_key.rotate",
        "api_key",
    ),
    route(
        "GET",
        "/v1/api-keys/{id}/usage",
        ADMIN,
        "api_keys",
        "api_key.usage",
        "api_key",
    ),
    // Organization and members
    route(
        "GET",
        "/v1/organizations/current",
        AnyKey,
        "organization",
        "organization.read",
        "organization",
    ),
    route(
        "PUT",
        "/v1/organizations/current",
        ADMIN,
        "organization",
        "organization.update",
        "organization",
    ),
    route(
        "GET",
        "/v1/organizations/current/notifications",
        ADMIN,
        "organization",
        "notification_settings.read",
        "notification_settings",
    ),
    route(
        "PUT",
        "/v1/organizations/current/notifications",
        ADMIN,
        "organization",
        "notification_settings.update",
        "notification_settings",
    ),
    route(
        "GET",
        "/v1/notifications",
        READ_ALERTS,
        "alerts",
        "notification.list",
        "notification",
    ),
    route(
        "GET",
        "/v1/organizations/current/members",
        ADMIN,
        "members",
        "member.list",
        "member",
    ),
    limited(
        route(
            "POST",
            "/v1/organizations/current/members/invite",
            ADMIN,
            "members",
            "member.invite",
            "member",
        ),
        50,
        DAY,
    ),
    route(
        "DELETE",
        "/v1/organizations/current/members/{id}",
        ADMIN,
        "members",
        "member.remove",
        "member",
    ),
    route(
        "GET",
        "/v1/organizations/current/usage",
        ADMIN,
        "organization",
        "organization.usage",
        "organization",
    ),
    // The key's own user
    route("GET", "/v1/users/me", AnyKey, "users", "user.read", "user"),
    route(
        "PUT",
        "/v1/users/me",
        AnyKey,
        "users",
        "user.update",
        "user",
    ),
    route(
        "POST",
        "/v1/users/me/password",
        AnyKey,
        "users",
        "user.password_change",
        "user",
    ),
    // Audit
    route(
        "GET",
        "/v1/audit/logs",
        ADMIN,
        "audit",
        "audit.list",
        "audit_log",
    ),
    route(
        "GET",
        "/v1/audit/logs/{id}",
        ADMIN,
        "audit",
        "audit.read",
        "audit_log",
    ),
    route(
        "GET",
        "/v1/audit/summary",
        ADMIN,
        "audit",
        "audit.summary",
        "audit_log",
    ),
    route(
        "POST",
        "/v1/audit/export",
        ADMIN,
        "audit",
        "audit.export",
        "audit_log",
    ),
];

static BY_ROUTE: LazyLock<HashMap<(&'static str, &'static str), &'static RoutePolicy>> =
    LazyLock::new(|| ROUTES.iter().map(|p| ((p.method, p.path), p)).collect());

/// The policy of a matched route, if it is declared.
pub fn lookup(method: &Method, path: &str) -> Option<&'static RoutePolicy> {
    BY_ROUTE.get(&(method.as_str(), path)).copied()
}

/// Whether a method changes state (and is therefore audited).
pub fn is_mutation(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_route_is_declared_twice() {
        assert_eq!(BY_ROUTE.len(), ROUTES.len());
    }

    #[test]
    fn lookups() {
        let p = lookup(&Method::POST, "/v1/data-sources").unwrap();
        assert_eq!(p.access, Access::Scope(Scope::WriteAssets));
        assert!(lookup(&Method::PATCH, "/v1/data-sources").is_none());
    }
}
