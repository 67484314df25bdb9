//! The response extension a handler uses to tell the pipeline which resource it created or
//! changed ([`AuditResource`]); the audit record itself is the application's
//! ([`plantd_app::access::AuditTrail`]).

/// The id of a resource a handler created or changed, for the audit record.
#[derive(Clone, Debug)]
pub struct AuditResource(pub String);
