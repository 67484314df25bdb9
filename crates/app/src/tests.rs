//! The use cases called directly, without HTTP (as the command line and other front ends call
//! them), on SQLite, and on PostgreSQL when `PLANTD_TEST_DATABASE_URL` is set.

use plantd_model::alert::Severity;
use plantd_model::telemetry::{Point, Quality};
use plantd_model::{Scope, Tier, Timestamp};
use plantd_store::Store;
use plantd_store::testing::fresh_database;

use crate::alerts::{NewAlert, NewAlertRule, NewCondition};
use crate::telemetry::Batch;
use crate::{App, AppConfig, AppError, Caller};

async fn app_with_org(tier: Tier) -> (App, Caller, Option<std::path::PathBuf>) {
    let (url, dir) = fresh_database().await;
    let store = Store::connect(&url).await.unwrap();
    let org = crate::operator::create_org(&store, "Plant", tier)
        .await
        .unwrap();
    let (_, secret) =
        crate::operator::create_key(&store, Some(&org.id), "k", &[Scope::Admin], None)
            .await
            .unwrap();
    let app = App::new(store, AppConfig::default());
    let caller = app.authenticate(&secret, Timestamp::now()).await.unwrap();
    (app, caller, dir)
}

fn points(n: usize, tag: &str, value: f64, data_source_id: Option<&str>) -> Batch<'static> {
    let now = Timestamp::now().millis();
    Batch::Points(
        (0..n)
            .map(|i| Point {
                asset_id: "Pump_01".into(),
                tag_name: tag.into(),
                value,
                timestamp: Timestamp::from_millis(now - 60_000 + i as i64),
                quality: Quality::Good,
                data_source_id: data_source_id.map(str::to_string),
            })
            .collect(),
    )
}

/// Intake enforces the tier's ingestion limits and evaluates rules, whoever calls it.
#[tokio::test]
async fn intake_limits_and_rules_apply_without_http() {
    let (app, caller, dir) = app_with_org(Tier::Trial).await;
    let org = caller.org_id.clone();
    let ds = app
        .create_data_source(
            &org,
            serde_json::from_value(serde_json::json!({
                "name": "PLC", "type": "modbus", "enabled": false, "config": {"host": "plc.invalid"}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    // Invalid input names every field at fault.
    let bad = NewAlertRule {
        name: " ".into(),
        severity: Severity::Critical,
        data_source_id: ds.id.clone(),
        asset_id: None,
        condition: NewCondition {
            tag_name: "T".into(),
            operator: plantd_model::alert::Operator::Gt,
            value: f64::NAN,
            duration_seconds: -1,
            max_gap_seconds: None,
        },
        notifications: Some(vec!["pager".into()]),
        enabled: None,
        auto_resolve: None,
    };
    match app.create_alert_rule(&org, bad).await {
        Err(AppError::Invalid(details)) => {
            let fields: Vec<_> = details.iter().map(|d| d.field.as_str()).collect();
            assert_eq!(
                fields,
                [
                    "name",
                    "condition.value",
                    "condition.duration_seconds",
                    "notifications[0]"
                ]
            );
        }
        other => panic!("{:?}", other.map(|r| r.id)),
    }
    let rule = NewAlertRule {
        name: "Hot".into(),
        severity: Severity::Critical,
        data_source_id: ds.id.clone(),
        asset_id: None,
        condition: NewCondition {
            tag_name: "T".into(),
            operator: plantd_model::alert::Operator::Gt,
            value: 80.0,
            duration_seconds: 0,
            max_gap_seconds: None,
        },
        notifications: None,
        enabled: None,
        auto_resolve: None,
    };
    app.create_alert_rule(&org, rule).await.unwrap();
    let mut events = app.events().subscribe();
    let stored = app
        .ingest(&caller, points(1, "T", 90.0, Some(&ds.id)), None)
        .await
        .unwrap();
    assert_eq!(stored.accepted, 1);
    let page = plantd_model::page::Page::default();
    let open = app
        .alerts(&org, &plantd_store::AlertFilter::default(), page)
        .await
        .unwrap();
    assert_eq!(open.total, 1, "the rule fired on the stored point");
    assert!(matches!(
        events.recv().await.unwrap(),
        crate::events::Event::Alert { .. }
    ));
    // A trial organization takes 1,000 points a minute (SPEC 8.3): the rest is refused whole.
    let refused = app
        .ingest(&caller, points(1_000, "U", 1.0, None), None)
        .await;
    assert!(
        matches!(&refused, Err(AppError::LimitReached { message, .. }) if message.contains("1000 per minute")),
        "{:?}",
        refused.map(|s| s.accepted)
    );
    // Alerts from other systems, deduplicated by key while open.
    let new = || NewAlert {
        severity: Severity::Info,
        asset_id: "Tank_3".into(),
        title: Some("Level sensor replaced".into()),
        message: None,
        source: None,
        data_source_id: None,
        tag_name: None,
        value: None,
        tags: None,
        notifications: None,
        dedup_key: Some("tank3-sensor".into()),
        triggered_at: None,
    };
    let (first, created) = app.create_alert(&org, new()).await.unwrap();
    assert!(created);
    assert_eq!(first.source, "api");
    let (again, created) = app.create_alert(&org, new()).await.unwrap();
    assert!(!created);
    assert_eq!(again.id, first.id);
    app.resolve_alert(&caller, &first.id).await.unwrap();
    assert!(app.create_alert(&org, new()).await.unwrap().1);
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// An access token's signature is checked once; later requests with it are answered from what
/// the node remembers, until the token expires (then refused without asking the keys again), and
/// an altered copy of a remembered token is not mistaken for it.
#[tokio::test]
async fn remembered_access_tokens_still_expire_and_altered_ones_fail() {
    let (app, caller, dir) = app_with_org(Tier::Enterprise).await;
    let created = app
        .create_oauth_application(
            &caller,
            crate::oauth_apps::NewOAuthApplication {
                name: "Historian".into(),
                redirect_uris: vec!["https://historian.example/cb".into()],
                application_type: plantd_model::identity::ApplicationType::Web,
                scopes: Some(vec![Scope::ReadAssets]),
            },
        )
        .await
        .unwrap();
    let grant = app
        .token(
            crate::oauth::TokenRequest {
                grant_type: Some("client_credentials".into()),
                client_id: Some(created.application.client_id.clone()),
                client_secret: created.client_secret.clone(),
                ..Default::default()
            },
            None,
            &crate::access::AuditTrail::new(
                crate::access::CallFacts {
                    method: "POST".into(),
                    operation: "/oauth/token".into(),
                    client_ip: None,
                    user_agent: None,
                    request_id: "t".into(),
                },
                plantd_model::audit::AuditEvent::OAuthToken,
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("client credentials refused"));
    let token = grant.access_token;
    let first = app.access_token_caller(&token).await.unwrap();
    assert_eq!(first.org_id, caller.org_id);
    assert_eq!(first.scopes, vec![Scope::ReadAssets]);
    let again = app.access_token_caller(&token).await.unwrap();
    assert_eq!(again.org_id, caller.org_id);

    // One character of the signature changed: another token, whose signature fails.
    let at = token.len() - 10;
    let swapped = if &token[at..=at] == "A" { "z" } else { "A" };
    let altered = format!("{}{swapped}{}", &token[..at], &token[at + 1..]);
    assert!(matches!(
        app.access_token_caller(&altered).await,
        Err(AppError::InvalidToken(_))
    ));

    // The remembered token's expiry passes: refused as expired.
    for known in app.key_ring().known.lock().unwrap().values_mut() {
        let mut claims = (*known.claims).clone();
        claims.exp = Timestamp::now().unix_seconds() - 3600;
        known.claims = std::sync::Arc::new(claims);
    }
    match app.access_token_caller(&token).await {
        Err(AppError::InvalidToken(why)) => assert!(why.contains("expired"), "{why}"),
        other => panic!(
            "an expired token was accepted: {:?}",
            other.map(|c| c.org_id)
        ),
    }
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Any door admits, limits and audits a call the same way, without HTTP: a missing credential,
/// a key within and over its endpoint limit, a missing scope, and the record of a call written
/// once (or committed by ingest with its points).
#[tokio::test]
async fn a_call_is_admitted_limited_and_audited_without_http() {
    use crate::access::{Actor, AuditTrail, CallFacts, CallOutcome, Policy, Presented};
    use plantd_model::audit::AuditEvent;

    let (url, dir) = fresh_database().await;
    let store = Store::connect(&url).await.unwrap();
    let org = crate::operator::create_org(&store, "Plant", Tier::Starter)
        .await
        .unwrap();
    let (_, key) = crate::operator::create_key(
        &store,
        Some(&org.id),
        "gateway",
        &[Scope::WriteTelemetry],
        None,
    )
    .await
    .unwrap();
    let app = App::new(store, AppConfig::default());
    let facts = CallFacts {
        method: "PUBLISH".into(),
        operation: "plantd/gateway/telemetry".into(),
        client_ip: Some("10.0.0.9".into()),
        user_agent: None,
        request_id: "req-1".into(),
    };
    let now = Timestamp::now();
    let policy = Policy::scope(Scope::WriteTelemetry, AuditEvent::TelemetryIngest).limit(2, 60);

    let nobody = app.admit(&policy, &facts, Presented::None, now).await;
    assert!(nobody.caller.is_none());
    assert!(matches!(nobody.refusal, Some(AppError::Unauthenticated(_))));
    let bad = app
        .admit(&policy, &facts, Presented::Bearer("pdk_wrong".into()), now)
        .await;
    assert!(matches!(bad.refusal, Some(AppError::Unauthenticated(_))));

    for remaining in [1, 0] {
        let a = app
            .admit(&policy, &facts, Presented::Bearer(key.clone()), now)
            .await;
        assert!(a.refusal.is_none(), "{:?}", a.refusal);
        assert_eq!(a.window.remaining, remaining, "the endpoint window binds");
    }
    let over = app
        .admit(&policy, &facts, Presented::Bearer(key.clone()), now)
        .await;
    assert!(
        matches!(&over.refusal, Some(AppError::LimitReached { message, .. }) if message.contains("endpoint")),
        "{:?}",
        over.refusal
    );
    let reader = Policy::scope(Scope::ReadTelemetry, AuditEvent::TelemetryQuery);
    let denied = app
        .admit(&reader, &facts, Presented::Bearer(key.clone()), now)
        .await;
    assert!(matches!(
        denied.refusal,
        Some(AppError::MissingScope {
            required: Scope::ReadTelemetry,
            token: false,
            ..
        })
    ));
    let caller = denied.caller.expect("the key was valid");

    // A refused call's record, written once whatever the door calls.
    let trail = AuditTrail::new(facts.clone(), AuditEvent::TelemetryQuery);
    trail.act_as(Actor::from(&caller));
    let outcome = CallOutcome {
        status: 403,
        error_code: Some("authorization_error".into()),
    };
    app.finish_audit(&trail, outcome.clone()).await;
    app.finish_audit(&trail, outcome).await;
    // Ingest commits its call's record with the points; the door then writes nothing more.
    let ingest = AuditTrail::new(facts.clone(), AuditEvent::TelemetryIngest);
    ingest.act_as(Actor::from(&caller));
    let body = format!(
        r#"{{"data": [{{"asset_id": "GW_1", "tag_name": "T", "value": 1.5, "timestamp": "{}"}}]}}"#,
        Timestamp::from_millis(now.millis() - 1_000)
    );
    let stored = app
        .ingest(
            &caller,
            Batch::Body(body.as_bytes(), Default::default()),
            Some(&ingest),
        )
        .await
        .unwrap();
    assert_eq!(stored.accepted, 1);
    app.finish_audit(
        &ingest,
        CallOutcome {
            status: 200,
            error_code: None,
        },
    )
    .await;

    let logs = app
        .audit_logs(
            &org.id,
            &crate::audit::AuditFilter::default(),
            plantd_model::page::Page::default(),
        )
        .await
        .unwrap();
    assert_eq!(logs.total, 2, "{:?}", logs.items);
    let query = logs
        .items
        .iter()
        .find(|r| r.event_type == "telemetry.query")
        .expect("the refused call");
    assert_eq!(
        (
            query.method.as_str(),
            query.path.as_str(),
            query.status_code
        ),
        ("PUBLISH", "plantd/gateway/telemetry", 403)
    );
    assert_eq!(query.outcome, "failure");
    assert_eq!(query.error_code.as_deref(), Some("authorization_error"));
    assert_eq!(query.actor_type, "api_key");
    assert_eq!(query.client_ip.as_deref(), Some("10.0.0.9"));
    let ingested = logs
        .items
        .iter()
        .find(|r| r.event_type == "telemetry.ingest")
        .expect("the ingest call");
    assert_eq!(
        (ingested.outcome.as_str(), ingested.status_code),
        ("success", 200)
    );
    drop(app);
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}
