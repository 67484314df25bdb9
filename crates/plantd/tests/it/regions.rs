//! Regions (issue 33) with two instances on loopback, each with its own database, replicating
//! through the machine's NATS JetStream (where `PLANTD_TEST_NATS_URL` names it): the region
//! API, the organization and its owner created once and received by the other region, a user
//! signing in and an API key authenticating in the other region, a revocation reaching the
//! other region within seconds, resident data redirected to the primary region, the peers'
//! health with one stopped, the replication lag of a region that stopped applying, three
//! regions at a distance (delaying relays: this machine's kernel has no `tc netem`), and the
//! nodes of one region sharing live points, revocations and rate-limit counts, device events,
//! queued commands and license changes.

use plantd_app::AppConfig;
use plantd_app::regions::RegionSettings;
use plantd_model::region::RegionId;
use plantd_test_support::{
    TestApp, bind_loopback, spawn_app, spawn_app_on, spawn_empty_on, unique_name, wait_for,
};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

pub(crate) fn regional(
    region: RegionId,
    peer: (RegionId, String),
    nats: &str,
    deployment: &str,
) -> AppConfig {
    AppConfig {
        regions: RegionSettings {
            region,
            peers: vec![peer],
            nats_url: Some(nats.to_string()),
            deployment: deployment.to_string(),
            ..RegionSettings::default()
        },
        // A node trusts a looked-up key this long; replication forgets it at once.
        key_cache_ttl: Duration::from_secs(60),
        ..AppConfig::default()
    }
}

async fn root_get(app: &TestApp, path: &str, key: Option<&str>) -> (u16, Value) {
    let mut req = app.client.get(format!("http://{}{path}", app.addr));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// A single instance: the six regions, us-east served and current, the others unavailable;
/// an unknown region is a 404; its own health; the organization's region view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_instance_serves_us_east() {
    let app = spawn_app().await;
    let (status, body) = root_get(&app, "/api/v1/regions", None).await;
    assert_eq!(status, 200, "{body}");
    let regions = body["data"].as_array().unwrap();
    let ids: Vec<&str> = regions.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "us-east",
            "us-west",
            "eu-west",
            "eu-central",
            "ap-southeast",
            "ap-northeast"
        ]
    );
    assert_eq!(regions[0]["status"], "active");
    assert_eq!(regions[0]["current"], true);
    assert_eq!(
        regions[0]["certifications"],
        json!(["SOC 2", "HIPAA", "FedRAMP"])
    );
    assert_eq!(
        regions[0]["endpoints"]["api"],
        format!("http://{}/v1", app.addr)
    );
    assert_eq!(regions[2]["status"], "unavailable");
    assert_eq!(regions[2]["endpoints"]["api"], Value::Null);
    let (status, body) = root_get(&app, "/api/v1/regions/eu-central", None).await;
    assert_eq!(status, 200);
    assert_eq!(body["data"]["location"], "Germany");
    let (status, body) = root_get(&app, "/api/v1/regions/mars-1", None).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "not_found");
    let key = app.admin_key.clone();
    let (status, _) = root_get(&app, "/api/v1/regions/health", None).await;
    assert_eq!(status, 401);
    let (_, body) = root_get(&app, "/api/v1/regions/health", Some(&key)).await;
    assert_eq!(body["data"]["regions"][0]["id"], "us-east");
    assert_eq!(body["data"]["regions"][0]["status"], "healthy");
    let (_, body) = root_get(&app, "/api/v1/organizations/current/region", Some(&key)).await;
    assert_eq!(body["data"]["organization_id"], app.org_id.as_str());
    assert_eq!(body["data"]["primary_region"], "us-east");
    assert_eq!(body["data"]["data_residency_enabled"], false);
    assert_eq!(body["data"]["available_regions"], json!(["us-east"]));
    let (_, body) = root_get(&app, "/api/v1/regions/replication", Some(&key)).await;
    assert_eq!(body["data"]["primary_region"], "us-east");
    assert_eq!(body["data"]["replicas"], json!([]));
    // Resident data is served here: no redirect on a single instance.
    app.get("/data-sources", &key).await.expect(200);
}

/// Two regions, one NATS server: replication of organizations, users, memberships and keys
/// both ways; redirects; health; lag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_regions_replicate_and_redirect() {
    let Some(nats) = plantd_test_support::peer(
        "PLANTD_TEST_NATS_URL",
        "(e.g. nats://127.0.0.1:4222, with JetStream) to run two regions",
    ) else {
        return;
    };
    let deployment = format!("t{}", unique_name().replace(['.', ' '], "_"));
    let (la, lb) = (bind_loopback().await, bind_loopback().await);
    let (ua, ub) = (
        format!("http://{}", la.local_addr().unwrap()),
        format!("http://{}", lb.local_addr().unwrap()),
    );
    // us-east has the organization, its owner and an admin key; eu-west starts empty.
    let east = spawn_app_on(
        la,
        regional(
            RegionId::UsEast,
            (RegionId::EuWest, ub.clone()),
            &nats,
            &deployment,
        ),
    )
    .await;
    let west = spawn_empty_on(
        lb,
        regional(
            RegionId::EuWest,
            (RegionId::UsEast, ua.clone()),
            &nats,
            &deployment,
        ),
    )
    .await;
    let key = east.admin_key.clone();

    // The key created in us-east authenticates in eu-west once replicated.
    let started = Instant::now();
    wait_for("the organization and key in eu-west", 30, || async {
        (west.get("/organizations/current", &key).await.status == 200).then_some(())
    })
    .await;
    eprintln!(
        "first sync (organization, owner, key): {:?}",
        started.elapsed()
    );
    let (_, body) = root_get(&west, "/api/v1/organizations/current/region", Some(&key)).await;
    assert_eq!(body["data"]["primary_region"], "us-east", "{body}");
    assert_eq!(
        body["data"]["available_regions"],
        json!(["us-east", "eu-west"])
    );
    assert_eq!(body["data"]["endpoints"]["api"], format!("{ua}/v1"));

    // The owner signs in at eu-west with the password set in us-east.
    let login = json!({"email": "owner@example.com", "password": "station-7-valve"});
    let r = west
        .call(reqwest::Method::POST, "/auth/login", None, Some(login))
        .await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);

    // The console at eu-west: the Regions page says where the data lives; a page of resident
    // data sends the browser to the same page in us-east.
    let cookie =
        crate::console::console_cookie(&west, "owner@example.com", "station-7-valve").await;
    let no_redirects = crate::console::browser();
    let page = no_redirects
        .get(format!("http://{}/regions", west.addr))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("<strong id=\"primary-region\">us-east</strong>"),
        "{html}"
    );
    assert!(html.contains("open its console there"), "{html}");
    let page = no_redirects
        .get(format!("http://{}/dashboards", west.addr))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 303);
    assert_eq!(
        page.headers()["location"].to_str().unwrap(),
        format!("{ua}/dashboards")
    );

    // Resident data asked of eu-west is a 307 to us-east, the same path and query.
    let r = no_redirects
        .get(format!("{}/data-sources?per_page=5", west.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 307);
    assert_eq!(
        r.headers()["location"].to_str().unwrap(),
        format!("{ua}/v1/data-sources?per_page=5")
    );
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "wrong_region");
    east.get("/data-sources?per_page=5", &key).await.expect(200);

    // A key created in eu-west (API key metadata is replicated, served anywhere) works in
    // us-east; a key created in us-east and revoked in eu-west stops working in us-east.
    let made = west
        .post(
            "/api-keys",
            &key,
            json!({"name": "west-made", "scopes": ["read:telemetry"]}),
        )
        .await
        .expect(201);
    let west_key = made.json["data"]["key"].as_str().unwrap().to_string();
    wait_for("the eu-west key in us-east", 30, || async {
        (east
            .get("/telemetry/latest?asset_id=M1", &west_key)
            .await
            .status
            == 200)
            .then_some(())
    })
    .await;
    let made = east
        .post(
            "/api-keys",
            &key,
            json!({"name": "doomed", "scopes": ["read:telemetry"]}),
        )
        .await
        .expect(201);
    let doomed = made.json["data"]["key"].as_str().unwrap().to_string();
    let doomed_id = made.json["data"]["id"].as_str().unwrap().to_string();
    east.get("/telemetry/latest?asset_id=M1", &doomed)
        .await
        .expect(200);
    let started = Instant::now();
    wait_for("the us-east key in eu-west", 30, || async {
        (west.get("/organizations/current", &doomed).await.status == 200).then_some(())
    })
    .await;
    eprintln!(
        "key created in us-east usable in eu-west after {:?}",
        started.elapsed()
    );
    west.delete(&format!("/api-keys/{doomed_id}"), &key)
        .await
        .expect(204);
    let started = Instant::now();
    wait_for("the revocation in us-east", 30, || async {
        (east
            .get("/telemetry/latest?asset_id=M1", &doomed)
            .await
            .status
            == 401)
            .then_some(())
    })
    .await;
    eprintln!(
        "revocation in eu-west effective in us-east after {:?}",
        started.elapsed()
    );

    // The organization's name changed in us-east reaches eu-west.
    east.put(
        "/organizations/current",
        &key,
        json!({"name": "Renamed plant"}),
    )
    .await
    .expect(200);
    wait_for("the new name in eu-west", 30, || async {
        (west.get("/organizations/current", &key).await.json["data"]["name"] == "Renamed plant")
            .then_some(())
    })
    .await;

    // Health seen from us-east: eu-west answers, its latency measured.
    let (_, body) = root_get(&east, "/api/v1/regions/health", Some(&key)).await;
    let health = body["data"]["regions"].as_array().unwrap().clone();
    assert_eq!(health.len(), 2, "{body}");
    assert_eq!(health[1]["id"], "eu-west");
    assert_eq!(health[1]["status"], "healthy", "{body}");
    assert!(health[1]["latency_ms"].as_u64().is_some());

    // Replication: synced once eu-west applied everything.
    wait_for("eu-west synced", 30, || async {
        let (_, body) = root_get(&east, "/api/v1/regions/replication", Some(&key)).await;
        (body["data"]["replicas"][0]["status"] == "synced").then_some(())
    })
    .await;
    let (_, body) = root_get(&east, "/api/v1/regions/replication", Some(&key)).await;
    assert_eq!(body["data"]["primary_region"], "us-east");
    assert_eq!(body["data"]["replicas"][0]["region"], "eu-west");
    assert_eq!(body["data"]["replicas"][0]["lag_seconds"], 0);

    // eu-west stops: its health is unreachable, and a change made meanwhile is pending for it.
    west.stop().await;
    east.post(
        "/api-keys",
        &key,
        json!({"name": "while-away", "scopes": ["read:telemetry"]}),
    )
    .await
    .expect(201);
    let (_, body) = root_get(&east, "/api/v1/regions/health", Some(&key)).await;
    assert_eq!(
        body["data"]["regions"][1]["status"], "unreachable",
        "{body}"
    );
    assert_eq!(body["data"]["regions"][1]["latency_ms"], Value::Null);
    let body = wait_for("a change pending for eu-west", 30, || async {
        let (_, body) = root_get(&east, "/api/v1/regions/replication", Some(&key)).await;
        (body["data"]["replicas"][0]["pending"].as_u64() > Some(0)).then_some(body)
    })
    .await;
    assert_ne!(body["data"]["replicas"][0]["status"], "synced", "{body}");
}

/// Two nodes of one region (one database, one NATS): a WebSocket client on node A receives a
/// point ingested on node B, a key revoked on B stops working on A at once (though A would
/// trust it for a minute), and a key's rate limit counts its requests on both nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_of_a_region_share_live_points_and_revocations() {
    use plantd_test_support::stream::{next, next_of_type, send};
    let Some(nats) = plantd_test_support::peer(
        "PLANTD_TEST_NATS_URL",
        "(e.g. nats://127.0.0.1:4222) to run two nodes of a region",
    ) else {
        return;
    };
    let config = || AppConfig {
        regions: RegionSettings {
            nats_url: Some(nats.clone()),
            deployment: format!("n{}", unique_name().replace(['.', ' '], "_")),
            ..RegionSettings::default()
        },
        key_cache_ttl: Duration::from_secs(60),
        limits: plantd_model::tier::LimitPolicy {
            enterprise_requests: plantd_model::tier::RequestLimits {
                per_minute: Some(60),
                ..Default::default()
            },
            ..Default::default()
        },
        ..AppConfig::default()
    };
    let a = plantd_test_support::spawn_app_with(config()).await;
    let mut cfg_b = config();
    cfg_b.regions.deployment = a.app.region_settings().deployment.clone();
    let b = a.another_node_with(cfg_b).await;
    let key = a.admin_key.clone();

    let mut ws = a.open_stream(&key).await;
    send(
        &mut ws,
        json!({"type": "subscribe", "asset_id": "Pump_01", "tag_name": "Flow"}),
    )
    .await;
    assert_eq!(next(&mut ws).await["type"], "subscribed");
    // Node B's connection to NATS may still be on its way: ingest on B until a point
    // arrives on A (each try a second).
    let mut arrived = None;
    for _ in 0..30 {
        let point = json!({"data": [{"asset_id": "Pump_01", "tag_name": "Flow", "value": 42.5,
            "timestamp": plantd_model::Timestamp::now().to_rfc3339()}]});
        b.post("/telemetry", &key, point).await.expect(200);
        if let Ok(m) =
            tokio::time::timeout(Duration::from_secs(1), next_of_type(&mut ws, "telemetry")).await
        {
            arrived = Some(m);
            break;
        }
    }
    let m = arrived.expect("a point ingested on B arrives live on A");
    assert_eq!(m["data"][0]["value"], 42.5, "{m}");
    assert_eq!(m["data"][0]["asset_id"], "Pump_01");

    // A key used on A (now trusted by A for a minute) and revoked on B.
    let made = a
        .post(
            "/api-keys",
            &key,
            json!({"name": "short-lived", "scopes": ["read:telemetry"]}),
        )
        .await
        .expect(201);
    let secret = made.json["data"]["key"].as_str().unwrap().to_string();
    let id = made.json["data"]["id"].as_str().unwrap().to_string();
    a.get("/telemetry/latest?asset_id=M1", &secret)
        .await
        .expect(200);
    b.delete(&format!("/api-keys/{id}"), &key).await.expect(204);
    let started = Instant::now();
    wait_for("the revocation on A", 10, || async {
        (a.get("/telemetry/latest?asset_id=M1", &secret).await.status == 401).then_some(())
    })
    .await;
    eprintln!(
        "revocation on B effective on A after {:?}",
        started.elapsed()
    );

    // Rate limits count across the nodes: a key's 60 a minute, 40 used on A, leave 20 on B.
    let made = a
        .post(
            "/api-keys",
            &key,
            json!({"name": "limited", "scopes": ["read:telemetry"]}),
        )
        .await
        .expect(201);
    let limited = made.json["data"]["key"].as_str().unwrap().to_string();
    let into_minute = plantd_model::Timestamp::now().unix_seconds() % 60;
    if into_minute > 40 {
        // Not across a minute's end, where the window starts again.
        tokio::time::sleep(Duration::from_secs((61 - into_minute) as u64)).await;
    }
    for _ in 0..40 {
        a.get("/telemetry/latest?asset_id=M1", &limited)
            .await
            .expect(200);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let first = b
        .get("/telemetry/latest?asset_id=M1", &limited)
        .await
        .expect(200);
    assert_eq!(first.header("x-ratelimit-remaining"), Some("19"));
    for _ in 0..19 {
        b.get("/telemetry/latest?asset_id=M1", &limited)
            .await
            .expect(200);
    }
    b.get("/telemetry/latest?asset_id=M1", &limited)
        .await
        .expect(429);
}

/// Two nodes of one region (one PostgreSQL database, one NATS), a device connected to node A's
/// MQTT door: a WebSocket client on node B sees the device come online (an event only A
/// makes), a command queued on B reaches the device on A, and a license A keeps for a minute
/// is seen suspended on A as soon as B suspends it. SQLite has one server per database by
/// design (two writing nodes would wait on its lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_of_a_region_share_device_events_and_license_changes() {
    use plantd_test_support::mqtt::{connect, next_publish, options};
    use plantd_test_support::stream::{next, next_of_type, send};
    use rumqttc::{ConnectReturnCode, QoS};
    if std::env::var(plantd_test_support::TEST_DATABASE_ENV).is_err() {
        eprintln!(
            "skipped: set {} to run two nodes of a region on PostgreSQL",
            plantd_test_support::TEST_DATABASE_ENV
        );
        return;
    }
    let Some(nats) = plantd_test_support::peer(
        "PLANTD_TEST_NATS_URL",
        "(e.g. nats://127.0.0.1:4222) to run two nodes of a region",
    ) else {
        return;
    };
    let config = || AppConfig {
        regions: RegionSettings {
            nats_url: Some(nats.clone()),
            deployment: format!("v{}", unique_name().replace(['.', ' '], "_")),
            ..RegionSettings::default()
        },
        key_cache_ttl: Duration::from_secs(60),
        ..AppConfig::default()
    };
    let a = plantd_test_support::spawn_app_with(config()).await;
    let mut cfg_b = config();
    cfg_b.regions.deployment = a.app.region_settings().deployment.clone();
    let b = a.another_node_with(cfg_b).await;
    let key = a.admin_key.clone();

    // B's stream follows the whole organization; A's NATS connection may still be on its way:
    // ingest on A until a point arrives on B.
    let mut ws = b.open_stream(&key).await;
    send(&mut ws, json!({"type": "subscribe"})).await;
    assert_eq!(next(&mut ws).await["type"], "subscribed");
    let mut arrived = false;
    for _ in 0..30 {
        let point = json!({"data": [{"asset_id": "Warmup", "tag_name": "Flow", "value": 1.0,
            "timestamp": plantd_model::Timestamp::now().to_rfc3339()}]});
        a.post("/telemetry", &key, point).await.expect(200);
        if tokio::time::timeout(Duration::from_secs(1), next_of_type(&mut ws, "telemetry"))
            .await
            .is_ok()
        {
            arrived = true;
            break;
        }
    }
    assert!(arrived, "a point ingested on A arrives live on B");

    let channel = a.start_mqtt().await;
    let d = b
        .post(
            "/fleet/devices",
            &key,
            json!({"name": "Gateway N-1", "serial_number": "N-1"}),
        )
        .await
        .expect(201)
        .json["data"]
        .clone();
    let (id, pw) = (
        d["id"].as_str().unwrap(),
        d["mqtt"]["password"].as_str().unwrap(),
    );
    let (mut dev, code) = connect(options(channel.local_addr.unwrap(), id, id, pw)).await;
    assert_eq!(code, ConnectReturnCode::Success);
    let online = tokio::time::timeout(Duration::from_secs(30), next_of_type(&mut ws, "device"))
        .await
        .expect("B's stream hears the device come online on A");
    assert_eq!(online["event"], "device.online", "{online}");
    assert_eq!(online["data"]["id"], id);

    dev.client
        .subscribe(
            d["mqtt"]["topics"]["commands"].as_str().unwrap(),
            QoS::AtLeastOnce,
        )
        .await
        .unwrap();
    // The subscription is in place once a command queued on A itself arrives.
    a.post(
        &format!("/fleet/devices/{id}/command"),
        &key,
        json!({"command": "from-a"}),
    )
    .await
    .expect(201);
    next_publish(&mut dev, 15).await.expect("A's own command");
    let started = Instant::now();
    let cmd = b
        .post(
            &format!("/fleet/devices/{id}/command"),
            &key,
            json!({"command": "from-b"}),
        )
        .await
        .expect(201);
    let got = next_publish(&mut dev, 15)
        .await
        .expect("node A delivers B's command");
    eprintln!(
        "a command queued on B reached the device on A after {:?}",
        started.elapsed()
    );
    let got: Value = serde_json::from_slice(&got.payload).unwrap();
    assert_eq!(got["id"], cmd.json["data"]["id"]);

    // A license validated on A (kept there for a minute), suspended on B.
    let product = a
        .post(
            "/products",
            &key,
            json!({"name": "Hub", "sku": "HUB-N", "price": 99.0, "license_type": "subscription"}),
        )
        .await
        .expect(201)
        .json["data"]["id"]
        .clone();
    let license = a
        .post(
            "/licenses",
            &key,
            json!({"product_id": product, "validity_days": 30, "customer_email": "ops@plant.example"}),
        )
        .await
        .expect(201)
        .json["data"]
        .clone();
    let validate = |node: &'static str| {
        let body = json!({"license_key": license["license_key"]});
        let app = if node == "a" { &a } else { &b };
        async move {
            app.call(
                reqwest::Method::POST,
                "/licenses/validate",
                None,
                Some(body),
            )
            .await
            .expect(200)
            .json["data"]["code"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    assert_eq!(validate("a").await, "VALID");
    b.post(
        &format!("/licenses/{}/suspend", license["id"].as_str().unwrap()),
        &key,
        json!({}),
    )
    .await
    .expect(200);
    let started = Instant::now();
    wait_for("the suspension on A", 10, || async {
        (validate("a").await == "SUSPENDED").then_some(())
    })
    .await;
    eprintln!(
        "a suspension on B effective on A after {:?}",
        started.elapsed()
    );
    channel.stop().await;
}

/// Three regions with real distance between them: eu-west 25 ms and ap-northeast 75 ms away
/// (each way) from us-east and from NATS, through delaying relays. us-east's health probe
/// measures the round trips, and a key made in us-east reaches both, later in the farther.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_regions_at_a_distance() {
    use plantd_test_support::delayed_relay;
    let Some(nats) = plantd_test_support::peer(
        "PLANTD_TEST_NATS_URL",
        "(e.g. nats://127.0.0.1:4222) to run three regions",
    ) else {
        return;
    };
    let nats_addr = {
        let u = plantd_model::data_source::parse_url(&nats).unwrap();
        format!("{}:{}", u.host, u.port.unwrap_or(4222))
    };
    let deployment = format!("d{}", unique_name().replace(['.', ' '], "_"));
    let (la, lb, lc) = (
        bind_loopback().await,
        bind_loopback().await,
        bind_loopback().await,
    );
    let ua = format!("http://{}", la.local_addr().unwrap());
    let near = Duration::from_millis(25);
    let far = Duration::from_millis(75);
    // What us-east reaches of the others, and what they reach of NATS, is delayed.
    let to_b = delayed_relay(lb.local_addr().unwrap().to_string(), near).await;
    let to_c = delayed_relay(lc.local_addr().unwrap().to_string(), far).await;
    let nats_b = delayed_relay(nats_addr.clone(), near).await;
    let nats_c = delayed_relay(nats_addr, far).await;
    let config = |region, peers: Vec<(RegionId, String)>, nats: String| AppConfig {
        regions: RegionSettings {
            region,
            peers,
            nats_url: Some(nats),
            deployment: deployment.clone(),
            ..RegionSettings::default()
        },
        ..AppConfig::default()
    };
    let east = spawn_app_on(
        la,
        config(
            RegionId::UsEast,
            vec![
                (RegionId::EuWest, format!("http://{}", to_b.addr)),
                (RegionId::ApNortheast, format!("http://{}", to_c.addr)),
            ],
            nats.clone(),
        ),
    )
    .await;
    let west = spawn_empty_on(
        lb,
        config(
            RegionId::EuWest,
            vec![(RegionId::UsEast, ua.clone())],
            format!("nats://{}", nats_b.addr),
        ),
    )
    .await;
    let asia = spawn_empty_on(
        lc,
        config(
            RegionId::ApNortheast,
            vec![(RegionId::UsEast, ua.clone())],
            format!("nats://{}", nats_c.addr),
        ),
    )
    .await;
    let key = east.admin_key.clone();
    for (region, app) in [("eu-west", &west), ("ap-northeast", &asia)] {
        wait_for(&format!("the organization in {region}"), 60, || async {
            (app.get("/organizations/current", &key).await.status == 200).then_some(())
        })
        .await;
    }

    let (_, body) = root_get(&east, "/api/v1/regions/health", Some(&key)).await;
    let health = body["data"]["regions"].as_array().unwrap().clone();
    let latency = |id: &str| {
        health
            .iter()
            .find(|h| h["id"] == id)
            .and_then(|h| h["latency_ms"].as_u64())
            .unwrap_or_else(|| panic!("{id} has a latency: {body}"))
    };
    let (west_ms, asia_ms) = (latency("eu-west"), latency("ap-northeast"));
    eprintln!("health round trips from us-east: eu-west {west_ms} ms, ap-northeast {asia_ms} ms");
    assert!(west_ms >= 50, "{body}");
    assert!(asia_ms >= 150, "{body}");
    assert!(health.iter().all(|h| h["status"] == "healthy"), "{body}");

    // A key made in us-east: how long until each region accepts it.
    let made = east
        .post(
            "/api-keys",
            &key,
            json!({"name": "travels", "scopes": ["read:telemetry"]}),
        )
        .await
        .expect(201);
    let secret = made.json["data"]["key"].as_str().unwrap().to_string();
    let started = Instant::now();
    let mut lags = Vec::new();
    for (region, app) in [("eu-west", &west), ("ap-northeast", &asia)] {
        wait_for(&format!("the key in {region}"), 30, || async {
            (app.get("/organizations/current", &secret).await.status == 200).then_some(())
        })
        .await;
        lags.push((region, started.elapsed()));
    }
    eprintln!("key made in us-east accepted after: {lags:?}");
    // ap-northeast is 75 ms from NATS: a change reaches it no sooner.
    assert!(lags[1].1 >= Duration::from_millis(75), "{lags:?}");
    wait_for("both replicas synced", 30, || async {
        let (_, body) = root_get(&east, "/api/v1/regions/replication", Some(&key)).await;
        let replicas = body["data"]["replicas"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        (replicas.len() == 2 && replicas.iter().all(|r| r["status"] == "synced")).then_some(())
    })
    .await;
}
