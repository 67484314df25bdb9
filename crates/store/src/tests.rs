//! Tests of the store called directly, on SQLite, and on PostgreSQL when
//! `PLANTD_TEST_DATABASE_URL` is set (CI runs them both ways): a database written by an earlier
//! version opens and upgrades in place, and the repositories' invariants hold.

use plantd_model::alert::{Alert, AlertStatus, Condition, Operator, RULE_SOURCE, Severity};
use plantd_model::audit::{ActorType, AuditEvent, Outcome};
use plantd_model::data_source::DataSourceType;
use plantd_model::event::EventType;
use plantd_model::org::MemberStatus;
use plantd_model::page::Page;
use plantd_model::{Tier, Timestamp, new_id};
use sqlx::Row;

use crate::testing::{fresh_database, version_6_database};
use crate::{AlertFilter, AuditFilter, NewAuditRecord, NotificationFilter, RuleFields, Store};

/// Every version recorded by the migration table, in order.
async fn recorded_versions(store: &Store) -> Vec<i64> {
    sqlx::query("SELECT version FROM plantd_migrations ORDER BY version")
        .fetch_all(store.pool())
        .await
        .unwrap()
        .iter()
        .map(|r| r.try_get::<i64, _>("version").unwrap())
        .collect()
}

#[tokio::test]
async fn a_version_6_database_opens_and_upgrades_in_place() {
    let (url, dir, key) = version_6_database().await;
    let store = Store::connect(&url).await.expect("open and upgrade");
    assert_eq!(
        recorded_versions(&store).await,
        (1..=crate::migrate::LATEST_VERSION).collect::<Vec<_>>()
    );

    // Who: the organization, its owner and invited member, the admin key (by its secret).
    let org = store.first_org().await.unwrap().expect("the organization");
    assert_eq!((org.name.as_str(), org.tier), ("Default", Tier::Enterprise));
    let members = store.members(&org.id, Page::default()).await.unwrap();
    assert_eq!(members.total, 2);
    assert!(
        members
            .items
            .iter()
            .any(|m| m.email == "new.person@example.com" && m.status == MemberStatus::Invited)
    );
    let hash = plantd_auth::hash_key(key);
    let api_key = store
        .api_key_by_hash(&hash)
        .await
        .unwrap()
        .expect("the key");
    assert_eq!(api_key.org_id, org.id);

    // What: data sources with their configs (the password kept), rules and alerts.
    let sources = store.org_data_sources(&org.id).await.unwrap();
    assert_eq!(sources.len(), 2);
    let mqtt = sources
        .iter()
        .find(|d| d.source_type == DataSourceType::Mqtt)
        .unwrap();
    assert_eq!(mqtt.config["password"], "secret-pw");
    assert!(!mqtt.enabled);
    let rules = store.alert_rules(&org.id).await.unwrap();
    assert_eq!(rules.len(), 2);
    let (alerts, total) = store
        .alerts(&org.id, &AlertFilter::default(), 10, 0)
        .await
        .unwrap();
    assert_eq!(total, 2);
    let open: Vec<&Alert> = alerts.iter().filter(|a| a.status.is_open()).collect();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].status, AlertStatus::Acknowledged);
    assert_eq!(open[0].note.as_deref(), Some("crew on site"));
    let resolved = alerts
        .iter()
        .find(|a| a.status == AlertStatus::Resolved)
        .unwrap();
    assert_eq!(resolved.resolved_by.as_deref(), Some("auto"));
    assert_eq!(resolved.value, Some(6.5));
    // Alerts stored before version 7 are rule alerts titled by their rule.
    assert_eq!(resolved.source, "rule");
    assert_eq!(Some(resolved.title.as_str()), resolved.rule_name.as_deref());
    assert!(resolved.tags.is_empty() && resolved.dedup_key.is_none());
    assert_eq!(store.open_alerts().await.unwrap().len(), 1);

    // Announcements: the webhook, its deliveries, notification settings and the log.
    let hooks = store.webhooks(&org.id).await.unwrap();
    assert_eq!(hooks.len(), 1);
    assert_eq!(
        hooks[0].events,
        [EventType::AlertTriggered, EventType::AlertResolved]
    );
    let (deliveries, _) = store
        .deliveries(&org.id, &hooks[0].id, 10, 0)
        .await
        .unwrap();
    assert!(!deliveries.is_empty());
    assert!(deliveries.iter().all(|d| d.attempts >= 1));
    let settings = store.notification_settings(&org.id).await.unwrap();
    assert_eq!(settings.email_recipients, ["maintenance@example.com"]);
    let (logged, _) = store
        .notifications(&org.id, &NotificationFilter::default(), 10, 0)
        .await
        .unwrap();
    assert!(logged.iter().all(|n| n.channel == "email"));
    assert!(!logged.is_empty());

    // The audit trail, and the store keeps writing.
    let audit = store
        .audit_logs(&org.id, &AuditFilter::default(), Page::default())
        .await
        .unwrap();
    assert!(audit.total >= 9, "{}", audit.total);
    store
        .insert_audit(&audit_record(&org.id, AuditEvent::DataSourceCreate))
        .await
        .unwrap();
    let rule = store
        .create_alert_rule(&org.id, rule_fields(&sources[0].id))
        .await
        .unwrap();
    assert_eq!(store.alert_rules(&org.id).await.unwrap().len(), 3);
    store.delete_alert_rule(&org.id, &rule.id).await.unwrap();

    // Opening again applies nothing twice.
    drop(store);
    let again = Store::connect(&url).await.unwrap();
    assert_eq!(
        recorded_versions(&again).await.len() as i64,
        crate::migrate::LATEST_VERSION
    );
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}

fn audit_record(org_id: &str, event: AuditEvent) -> NewAuditRecord {
    NewAuditRecord {
        org_id: Some(org_id.into()),
        actor_type: ActorType::ApiKey,
        actor_id: Some("k".into()),
        user_id: None,
        event,
        severity: event.severity(),
        outcome: Outcome::Success,
        resource_id: None,
        method: "POST".into(),
        path: "/v1/data-sources".into(),
        status_code: 201,
        error_code: None,
        client_ip: None,
        user_agent: None,
        request_id: new_id(),
    }
}

fn rule_fields(data_source_id: &str) -> RuleFields {
    RuleFields {
        name: "Temperature".into(),
        severity: Severity::Warning,
        data_source_id: data_source_id.into(),
        asset_id: None,
        condition: Condition {
            tag_name: "T".into(),
            operator: Operator::Gt,
            value: 80.0,
            duration_seconds: 0,
            max_gap_seconds: 60,
        },
        notifications: vec![],
        enabled: true,
        auto_resolve: true,
    }
}

/// An active alert of `asset` without a rule, as `POST /alerts` makes it.
fn new_alert(org_id: &str, asset: &str) -> Alert {
    Alert {
        id: new_id(),
        org_id: org_id.to_string(),
        rule_id: None,
        rule_name: None,
        severity: Severity::Info,
        status: AlertStatus::Active,
        data_source_id: None,
        asset_id: asset.to_string(),
        tag_name: None,
        value: None,
        threshold: None,
        operator: None,
        title: "t".into(),
        message: None,
        source: "api".into(),
        tags: vec![],
        notifications: vec![],
        dedup_key: None,
        triggered_at: Timestamp::now(),
        acknowledged_at: None,
        acknowledged_by: None,
        note: None,
        resolved_at: None,
        resolved_by: None,
    }
}

/// The database holds at most one open alert per rule and asset, whoever opens it.
#[tokio::test]
async fn one_open_alert_per_rule_and_asset() {
    let (url, dir) = fresh_database().await;
    let store = Store::connect(&url).await.unwrap();
    let org = store.create_org("O", Tier::Trial).await.unwrap();
    let rule = store
        .create_alert_rule(&org.id, rule_fields("ds"))
        .await
        .unwrap();
    let alert = |asset: &str| Alert {
        rule_id: Some(rule.id.clone()),
        rule_name: Some(rule.name.clone()),
        severity: rule.severity,
        data_source_id: Some("ds".into()),
        tag_name: Some("T".into()),
        value: Some(90.0),
        threshold: Some(80.0),
        operator: Some(Operator::Gt),
        title: rule.name.clone(),
        source: RULE_SOURCE.into(),
        ..new_alert(&org.id, asset)
    };
    let first = store
        .open_alert(&alert("A"))
        .await
        .unwrap()
        .expect("opened");
    assert!(store.open_alert(&alert("A")).await.unwrap().is_none());
    assert!(store.open_alert(&alert("B")).await.unwrap().is_some());
    // Each opening left one event in the outbox.
    let events = store.pending_alert_events(10).await.unwrap();
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| e.event == EventType::AlertTriggered));
    // Once resolved, the rule may open an alert for the asset again.
    let resolved = store
        .transition_alert(&org.id, &first.id, AlertStatus::Resolved, "u", None)
        .await
        .unwrap()
        .expect("resolved");
    assert_eq!(resolved.resolved_by.as_deref(), Some("u"));
    assert!(store.open_alert(&alert("A")).await.unwrap().is_some());
    // Another organization cannot see or move the alert.
    let other = store.create_org("P", Tier::Trial).await.unwrap();
    assert!(matches!(
        store.alert(&other.id, &first.id).await,
        Err(crate::StoreError::NotFound)
    ));
    assert!(matches!(
        store
            .transition_alert(&other.id, &first.id, AlertStatus::Resolved, "u", None)
            .await,
        Err(crate::StoreError::NotFound)
    ));
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// The edge's alert history retention deletes resolved alerts (with their outbox events)
/// resolved before the cutoff, and keeps open and recently resolved ones.
#[tokio::test]
async fn alert_history_retention_keeps_open_and_recent_alerts() {
    let (url, dir) = fresh_database().await;
    let store = Store::connect(&url).await.unwrap();
    let org = store.create_org("H", Tier::Trial).await.unwrap();
    let rule = store
        .create_alert_rule(&org.id, rule_fields("ds"))
        .await
        .unwrap();
    let alert = |asset: &str| Alert {
        rule_id: Some(rule.id.clone()),
        rule_name: Some(rule.name.clone()),
        severity: rule.severity,
        title: rule.name.clone(),
        source: RULE_SOURCE.into(),
        ..new_alert(&org.id, asset)
    };
    let old = store.open_alert(&alert("A")).await.unwrap().unwrap();
    store
        .transition_alert(&org.id, &old.id, AlertStatus::Resolved, "u", None)
        .await
        .unwrap();
    let open = store.open_alert(&alert("B")).await.unwrap().unwrap();
    // A cutoff before the resolution deletes nothing; one after it, the resolved alert only.
    let earlier = Timestamp::from_millis(Timestamp::now().millis() - 60_000);
    assert_eq!(store.delete_alert_history(earlier).await.unwrap(), 0);
    let later = Timestamp::from_millis(Timestamp::now().millis() + 60_000);
    assert_eq!(store.delete_alert_history(later).await.unwrap(), 1);
    assert!(matches!(
        store.alert(&org.id, &old.id).await,
        Err(crate::StoreError::NotFound)
    ));
    assert!(store.alert(&org.id, &open.id).await.is_ok());
    let events = store.pending_alert_events(10).await.unwrap();
    assert!(
        events.iter().all(|e| e.alert_id != old.id),
        "its events went with it"
    );
    assert!(events.iter().any(|e| e.alert_id == open.id));
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Alerts with and without a value, in turn, through the same statement: an absent number must
/// not fix the type its parameter is prepared with (PostgreSQL refused the next value).
#[tokio::test]
async fn alerts_with_and_without_numbers_alternate() {
    let (url, dir) = fresh_database().await;
    let store = Store::connect(&url).await.unwrap();
    let org = store.create_org("O", Tier::Trial).await.unwrap();
    for i in 0..6 {
        let value = (i % 2 == 1).then_some(i as f64 + 0.5);
        let alert = Alert {
            value,
            threshold: value.map(|v| v - 0.5),
            ..new_alert(&org.id, &format!("A{i}"))
        };
        let stored = store.open_alert(&alert).await.unwrap().expect("opened");
        assert_eq!(
            (stored.value, stored.threshold),
            (alert.value, alert.threshold)
        );
    }
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Concurrent activations of one license never take more than its slots: the store locks the
/// license row before counting (on PostgreSQL, where writers are not serialized in-process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_activations_never_exceed_the_slots() {
    use crate::{Activated, NewLicense, ProductFields};
    use plantd_model::event::EventType;
    use plantd_model::license::{LicenseStatus, LicenseType};
    let (url, dir) = fresh_database().await;
    let store = Store::connect(&url).await.unwrap();
    let org = store.create_org("O", Tier::Trial).await.unwrap();
    let product = store
        .create_product(
            &org.id,
            &ProductFields {
                name: "Hub".into(),
                sku: "HUB".into(),
                description: String::new(),
                price: 0.0,
                license_type: LicenseType::Perpetual,
                features: vec![],
            },
        )
        .await
        .unwrap();
    let license = store
        .create_license(
            &org.id,
            &NewLicense {
                id: new_id(),
                product_id: product.id,
                license_key: "pdl_test".into(),
                license_type: LicenseType::Perpetual,
                max_activations: 3,
                validity_days: None,
                features: vec![],
                customer_email: "a@b.example".into(),
                expires_at: None,
            },
        )
        .await
        .unwrap();
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let (store, org, id) = (store.clone(), org.id.clone(), license.id.clone());
            tokio::spawn(async move {
                store
                    .activate_license(&org, &id, &format!("gw-{i}"), "fp")
                    .await
                    .unwrap()
                    .0
            })
        })
        .collect();
    let mut new = 0;
    for t in tasks {
        match t.await.unwrap() {
            Activated::New(_) => new += 1,
            Activated::Full => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(new, 3);
    let read = store.license(&org.id, &license.id).await.unwrap();
    assert_eq!(read.current_activations, 3);

    // The status is read under the lock too: once the license is suspended, no device activates.
    store
        .set_license_status(
            &org.id,
            &license.id,
            &[LicenseStatus::Active],
            LicenseStatus::Suspended,
            EventType::LicenseSuspended,
        )
        .await
        .unwrap();
    let (outcome, _) = store
        .activate_license(&org.id, &license.id, "gw-new", "fp")
        .await
        .unwrap();
    assert!(matches!(outcome, Activated::NotInForce), "{outcome:?}");
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A transaction that may be done again commits unsynced (synchronous=NORMAL on the write
/// connection); the next durable one is synced again (FULL), whatever came between.
#[tokio::test]
async fn an_unsynced_write_leaves_the_next_durable_one_synced() {
    let (url, dir) = crate::testing::fresh_sqlite();
    let store = Store::connect(&url).await.unwrap();
    async fn level(tx: &mut crate::WriteTx) -> i64 {
        sqlx::query("PRAGMA synchronous")
            .fetch_one(&mut **tx)
            .await
            .unwrap()
            .try_get::<i64, _>(0)
            .unwrap()
    }
    const NORMAL: i64 = 1;
    const FULL: i64 = 2;
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(level(&mut tx).await, FULL);
    tx.commit().await.unwrap();
    for _ in 0..2 {
        let mut tx = store.begin_write_unsynced().await.unwrap();
        assert_eq!(level(&mut tx).await, NORMAL);
        tx.commit().await.unwrap();
    }
    // Dropped without a commit (rolled back): still not left behind.
    let tx = store.begin_write_unsynced().await.unwrap();
    drop(tx);
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(level(&mut tx).await, FULL);
    tx.commit().await.unwrap();
    store.close().await;
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// On SQLite every write transaction runs on the same connection (its page cache stays valid
/// between groups of ingest), whatever the readers hold meanwhile: a temporary table, which only
/// its connection sees, is still there in the next write transaction.
#[tokio::test]
async fn sqlite_write_transactions_share_one_connection() {
    let (url, dir) = crate::testing::fresh_sqlite();
    let store = Store::connect(&url).await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    sqlx::query("CREATE TEMP TABLE mine (x INTEGER)")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // Readers busy on the pool meanwhile do not move the writer elsewhere.
    let mut readers = Vec::new();
    for _ in 0..4 {
        readers.push(store.pool().acquire().await.unwrap());
    }
    for _ in 0..3 {
        let mut tx = store.begin_write().await.unwrap();
        sqlx::query("INSERT INTO mine (x) VALUES (1)")
            .execute(&mut *tx)
            .await
            .expect("the temporary table of the write connection");
        tx.commit().await.unwrap();
    }
    drop(readers);
    // ...and it is not one of the readers' connections.
    let seen = sqlx::query("SELECT COUNT(*) AS n FROM sqlite_temp_master WHERE name = 'mine'")
        .fetch_one(store.pool())
        .await
        .unwrap()
        .try_get::<i64, _>("n")
        .unwrap();
    assert_eq!(seen, 0);
    store.close().await;
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The bundled SQLite is built without its memory statistics (`.cargo/config.toml`): with
/// them every allocation inside SQLite takes one process-wide mutex, which the read
/// connections of a scan contend for (docs/benchmarks.md, BI).
#[tokio::test]
async fn sqlite_is_built_without_memory_statistics() {
    let (url, dir) = crate::testing::fresh_sqlite();
    let store = Store::connect(&url).await.unwrap();
    let options: Vec<String> = sqlx::query("PRAGMA compile_options")
        .fetch_all(store.pool())
        .await
        .unwrap()
        .iter()
        .map(|r| r.try_get::<String, _>(0).unwrap())
        .collect();
    store.close().await;
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    assert!(
        options.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"),
        "{options:?}"
    );
}
