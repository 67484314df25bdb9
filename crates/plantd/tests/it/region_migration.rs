//! Region migrations (issue 33): an organization moves from us-east to eu-west, two instances
//! on loopback with their own databases and the machine's NATS JetStream between them. The
//! refusals (not Enterprise, unknown, unserved or current region), the read-only window (409
//! on writes, `Retry-After` on ingest, reads served), a connector's points read during the
//! window kept and written in the target, the copy checked and switched, resident data then
//! served by the target and redirected by the source, the source's copy deleted after its
//! delay; and a migration that fails (the target's instance is down) leaving the source as it
//! was and writable.

use plantd_app::AppConfig;
use plantd_model::Timestamp;
use plantd_model::region::RegionId;
use plantd_model::tier::Tier;
use plantd_test_support::{
    TestApp, bind_loopback, spawn_app_on, spawn_empty_on, unique_name, wait_for,
};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

use crate::regions::regional;

const HOUR: i64 = 3_600_000;

fn ts(ms: i64) -> String {
    Timestamp::from_millis(ms).to_rfc3339().replace('+', "%2B")
}

/// Two regions of one deployment; us-east has the organization (Enterprise) and its key;
/// eu-west, when up, has received them. Each configuration is adjusted by its function.
pub(crate) async fn two_regions(
    nats: &str,
    west_up: bool,
    east_config: impl FnOnce(&mut AppConfig),
    west_config: impl FnOnce(&mut AppConfig),
) -> (TestApp, Option<TestApp>, String, String) {
    let deployment = format!("m{}", unique_name().replace(['.', ' '], "_"));
    let (la, lb) = (bind_loopback().await, bind_loopback().await);
    let (ua, ub) = (
        format!("http://{}", la.local_addr().unwrap()),
        format!("http://{}", lb.local_addr().unwrap()),
    );
    let mut east = regional(
        RegionId::UsEast,
        (RegionId::EuWest, ub.clone()),
        nats,
        &deployment,
    );
    east_config(&mut east);
    let east = spawn_app_on(la, east).await;
    let west = if west_up {
        let mut config = regional(
            RegionId::EuWest,
            (RegionId::UsEast, ua.clone()),
            nats,
            &deployment,
        );
        west_config(&mut config);
        let west = spawn_empty_on(lb, config).await;
        let key = east.admin_key.clone();
        wait_for("the organization in eu-west", 30, || async {
            (west.get("/organizations/current", &key).await.status == 200).then_some(())
        })
        .await;
        Some(west)
    } else {
        drop(lb);
        None
    };
    (east, west, ua, ub)
}

/// A migration's window of 4 s, and the source's copy deleted 2 s after the switch.
fn quick_migration(c: &mut AppConfig) {
    c.regions.min_window = Duration::from_secs(4);
    c.regions.delete_source_after = Duration::from_secs(2);
}

async fn region_view(app: &TestApp, key: &str) -> Value {
    let r = app
        .client
        .get(format!(
            "http://{}/api/v1/organizations/current/region",
            app.addr
        ))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.json::<Value>().await.unwrap()["data"].clone()
}

async fn set_region(app: &TestApp, key: &str, body: Value) -> (u16, Value) {
    let r = app
        .client
        .put(format!(
            "http://{}/api/v1/organizations/current/region",
            app.addr
        ))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// Points of `asset` in the hour from `from`, as the API counts them.
async fn count_points(app: &TestApp, key: &str, asset: &str, from: i64) -> u64 {
    let q = format!(
        "/telemetry?asset_id={asset}&start={}&end={}&per_page=1",
        ts(from),
        ts(from + HOUR)
    );
    let r = app.get(&q, key).await.expect(200);
    r.json["meta"]["total"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_organization_moves_to_another_region() {
    let Some(nats) = plantd_test_support::peer(
        "PLANTD_TEST_NATS_URL",
        "(e.g. nats://127.0.0.1:4222, with JetStream) to move an organization between regions",
    ) else {
        return;
    };
    let mqtt = std::env::var("PLANTD_TEST_MQTT_URL").ok();
    let (east, west, _ua, ub) = two_regions(&nats, true, quick_migration, |_| {}).await;
    let west = west.unwrap();
    let key = east.admin_key.clone();
    let b = (Timestamp::now().millis() - 2 * 86_400_000).div_euclid(HOUR) * HOUR;

    // Strict residency: the data lives in one region only (no secondary copy), so once moved
    // its old copy in us-east is deleted (without it, us-east would keep it as eu-west's
    // secondary copy).
    east.put(
        "/organizations/current",
        &key,
        json!({"data_residency_enabled": true}),
    )
    .await
    .expect(200);
    // Resident data in us-east: points of two tags, a dashboard, an alert rule.
    let points: Vec<Value> = (0..600)
        .map(|i| {
            json!({"asset_id": "Pump_01", "tag_name": if i % 2 == 0 { "Flow" } else { "Temp" },
                   "value": i as f64 * 0.5, "timestamp": Timestamp::from_millis(b + i * 1000).to_rfc3339()})
        })
        .collect();
    east.post("/telemetry", &key, json!({"data": points}))
        .await
        .expect(200);
    let dashboard = east
        .post(
            "/dashboards",
            &key,
            json!({"name": "Pumps", "description": "moved"}),
        )
        .await
        .expect(201)
        .id();
    // A platform connector reading the machine's broker, when there is one.
    let prefix = format!("mig{}", unique_name().replace(['.', ' ', '-'], ""));
    if let Some(url) = &mqtt {
        let ds = east
            .post(
                "/data-sources",
                &key,
                json!({"name": "broker", "type": "mqtt", "config": {
                    "broker_url": url, "topics": [format!("{prefix}/#")], "qos": 1,
                    "asset_id_topic_level": 1, "tag_name_topic_level": 2}}),
            )
            .await
            .expect(201)
            .id();
        wait_for("the connector connected", 30, || async {
            let s = east.get(&format!("/data-sources/{ds}"), &key).await;
            (s.json["data"]["status"] == "connected").then_some(())
        })
        .await;
    }

    // Refusals: not Enterprise, unknown region, a region not served, the current region.
    let (_, other_key) = east.other_org("Small Works", Tier::Professional).await;
    let (status, body) = set_region(&east, &other_key, json!({"region": "eu-west"})).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "authorization_error");
    let (status, body) = set_region(&east, &key, json!({"region": "mars-1"})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["details"][0]["field"], "region");
    let (status, body) = set_region(&east, &key, json!({"region": "ap-northeast"})).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("region:"),
        "{body}"
    );
    let (status, body) = set_region(&east, &key, json!({"region": "us-east"})).await;
    assert_eq!(status, 409, "{body}");

    // The Regions page offers the move to an owner of an Enterprise organization.
    let cookie =
        crate::console::console_cookie(&east, "owner@example.com", "station-7-valve").await;
    let page = |app: &TestApp| {
        let (client, url, cookie) = (
            app.client.clone(),
            format!("http://{}/regions", app.addr),
            cookie.clone(),
        );
        async move {
            let r = client
                .get(url)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 200);
            r.text().await.unwrap()
        }
    };
    let html = page(&east).await;
    assert!(
        html.contains("data-action=\"/api/v1/organizations/current/region\""),
        "{html}"
    );
    assert!(html.contains("<option value=\"eu-west\">"), "{html}");
    assert!(html.contains("This organization never moved."), "{html}");

    // Scheduled now.
    let (status, body) = set_region(
        &east,
        &key,
        json!({"region": "eu-west", "migration_time": Timestamp::now().to_rfc3339()}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["status"], "scheduled");
    assert_eq!(body["data"]["target_region"], "eu-west");
    assert_eq!(body["data"]["estimate"], "1-2 hours");
    let (status, _) = set_region(&east, &key, json!({"region": "eu-west"})).await;
    assert_eq!(status, 409, "one migration at a time");
    let started = Instant::now();

    // The window: writes wait, reads are served.
    let view = wait_for("the migration running", 20, || async {
        let v = region_view(&east, &key).await;
        (v["migration"]["status"] == "running").then_some(v)
    })
    .await;
    assert!(view["migration"]["started_at"].is_string(), "{view}");
    assert!(view["migration"]["progress"].as_i64().unwrap() <= 100);
    let late = json!({"data": [{"asset_id": "Pump_01", "tag_name": "Flow", "value": 1.0,
        "timestamp": Timestamp::from_millis(b + 3_000_000).to_rfc3339()}]});
    let r = east
        .post("/telemetry", &key, late.clone())
        .await
        .expect(409);
    assert_eq!(r.code(), "conflict");
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("moving to another region")
    );
    assert_eq!(r.header("retry-after"), Some("5"));
    east.post("/dashboards", &key, json!({"name": "New"}))
        .await
        .expect(409);
    east.get(&format!("/dashboards/{dashboard}"), &key)
        .await
        .expect(200);
    assert_eq!(count_points(&east, &key, "Pump_01", b).await, 600);
    // The connector keeps reading: its points are held for eu-west.
    if let Some(url) = &mqtt {
        let publisher =
            crate::connectors::publisher(&plantd_model::data_source::parse_url(url).unwrap()).await;
        for i in 0..20 {
            let at = Timestamp::from_millis(b + HOUR / 2 + i * 1000);
            publisher
                .publish(
                    format!("{prefix}/Press_01/Force"),
                    rumqttc::QoS::AtLeastOnce,
                    false,
                    json!({"value": i as f64, "timestamp": at.to_rfc3339()}).to_string(),
                )
                .await
                .unwrap();
        }
    }

    // Completed: the organization's primary region is eu-west everywhere.
    let view = wait_for("the migration completed", 60, || async {
        let v = region_view(&east, &key).await;
        match v["migration"]["status"].as_str() {
            Some("completed") => Some(v),
            Some("failed") => panic!("the migration failed: {v}"),
            _ => None,
        }
    })
    .await;
    eprintln!("migration of a small organization: {:?}", started.elapsed());
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "the window stays open 4 s"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(view["primary_region"], "eu-west", "{view}");
    assert_eq!(view["migration"]["progress"], 100);
    assert_eq!(view["endpoints"]["api"], format!("{ub}/v1"));
    let html = page(&east).await;
    assert!(
        html.contains("<strong class=\"migration-status\">completed</strong>"),
        "{html}"
    );
    assert!(!html.contains("Move now"), "{html}");

    // eu-west serves it: the points, the dashboard, and takes writes.
    assert_eq!(count_points(&west, &key, "Pump_01", b).await, 600);
    let d = west
        .get(&format!("/dashboards/{dashboard}"), &key)
        .await
        .expect(200);
    assert_eq!(d.json["data"]["name"], "Pumps");
    west.post("/telemetry", &key, late).await.expect(200);
    assert_eq!(count_points(&west, &key, "Pump_01", b).await, 601);
    if mqtt.is_some() {
        assert_eq!(
            count_points(&west, &key, "Press_01", b).await,
            20,
            "held points written in eu-west"
        );
    }
    // A device still connected to us-east's MQTT channel is told where the data goes now, and
    // nothing is stored in us-east.
    let device = plantd_app::Caller {
        credential: plantd_app::Credential::Device { id: "dev-1".into() },
        org_id: east.org_id.clone(),
        user_id: None,
        scopes: vec![],
        tier: Tier::Enterprise,
    };
    let refused = east
        .app
        .ingest(
            &device,
            plantd_app::telemetry::Batch::Points(vec![plantd_model::telemetry::Point {
                asset_id: "Pump_01".into(),
                tag_name: "Flow".into(),
                value: 2.0,
                timestamp: Timestamp::from_millis(b + 3_100_000),
                quality: plantd_model::telemetry::Quality::Good,
                data_source_id: None,
            }]),
            None,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains(&ub), "{refused}");
    // us-east redirects.
    let no_redirects = crate::console::browser();
    let r = no_redirects
        .get(format!("{}/dashboards/{dashboard}", east.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 307);
    assert_eq!(
        r.headers()["location"].to_str().unwrap(),
        format!("{ub}/v1/dashboards/{dashboard}")
    );
    // The copy left in us-east is deleted after its delay (2 s here).
    let org = east.org_id.clone();
    wait_for("us-east's copy deleted", 30, || async {
        let rows = east
            .store
            .resident_rows("dashboards", &org, 0, 10)
            .await
            .unwrap();
        rows.rows.is_empty().then_some(())
    })
    .await;
    // The migration records the deletion after the rows are gone (its own write): wait for it.
    let moved = wait_for("us-east's deletion recorded", 30, || async {
        let m = east
            .store
            .latest_region_migration(&org)
            .await
            .unwrap()
            .unwrap();
        m.source_deleted_at.is_some().then_some(m)
    })
    .await;
    let verified: Value = serde_json::from_str(moved.verified.as_deref().unwrap()).unwrap();
    assert_eq!(verified["points"]["count"], 600, "{verified}");
    assert_eq!(verified["tables"]["dashboards"]["count"], 1, "{verified}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_migration_leaves_the_organization_where_it_was() {
    let Some(nats) = plantd_test_support::peer(
        "PLANTD_TEST_NATS_URL",
        "(e.g. nats://127.0.0.1:4222, with JetStream) to move an organization between regions",
    ) else {
        return;
    };
    // eu-west is served by the deployment, but its instance is down.
    let (east, _, _, _) = two_regions(&nats, false, quick_migration, |_| {}).await;
    let key = east.admin_key.clone();
    let b = (Timestamp::now().millis() - 2 * 86_400_000).div_euclid(HOUR) * HOUR;
    let points: Vec<Value> = (0..50)
        .map(|i| {
            json!({"asset_id": "Fan_01", "tag_name": "Speed", "value": i as f64,
            "timestamp": Timestamp::from_millis(b + i * 1000).to_rfc3339()})
        })
        .collect();
    east.post("/telemetry", &key, json!({"data": points}))
        .await
        .expect(200);
    let (status, body) = set_region(&east, &key, json!({"region": "eu-west"})).await;
    assert_eq!(status, 200, "{body}");
    let view = wait_for("the migration failed", 60, || async {
        let v = region_view(&east, &key).await;
        (v["migration"]["status"] == "failed").then_some(v)
    })
    .await;
    assert_eq!(view["primary_region"], "us-east", "{view}");
    let error = view["migration"]["error"].as_str().unwrap();
    assert!(error.contains("eu-west"), "{error}");
    // Writable again, nothing lost.
    let more = json!({"data": [{"asset_id": "Fan_01", "tag_name": "Speed", "value": 99.0,
        "timestamp": Timestamp::from_millis(b + 100_000).to_rfc3339()}]});
    east.post("/telemetry", &key, more).await.expect(200);
    assert_eq!(count_points(&east, &key, "Fan_01", b).await, 51);
    east.post("/dashboards", &key, json!({"name": "After"}))
        .await
        .expect(201);
}

/// Active-passive: us-east copies the organization's resident data to eu-west (its secondary
/// region); strict residency deletes that copy and stops copying; with residency relaxed the
/// copy is made again; us-east stops, and eu-west fails over with the copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secondary_region_holds_a_copy_and_takes_over() {
    let Some(nats) = plantd_test_support::peer(
        "PLANTD_TEST_NATS_URL",
        "(e.g. nats://127.0.0.1:4222, with JetStream) to copy an organization to its secondary region",
    ) else {
        return;
    };
    let (east, west, _, _) = two_regions(
        &nats,
        true,
        |c| c.regions.standby_every = Duration::from_secs(10),
        // eu-west looks the organization's region up again after a second (the failover).
        |c| c.key_cache_ttl = Duration::from_secs(1),
    )
    .await;
    let west = west.unwrap();
    let key = east.admin_key.clone();
    let org = east.org_id.clone();
    // eu-west serves an organization of its own: the two regions copy to each other at once.
    let west_org = plantd_app::operator::create_org(&west.store, "West Works", Tier::Enterprise)
        .await
        .unwrap();
    let b = (Timestamp::now().millis() - 2 * 86_400_000).div_euclid(HOUR) * HOUR;
    let points: Vec<Value> = (0..100)
        .map(|i| {
            json!({"asset_id": "Mixer_01", "tag_name": "Torque", "value": i as f64,
            "timestamp": Timestamp::from_millis(b + i * 1000).to_rfc3339()})
        })
        .collect();
    east.post("/telemetry", &key, json!({"data": points}))
        .await
        .expect(200);
    let dashboard = east
        .post("/dashboards", &key, json!({"name": "Mixers"}))
        .await
        .expect(201)
        .id();

    // The copy reaches eu-west within the interval (10 s here; 15 min by default).
    let copy = wait_for("the secondary copy", 60, || async {
        let v = region_view(&east, &key).await;
        (v["secondary_copy"]["points"] == 100).then_some(v["secondary_copy"].clone())
    })
    .await;
    assert_eq!(copy["region"], "eu-west", "{copy}");
    let other = wait_for("eu-west's organization copied to us-east", 60, || async {
        east.store.standby_copy(&west_org.id, "held").await.unwrap()
    })
    .await;
    assert_eq!(other.region, "eu-west");
    let held = west
        .store
        .standby_copy(&org, "held")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(held.region, "us-east");
    assert_eq!(held.points, 100);
    assert_eq!(
        west.store
            .resident_rows("dashboards", &org, 0, 10)
            .await
            .unwrap()
            .rows
            .len(),
        1
    );
    // eu-west still redirects to the primary region: the copy is not served.
    let no_redirects = crate::console::browser();
    let r = no_redirects
        .get(format!("{}/dashboards/{dashboard}", west.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 307);

    // Strict residency: the copy in eu-west is deleted, none is made while it holds.
    let (_, other_key) = east.other_org("Small Works", Tier::Professional).await;
    let r = east
        .put(
            "/organizations/current",
            &other_key,
            json!({"data_residency_enabled": true}),
        )
        .await
        .expect(403);
    assert_eq!(r.code(), "authorization_error");
    east.put(
        "/organizations/current",
        &key,
        json!({"data_residency_enabled": true}),
    )
    .await
    .expect(200);
    assert_eq!(
        region_view(&east, &key).await["data_residency_enabled"],
        true
    );
    wait_for("the copy in eu-west deleted", 60, || async {
        let gone = west
            .store
            .standby_copy(&org, "held")
            .await
            .unwrap()
            .is_none()
            && west
                .store
                .resident_rows("dashboards", &org, 0, 10)
                .await
                .unwrap()
                .rows
                .is_empty()
            && region_view(&east, &key).await["secondary_copy"].is_null();
        gone.then_some(())
    })
    .await;
    east.put(
        "/organizations/current",
        &key,
        json!({"data_residency_enabled": false}),
    )
    .await
    .expect(200);
    wait_for("the copy made again", 60, || async {
        west.store
            .standby_copy(&org, "held")
            .await
            .unwrap()
            .filter(|h| h.points == 100)
    })
    .await;

    // us-east is lost; eu-west fails over with the copy.
    east.stop().await;
    let held = plantd_app::operator::fail_over(&west.store, &org, "eu-west")
        .await
        .unwrap();
    assert_eq!(held.points, 100);
    let d = wait_for("eu-west serving the organization", 30, || async {
        let r = west.get(&format!("/dashboards/{dashboard}"), &key).await;
        (r.status == 200).then_some(r)
    })
    .await;
    assert_eq!(d.json["data"]["name"], "Mixers");
    assert_eq!(count_points(&west, &key, "Mixer_01", b).await, 100);
    assert_eq!(region_view(&west, &key).await["primary_region"], "eu-west");
    west.post(
        "/telemetry",
        &key,
        json!({"data": [{"asset_id": "Mixer_01", "tag_name": "Torque", "value": 1.0,
            "timestamp": Timestamp::from_millis(b + 500_000).to_rfc3339()}]}),
    )
    .await
    .expect(200);
    // Without a copy, failing over is refused.
    let e = plantd_app::operator::fail_over(&west.store, &org, "eu-west")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("holds no secondary copy"), "{e}");
}
