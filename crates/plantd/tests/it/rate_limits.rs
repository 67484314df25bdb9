//! Tier rate limits over HTTP: a trial organization gets 60 requests per minute per key.

use plantd_model::Tier;
use plantd_test_support::spawn_app;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trial_key_gets_429_after_60_requests_a_minute() {
    let app = spawn_app().await;
    let (_, trial_key) = app.other_org("Trial Co", Tier::Trial).await;
    // A minute boundary in the middle would reset the window: start early in a minute.
    let secs_into_minute = plantd_model::Timestamp::now().unix_seconds() % 60;
    if secs_into_minute > 45 {
        tokio::time::sleep(std::time::Duration::from_secs(
            (61 - secs_into_minute) as u64,
        ))
        .await;
    }
    let mut last_remaining = None;
    for i in 0..60 {
        let r = app.get("/data-sources", &trial_key).await;
        assert_eq!(r.status, 200, "request {i}: {}", r.text);
        assert_eq!(r.header("x-ratelimit-limit"), Some("60"));
        assert_eq!(r.header("x-ratelimit-window"), Some("60"));
        last_remaining = r.header("x-ratelimit-remaining").map(str::to_string);
    }
    assert_eq!(last_remaining.as_deref(), Some("0"));
    let r = app.get("/data-sources", &trial_key).await.expect(429);
    assert_eq!(r.code(), "rate_limited");
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry));
    assert_eq!(r.json["error"]["retry_after"], retry);
    assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
    let reset: i64 = r.header("x-ratelimit-reset").unwrap().parse().unwrap();
    assert_eq!(reset % 60, 0, "minute windows end on the minute");
    // Another organization is not affected.
    app.get("/data-sources", &app.admin_key).await.expect(200);
    // A refused mutation is audited as rate limited.
    let r = app
        .post("/data-sources", &trial_key, serde_json::json!({}))
        .await
        .expect(429);
    assert_eq!(r.code(), "rate_limited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_organization_aggregate_binds_across_keys() {
    let mut config = plantd_app::AppConfig::default();
    config.limits.org_aggregate_multiplier = 1;
    let app = plantd_test_support::spawn_app_with(config).await;
    let (org_id, first) = app.other_org("Starter Co", Tier::Starter).await;
    let (_, second) = plantd_app::operator::create_key(
        &app.store,
        Some(&org_id),
        "second",
        &[plantd_model::Scope::Admin],
        None,
    )
    .await
    .unwrap();
    let secs_into_minute = plantd_model::Timestamp::now().unix_seconds() % 60;
    if secs_into_minute > 40 {
        tokio::time::sleep(std::time::Duration::from_secs(
            (61 - secs_into_minute) as u64,
        ))
        .await;
    }
    // Starter: 300 per key per minute; with a multiplier of 1 the organization also gets 300.
    for i in 0..300 {
        let key = if i % 2 == 0 { &first } else { &second };
        app.get("/organizations/current", key).await.expect(200);
    }
    let r = app.get("/organizations/current", &second).await.expect(429);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("organization limit of 300 per minute"),
        "{}",
        r.text
    );
    app.get("/organizations/current", &app.admin_key)
        .await
        .expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_limits_apply_per_key() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    // SPEC 8.5: POST /organizations/*/members/invite, 50 per day.
    for i in 0..50 {
        app.post(
            "/organizations/current/members/invite",
            k,
            serde_json::json!({"email": format!("p{i}@example.com")}),
        )
        .await
        .expect(201);
    }
    let r = app
        .post(
            "/organizations/current/members/invite",
            k,
            serde_json::json!({"email": "late@example.com"}),
        )
        .await
        .expect(429);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("endpoint limit of 50 per day"),
        "{}",
        r.text
    );
    assert_eq!(r.header("x-ratelimit-window"), Some("86400"));
    // Other endpoints of the same key are not affected.
    app.get("/organizations/current/members", k)
        .await
        .expect(200);
    let other = app.key(&[plantd_model::Scope::Admin]).await;
    app.post(
        "/organizations/current/members/invite",
        &other,
        serde_json::json!({"email": "late@example.com"}),
    )
    .await
    .expect(201);
}
