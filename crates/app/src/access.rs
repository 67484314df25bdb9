//! Admission and audit of a call, whatever door it came through: the REST API and the console
//! today, the MQTT device channel, the edge uplink and BI SQL next. A door supplies facts (the
//! credential presented, the client address, the operation and its [`Policy`]); this module
//! decides who the caller is, counts the per-key, per-organization, per-endpoint and
//! per-address limits, checks the scope, and builds the audit record of the call
//! ([`AuditTrail`]). The door maps its protocol to these facts and the decision back to its
//! protocol; nothing here knows HTTP.

use plantd_model::audit::{ActorType, AuditEvent, Outcome, Severity};
use plantd_model::scope::allows;
use plantd_model::{Scope, Timestamp};
use plantd_store::NewAuditRecord;
use std::sync::{Arc, Mutex, PoisonError};

use crate::app::App;
use crate::caller::{Caller, Credential};
use crate::error::{AppError, AppResult};
use crate::rate_limit::{Bucket, Decision, Window, WindowState, request_windows};

/// Who may make a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// No credentials needed (health, API documents, the device calls that present a key).
    Public,
    /// Any valid credential, whatever its scopes (the caller's own organization, user, status).
    AnyKey,
    /// A credential holding this scope (or `admin`).
    Scope(Scope),
    /// A credential holding this scope, or none at all: the call then carries its own proof,
    /// which the use case checks (a device registering with an enrollment token).
    ScopeOrProof(Scope),
    /// A credential holding this scope, or a device's own password as its bearer token (an
    /// OTA package download, an edge device reading its assets). Device credentials are
    /// refused on every other operation.
    ScopeOrDevice(Scope),
}

/// An endpoint limit (SPEC 8.5), counted per credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointLimit {
    pub limit: u64,
    pub window_secs: i64,
}

/// Who may make a call, how it is audited and which endpoint limit applies to it. Declared once
/// per operation, by the door that offers it.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    pub access: Access,
    /// The audit event of a call (its category and resource type follow from it).
    pub event: AuditEvent,
    pub endpoint_limit: Option<EndpointLimit>,
}

impl Policy {
    const fn new(access: Access, event: AuditEvent) -> Self {
        Self {
            access,
            event,
            endpoint_limit: None,
        }
    }

    /// No credentials needed.
    pub const fn public(event: AuditEvent) -> Self {
        Self::new(Access::Public, event)
    }

    /// Any valid credential.
    pub const fn any_key(event: AuditEvent) -> Self {
        Self::new(Access::AnyKey, event)
    }

    /// A credential with `scope`, or none and a proof in the call that the use case checks.
    pub const fn scope_or_proof(scope: Scope, event: AuditEvent) -> Self {
        Self::new(Access::ScopeOrProof(scope), event)
    }

    pub const fn scope_or_device(scope: Scope, event: AuditEvent) -> Self {
        Self::new(Access::ScopeOrDevice(scope), event)
    }

    /// A credential holding `scope` (or `admin`).
    pub const fn scope(scope: Scope, event: AuditEvent) -> Self {
        Self::new(Access::Scope(scope), event)
    }

    /// At most `limit` calls per credential per `window_secs` (SPEC 8.5).
    pub const fn limit(mut self, limit: u64, window_secs: i64) -> Self {
        self.endpoint_limit = Some(EndpointLimit { limit, window_secs });
        self
    }
}

/// A credential as the door received it, before it is checked.
#[derive(Clone, Debug)]
pub enum Presented {
    None,
    /// A bearer token: an API key, a session token or an OAuth access token (JWT).
    Bearer(String),
    /// The console's session cookie.
    SessionCookie(String),
    /// Credentials that could not be read (a malformed header), refused with this message.
    Unreadable(String),
}

/// What any door knows of a call, for limits and the audit record.
#[derive(Clone, Debug)]
pub struct CallFacts {
    /// The door's verb: an HTTP method (`POST`), an MQTT packet type.
    pub method: String,
    /// What is called: a route template (`/v1/data-sources/{id}`), a topic filter.
    pub operation: String,
    pub client_ip: Option<String>,
    pub user_agent: Option<String>,
    /// Echoed to the client and kept in the record.
    pub request_id: String,
}

impl CallFacts {
    /// The name endpoint limits and usage counts are kept under: `POST /v1/telemetry`.
    pub fn endpoint(&self) -> String {
        format!("{} {}", self.method, self.operation)
    }
}

/// The decision on a call: its caller (when the credential was valid), the rate-limit window
/// the door reports, and the refusal if the call may not proceed.
#[derive(Debug)]
pub struct Admission {
    pub caller: Option<Caller>,
    pub window: WindowState,
    pub refusal: Option<AppError>,
}

impl App {
    /// Admits a call: authentication, the key's, organization's and endpoint's limits, then the
    /// scope. A call without valid credentials counts against its address's limit instead.
    pub async fn admit(
        &self,
        policy: &Policy,
        facts: &CallFacts,
        presented: Presented,
        now: Timestamp,
    ) -> Admission {
        let anonymous = |refusal: Option<AppError>| {
            let (window, limited) = self.admit_anonymous(facts.client_ip.as_deref(), now);
            Admission {
                caller: None,
                window,
                refusal: limited.or(refusal),
            }
        };
        if policy.access == Access::Public
            || (matches!(policy.access, Access::ScopeOrProof(_))
                && matches!(presented, Presented::None))
        {
            return anonymous(None);
        }
        let caller = match self.caller_of(presented, now).await {
            Ok(c) => c,
            Err(e) => return anonymous(Some(e)),
        };
        let mut buckets = vec![
            Bucket {
                name: format!("key:{}", caller.counter_id()),
                label: caller.credential.limit_label(caller.user_id.is_some()),
                windows: request_windows(self.config().limits.key_requests(caller.tier)),
            },
            Bucket {
                name: format!("org:{}", caller.org_id),
                label: "organization",
                windows: request_windows(self.config().limits.org_requests(caller.tier)),
            },
        ];
        if let Some(l) = policy.endpoint_limit {
            buckets.push(Bucket {
                name: format!("endpoint:{}:{}", caller.counter_id(), facts.endpoint()),
                label: "endpoint",
                windows: vec![Window {
                    limit: self.config().limits.endpoint(caller.tier, l.limit),
                    window_secs: l.window_secs,
                }],
            });
        }
        let (window, mut refusal) = match self.limiter().check(&buckets, now.unix_seconds()) {
            Decision::Allowed(ws) => (ws, None),
            Decision::Refused {
                state,
                retry_after,
                scope,
            } => (state, Some(rate_limited(&scope, retry_after))),
        };
        let device = matches!(caller.credential, Credential::Device { .. });
        if refusal.is_none() && device && !matches!(policy.access, Access::ScopeOrDevice(_)) {
            refusal = Some(AppError::Unauthenticated(
                "a device's credentials are accepted only to download OTA packages and their public key, and to read its own assets".into(),
            ));
        }
        if refusal.is_none()
            && !device
            && let Access::Scope(required)
            | Access::ScopeOrProof(required)
            | Access::ScopeOrDevice(required) = policy.access
            && !allows(&caller.scopes, required)
        {
            refusal = Some(AppError::MissingScope {
                required,
                token: matches!(caller.credential, Credential::AccessToken { .. }),
                message: caller.credential.lacks_scope(required),
            });
        }
        Admission {
            caller: Some(caller),
            window,
            refusal,
        }
    }

    /// Counts a call without valid credentials against its client address's limit.
    pub fn admit_anonymous(
        &self,
        client_ip: Option<&str>,
        now: Timestamp,
    ) -> (WindowState, Option<AppError>) {
        let bucket = Bucket {
            name: format!("ip:{}", client_ip.unwrap_or("unknown")),
            label: "unauthenticated client",
            windows: vec![Window {
                limit: self.config().anonymous_per_minute,
                window_secs: 60,
            }],
        };
        match self.limiter().check(&[bucket], now.unix_seconds()) {
            Decision::Allowed(s) => (s, None),
            Decision::Refused {
                state,
                retry_after,
                scope,
            } => (state, Some(rate_limited(&scope, retry_after))),
        }
    }

    /// The caller a presented credential stands for: an OAuth access token (a JWT), a session
    /// token (`pds_`), the session cookie, or an API key.
    pub async fn caller_of(&self, presented: Presented, now: Timestamp) -> AppResult<Caller> {
        match presented {
            Presented::None => Err(AppError::Unauthenticated(
                "missing Authorization header; send 'Authorization: Bearer <API_KEY>'".into(),
            )),
            Presented::Unreadable(message) => Err(AppError::Unauthenticated(message)),
            Presented::SessionCookie(token) => self.session_caller(&token, true, now).await,
            Presented::Bearer(token) if plantd_auth::jwt::looks_like_jwt(&token) => {
                self.access_token_caller(&token).await
            }
            Presented::Bearer(token) if token.starts_with(plantd_auth::SESSION_PREFIX) => {
                self.session_caller(&token, false, now).await
            }
            Presented::Bearer(token) if token.starts_with(plantd_auth::DEVICE_PASSWORD_PREFIX) => {
                self.device_bearer_caller(&token).await
            }
            Presented::Bearer(token) => self.authenticate(&token, now).await,
        }
    }

    /// Writes the audit record a call owes, unless its use case committed it with its own
    /// write. A failure is logged: the call's answer stands.
    pub async fn finish_audit(&self, trail: &AuditTrail, outcome: CallOutcome) {
        let Some(record) = trail.pending(outcome) else {
            return;
        };
        metrics::counter!("plantd_audit_records_total", "outcome" => record.outcome.as_str())
            .increment(1);
        if let Err(e) = self.store().insert_audit(&record).await {
            tracing::error!(error = %plantd_model::error_chain(&e), request_id = %record.request_id, "could not write the audit record");
        }
    }
}

/// Whether a presented secret equals a configured one, in time independent of where they differ.
pub fn same_secret(expected: &[u8], given: &[u8]) -> bool {
    plantd_auth::equal_in_constant_time(expected, given)
}

fn rate_limited(scope: &str, retry_after: u64) -> AppError {
    AppError::LimitReached {
        message: format!("rate limit exceeded: {scope}; retry in {retry_after} s"),
        retry_after,
    }
}

/// Who a recorded call acted as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    pub org_id: Option<String>,
    pub actor_type: ActorType,
    pub actor_id: Option<String>,
    pub user_id: Option<String>,
}

impl From<&Caller> for Actor {
    fn from(c: &Caller) -> Self {
        Actor {
            org_id: Some(c.org_id.clone()),
            actor_type: c.actor_type(),
            actor_id: Some(c.credential_id().to_string()),
            user_id: c.user_id.clone(),
        }
    }
}

/// How a call ended, as its door answered it: the status (an HTTP status, or the door's
/// equivalent) and the error code of a refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallOutcome {
    pub status: u16,
    pub error_code: Option<String>,
}

impl CallOutcome {
    pub const SUCCESS: u16 = 200;

    /// Answered without a refusal (a redirect of a form counts: it is how a form succeeds).
    fn succeeded(&self) -> bool {
        self.status < 400
    }
}

/// The audit record a call owes (every call that changes something, whatever its door), filled
/// in as the call proceeds: the door opens it with its facts and event; admission, or the use
/// case once it knows (a login's new session, a license key's organization), names the actor
/// and the resource; the door writes it with the outcome ([`App::finish_audit`]), unless the use
/// case committed it together with its own data ([`AuditTrail::success_record`] and
/// [`AuditTrail::committed`], as ingest does). Cheap to clone: one `Arc`.
#[derive(Clone, Debug)]
pub struct AuditTrail(Arc<Trail>);

#[derive(Debug)]
struct Trail {
    facts: CallFacts,
    state: Mutex<TrailState>,
}

#[derive(Debug)]
struct TrailState {
    event: AuditEvent,
    actor: Option<Actor>,
    resource_id: Option<String>,
    written: bool,
}

impl AuditTrail {
    pub fn new(facts: CallFacts, event: AuditEvent) -> Self {
        AuditTrail(Arc::new(Trail {
            facts,
            state: Mutex::new(TrailState {
                event,
                actor: None,
                resource_id: None,
                written: false,
            }),
        }))
    }

    pub fn facts(&self) -> &CallFacts {
        &self.0.facts
    }

    fn state(&self) -> std::sync::MutexGuard<'_, TrailState> {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Names what the call turned out to be, where one operation does several things (a form
    /// that logs in or approves, a reset form that asks for a link or sets a password).
    pub fn event(&self, event: AuditEvent) {
        self.state().event = event;
    }

    /// Names who the call acts as.
    pub fn act_as(&self, actor: Actor) {
        self.state().actor = Some(actor);
    }

    /// Names the resource the call created or changed (replacing what the door guessed).
    pub fn resource(&self, id: impl Into<String>) {
        self.state().resource_id = Some(id.into());
    }

    /// The record of the call as a success, to be committed with the use case's own write; after
    /// the commit, [`AuditTrail::committed`] tells the door that nothing is left to write.
    pub fn success_record(&self) -> NewAuditRecord {
        self.record(
            &self.state(),
            &CallOutcome {
                status: CallOutcome::SUCCESS,
                error_code: None,
            },
        )
    }

    /// The record of another act the call did as a consequence (a member's removal revoking
    /// their keys), by the same actor, on `resource`, as a success.
    pub fn derived(&self, event: AuditEvent, resource: &str) -> NewAuditRecord {
        let state = self.state();
        let mut record = self.record(
            &state,
            &CallOutcome {
                status: CallOutcome::SUCCESS,
                error_code: None,
            },
        );
        record.event = event;
        record.severity = event.severity();
        record.resource_id = Some(resource.to_string());
        record
    }

    /// The record was committed with the use case's data.
    pub fn committed(&self) {
        self.state().written = true;
    }

    /// The record still owed, with the call's outcome (once: the trail is then written).
    pub fn pending(&self, outcome: CallOutcome) -> Option<NewAuditRecord> {
        let mut state = self.state();
        if state.written {
            return None;
        }
        state.written = true;
        Some(self.record(&state, &outcome))
    }

    fn record(&self, state: &TrailState, outcome: &CallOutcome) -> NewAuditRecord {
        let facts = &self.0.facts;
        let event = state.event;
        let actor = state.actor.clone().unwrap_or(Actor {
            org_id: None,
            actor_type: ActorType::Anonymous,
            actor_id: None,
            user_id: None,
        });
        NewAuditRecord {
            org_id: actor.org_id,
            actor_type: actor.actor_type,
            actor_id: actor.actor_id,
            user_id: actor.user_id,
            event,
            severity: if outcome.status >= 400 {
                Severity::of_refusal(outcome.status)
            } else {
                event.severity()
            },
            outcome: if outcome.succeeded() {
                Outcome::Success
            } else {
                Outcome::Failure
            },
            resource_id: state.resource_id.clone(),
            method: facts.method.clone(),
            path: facts.operation.clone(),
            status_code: outcome.status,
            error_code: outcome.error_code.clone(),
            client_ip: facts.client_ip.clone(),
            user_agent: facts.user_agent.clone(),
            request_id: facts.request_id.clone(),
        }
    }
}
