//! What the request pipeline records of a request in the audit trail, and the response
//! extensions a handler uses to tell it something: the id of the resource it created
//! ([`AuditResource`]) or that it committed the record itself with its data
//! ([`AuditCommitted`]).

use axum::http::StatusCode;
use plantd_app::Caller;
use plantd_model::audit::{ActorType, Outcome, Severity};
use plantd_store::NewAuditRecord;

use crate::routing::Policy;

/// The id of a resource a handler created or changed, for the audit record.
#[derive(Clone, Debug)]
pub struct AuditResource(pub String);

/// Marks a response whose audit record the handler already committed (with its data).
#[derive(Clone, Copy, Debug)]
pub struct AuditCommitted;

/// What the pipeline knows of a request for its audit record (a request extension of
/// mutations, so that a handler can commit the record together with its own write).
#[derive(Clone, Debug)]
pub struct RequestFacts {
    pub policy: Policy,
    pub method: String,
    pub route: String,
    pub client_ip: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: String,
}

/// The audit record of a finished request.
pub fn audit_record(
    facts: &RequestFacts,
    caller: Option<&Caller>,
    status: StatusCode,
    error_code: Option<String>,
    resource_id: Option<String>,
) -> NewAuditRecord {
    let event = facts.policy.event;
    let severity = if status.is_client_error() || status.is_server_error() {
        Severity::of_refusal(status.as_u16())
    } else {
        event.severity()
    };
    NewAuditRecord {
        org_id: caller.map(|c| c.org_id.clone()),
        actor_type: caller.map_or(ActorType::Anonymous, Caller::actor_type),
        actor_id: caller.map(|c| c.credential_id().to_string()),
        user_id: caller.and_then(|c| c.user_id.clone()),
        event,
        severity,
        outcome: if status.is_success() {
            Outcome::Success
        } else {
            Outcome::Failure
        },
        resource_id,
        method: facts.method.clone(),
        path: facts.route.clone(),
        status_code: status.as_u16(),
        error_code,
        client_ip: facts.client_ip.clone(),
        user_agent: facts.user_agent.clone(),
        request_id: facts.request_id.clone(),
    }
}
