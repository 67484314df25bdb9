//! What a security review of the identity, session, console and tenancy surfaces found, each
//! with the test that failed before its fix (issue "Found by trying plantd as a plant engineer
//! would and by a security review"), on both backends.

use plantd_model::org::Role;
use plantd_test_support::{TestApp, spawn_app, wait_for};
use serde_json::json;

use crate::console::{browser, console_cookie};
use crate::identity::{OWNER, login, session};

/// An API key a person created acts for them: removing them from the organization revokes it
/// at once on this node (audited as `api_key.revoke` by the remover), and within the key
/// cache's 10 s on another node that had it cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_members_api_keys_stop_working() {
    let app = spawn_app().await;
    let ada_id = plantd_app::operator::create_user(
        &app.store,
        Some(&app.org_id),
        "ada@plant.example",
        "valves-and-pumps-2",
        Role::Admin,
    )
    .await
    .unwrap();
    let ada = session(&app, "ada@plant.example", "valves-and-pumps-2").await;
    let created = app
        .post(
            "/api-keys",
            &ada,
            json!({"name": "ada's script", "scopes": ["admin"]}),
        )
        .await
        .expect(201);
    let key = created.json["data"]["key"].as_str().unwrap().to_string();
    let key_id = created.id();
    app.get("/api-keys", &key).await.expect(200);
    let node = app.another_node().await;
    node.get("/api-keys", &key).await.expect(200);

    app.delete(
        &format!("/organizations/current/members/{ada_id}"),
        &app.admin_key,
    )
    .await
    .expect(204);
    let refused = app.get("/api-keys", &key).await.expect(401);
    assert!(refused.text.contains("revoked"), "{}", refused.text);
    app.post(
        "/api-keys",
        &key,
        json!({"name": "another", "scopes": ["admin"]}),
    )
    .await
    .expect(401);
    wait_for("the other node to refuse the key", 20, || async {
        (node.get("/api-keys", &key).await.status == 401).then_some(())
    })
    .await;

    let listed = app.get("/api-keys", &app.admin_key).await.expect(200);
    let revoked = listed.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == key_id.as_str())
        .unwrap();
    assert!(revoked["revoked_at"].is_string(), "{revoked}");
    let audit = app
        .get("/audit/logs?event_types=api_key.revoke", &app.admin_key)
        .await
        .expect(200);
    let record = &audit.json["data"][0];
    assert_eq!(record["resource_id"], key_id.as_str());
    assert_eq!(record["outcome"], "success");
    assert_eq!(record["path"], "/v1/organizations/current/members/{id}");
    node.stop().await;
}

fn root(app: &TestApp) -> String {
    format!("http://{}", app.addr)
}

/// The live stream authenticated by the session cookie opens only from the console's own
/// origin (a page on another port of the same host, or no Origin at all, is refused); bearer
/// clients are unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_stream_takes_a_cookie_only_from_the_consoles_origin() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let app = spawn_app().await;
    let cookie = console_cookie(&app, OWNER.0, OWNER.1).await;
    let open = |origin: Option<String>| {
        let mut req = format!("ws://{}/v1/ws", app.addr)
            .into_client_request()
            .unwrap();
        req.headers_mut().insert("cookie", cookie.parse().unwrap());
        if let Some(o) = origin {
            req.headers_mut().insert("origin", o.parse().unwrap());
        }
        tokio_tungstenite::connect_async(req)
    };
    let refused = |r: Result<_, tokio_tungstenite::tungstenite::Error>| match r {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => resp.status().as_u16(),
        Err(e) => panic!("{e}"),
        Ok(_) => 101,
    };
    let elsewhere = format!("http://127.0.0.1:{}", app.addr.port() + 1);
    assert_eq!(refused(open(Some(elsewhere)).await), 403);
    assert_eq!(refused(open(None).await), 403);
    assert_eq!(refused(open(Some(root(&app))).await), 101);
    // Bearer credentials are not sent by browsers on their own: no Origin needed.
    app.open_stream(&app.admin_key).await;
}

/// Accepting an invitation with an existing account checks its password under the login's
/// throttle (wrong ones lock the account's logins too), and the inviting admin never gets the
/// link of a person who has an account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invitations_of_existing_accounts_are_throttled_and_never_shown() {
    let app = spawn_app().await;
    let (other_org, _) = app
        .other_org("Other plant", plantd_model::Tier::Starter)
        .await;
    let sam = plantd_app::operator::create_user(
        &app.store,
        Some(&other_org),
        "sam@plant.example",
        "valves-and-pumps-2",
        Role::Member,
    )
    .await
    .unwrap();
    let invited = app
        .post(
            "/organizations/current/members/invite",
            &app.admin_key,
            json!({"email": "sam@plant.example", "role": "admin"}),
        )
        .await
        .expect(201);
    let delivery = invited.json["data"].to_string();
    assert!(!delivery.contains("/invitations/accept"), "{delivery}");
    assert!(delivery.contains("email only"), "{delivery}");

    // The link as the email would carry it.
    let secret = plantd_auth::generate_secret(plantd_auth::INVITATION_PREFIX);
    app.store
        .create_account_token(plantd_store::NewAccountToken {
            token_hash: &secret.hash,
            kind: plantd_store::AccountTokenKind::Invitation,
            email: "sam@plant.example",
            user_id: Some(&sam),
            org_id: Some(&app.org_id),
            role: Some(Role::Admin),
            created_by: None,
            expires_at: plantd_model::Timestamp::from_millis(
                plantd_model::Timestamp::now().millis() + 3_600_000,
            ),
        })
        .await
        .unwrap();
    let accept = |password: &str| {
        app.call(
            reqwest::Method::POST,
            "/auth/invitations/accept",
            None,
            Some(json!({"token": secret.secret, "password": password})),
        )
    };
    let mut statuses = Vec::new();
    for i in 0..12 {
        statuses.push(accept(&format!("guess-number-{i}")).await.status);
    }
    assert_eq!(&statuses[..10], &[400; 10], "{statuses:?}");
    assert_eq!(&statuses[10..], &[429; 2], "{statuses:?}");
    // The account's logins are locked out as well, even with the right password.
    login(&app, "sam@plant.example", "valves-and-pumps-2")
        .await
        .expect(429);
}

/// Concurrent password checks are bounded (each Argon2id check holds ~19 MiB): 60 concurrent
/// failed logins raise the server's peak memory by far less than 600 MB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_failed_logins_do_not_grow_memory_without_bound() {
    let dir = plantd_test_support::temp_dir("argon2-burst");
    let server = plantd_test_support::ServerProcess::start(
        env!("CARGO_BIN_EXE_plantd"),
        &["--data-dir", dir.to_str().unwrap()],
    );
    let pid = server.child.id();
    let memory = |field: &str| -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse().ok())
            .unwrap()
    };
    let client = plantd_test_support::client();
    // One login first, so what a single check costs is in the baseline.
    let url = format!("{}/v1/auth/login", server.base);
    let attempt = move |i: usize| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            client
                .post(&url)
                .json(&json!({"email": format!("nobody-{i}@plant.example"), "password": "not-the-password"}))
                .send()
                .await
        }
    };
    attempt(0).await.unwrap();
    let before = memory("VmHWM:");
    let mut burst = tokio::task::JoinSet::new();
    for i in 1..=60 {
        burst.spawn(attempt(i));
    }
    let answers = burst.join_all().await;
    let statuses: Vec<u16> = answers
        .into_iter()
        .map(|r| r.unwrap().status().as_u16())
        .collect();
    assert!(
        statuses.iter().all(|s| *s == 401 || *s == 429),
        "{statuses:?}"
    );
    let grown_mb = (memory("VmHWM:") - before) / 1024;
    eprintln!(
        "60 concurrent failed logins: peak memory +{grown_mb} MB (before: {} MB)",
        before / 1024
    );
    assert!(
        grown_mb < 600,
        "60 concurrent failed logins raised peak memory by {grown_mb} MB"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A password-reset request answers without waiting for the mail relay, whether or not the
/// address has an account (the link is made and mailed in the background).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_reset_answers_without_waiting_for_the_mail() {
    // A relay that accepts connections and never says a word.
    let relay = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay_port = relay.local_addr().unwrap().port();
    let connected = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = connected.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = relay.accept().await {
            seen.store(true, std::sync::atomic::Ordering::SeqCst);
            held.push(socket);
        }
    });
    let app = plantd_test_support::spawn_app_with(plantd_app::AppConfig {
        smtp: Some(plantd_alerts::channels::SmtpConfig {
            host: "127.0.0.1".into(),
            port: Some(relay_port),
            tls: plantd_alerts::channels::SmtpTls::None,
            username: None,
            password: None,
            from: "plantd@plant.example".into(),
            ca_file: None,
            timeout_secs: Some(120),
        }),
        ..Default::default()
    })
    .await;
    for email in [OWNER.0, "nobody@plant.example"] {
        let answered = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            app.call(
                reqwest::Method::POST,
                "/auth/password-reset",
                None,
                Some(json!({"email": email})),
            ),
        )
        .await
        .expect("answered without waiting for the relay");
        assert_eq!(answered.status, 202);
    }
    wait_for("the reset email to be attempted", 30, || async {
        connected
            .load(std::sync::atomic::Ordering::SeqCst)
            .then_some(())
    })
    .await;
}

/// The members page follows the API's rule: owners and admins only (a member gets 403 and no
/// navigation entry for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_members_page_is_for_owners_and_admins() {
    let app = spawn_app().await;
    plantd_app::operator::create_user(
        &app.store,
        Some(&app.org_id),
        "mo@plant.example",
        "valves-and-pumps-2",
        Role::Member,
    )
    .await
    .unwrap();
    let member = console_cookie(&app, "mo@plant.example", "valves-and-pumps-2").await;
    let get = |path: &str, cookie: &str| {
        browser()
            .get(format!("{}{path}", root(&app)))
            .header("cookie", cookie)
            .send()
    };
    let page = get("/members", &member).await.unwrap();
    assert_eq!(page.status(), 403);
    let text = page.text().await.unwrap();
    assert!(!text.contains(OWNER.0), "no member is listed: {text}");
    let overview = get("/", &member).await.unwrap().text().await.unwrap();
    assert!(!overview.contains("href=\"/members\""), "{overview}");
    app.get(
        "/organizations/current/members",
        &session(&app, "mo@plant.example", "valves-and-pumps-2").await,
    )
    .await
    .expect(403);
    let owner = console_cookie(&app, OWNER.0, OWNER.1).await;
    let page = get("/members", &owner).await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("mo@plant.example"));
}

/// The login form returns only to a path on this server: tabs and newlines are dropped first,
/// as browsers do, and a newline never makes a 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_returns_only_to_a_path_on_this_server() {
    let app = spawn_app().await;
    for (next, to) in [
        ("/\t/evil.example", "/"),
        ("/\n/evil.example", "/"),
        ("/dashboards\n", "/dashboards"),
        ("/alerts?status=active", "/alerts?status=active"),
    ] {
        let r = browser()
            .post(format!("{}/login", root(&app)))
            .header("origin", root(&app))
            .form(&[("email", OWNER.0), ("password", OWNER.1), ("next", next)])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 303, "{next:?}");
        assert_eq!(r.headers()["location"], to, "{next:?}");
    }
}

/// Error redirects of the authorization endpoint name the issuer (RFC 9207), as successes do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_errors_name_the_issuer() {
    let app = spawn_app().await;
    let registered = app
        .post(
            "/oauth/applications",
            &app.admin_key,
            json!({"name": "app", "application_type": "spa", "redirect_uris": ["http://127.0.0.1:9/cb"], "scopes": ["read:assets"]}),
        )
        .await
        .expect(201);
    let client_id = registered.json["data"]["client_id"].as_str().unwrap();
    let r = browser()
        .get(format!(
            "{}/oauth/authorize?response_type=token&client_id={client_id}&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb&state=s1",
            root(&app)
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let back = reqwest::Url::parse(r.headers()["location"].to_str().unwrap()).unwrap();
    let param = |name: &str| {
        back.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    assert_eq!(param("error").as_deref(), Some("unsupported_response_type"));
    assert_eq!(param("iss"), Some(root(&app)));
    assert_eq!(param("state").as_deref(), Some("s1"));
}

/// Every response says `nosniff`; the API reference has the console's Content-Security-Policy;
/// a server reached over https sends Strict-Transport-Security.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_headers_on_every_response() {
    let app = spawn_app().await;
    for path in [
        "/v1/health",
        "/v1/no-such-route",
        "/login",
        "/v1/docs",
        "/oauth/token",
    ] {
        let r = browser()
            .get(format!("{}{path}", root(&app)))
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["x-content-type-options"], "nosniff", "{path}");
        assert!(r.headers().get("strict-transport-security").is_none());
    }
    let docs = browser()
        .get(format!("{}/v1/docs", root(&app)))
        .send()
        .await
        .unwrap();
    let csp = docs.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert_eq!(docs.headers()["x-frame-options"], "DENY");
    assert!(docs.headers().get("referrer-policy").is_some());
    let https = plantd_test_support::spawn_app_with(plantd_app::AppConfig {
        public_url: Some("https://plant.example.com".into()),
        ..Default::default()
    })
    .await;
    let r = browser()
        .get(format!("http://{}/v1/health", https.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["strict-transport-security"], "max-age=31536000");
}

/// Aggregates never overflow into a value the schema does not allow: the mean of two points of
/// 1.797e308 is 1.797e308; a sum past the range of a double is a 400 naming `aggregation`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregates_of_huge_values_do_not_overflow() {
    let app = spawn_app().await;
    let now = plantd_model::Timestamp::now().millis();
    let at = |ms: i64| plantd_model::Timestamp::from_millis(ms).to_rfc3339();
    app.post(
        "/telemetry",
        &app.admin_key,
        json!({"data": [
            {"asset_id": "Big", "tag_name": "V", "value": 1.797e308, "timestamp": at(now - 60_000)},
            {"asset_id": "Big", "tag_name": "V", "value": 1.797e308, "timestamp": at(now - 30_000)},
        ]}),
    )
    .await
    .expect(200);
    for query in ["aggregation=avg", "aggregation=avg&interval=1h"] {
        let r = app
            .get(&format!("/telemetry?asset_id=Big&{query}"), &app.admin_key)
            .await
            .expect(200);
        let rows = r.json["data"].as_array().unwrap();
        let total: u64 = rows.iter().map(|r| r["count"].as_u64().unwrap()).sum();
        assert_eq!(total, 2, "{}", r.text);
        for row in rows {
            assert_eq!(row["value"].as_f64(), Some(1.797e308), "{}", r.text);
        }
    }
    let sum = app
        .get("/telemetry?asset_id=Big&aggregation=sum", &app.admin_key)
        .await
        .expect(400);
    assert_eq!(sum.json["error"]["details"][0]["field"], "aggregation");
    let max = app
        .get("/telemetry?asset_id=Big&aggregation=max", &app.admin_key)
        .await
        .expect(200);
    assert_eq!(max.json["data"][0]["value"].as_f64(), Some(1.797e308));
}

/// A path that is not text answers in the JSON error envelope (404), never plain text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_paths_answer_in_the_envelope() {
    let app = spawn_app().await;
    for path in [
        "/dashboards/%FF%FE",
        "/alert-rules/%FF",
        "/data-sources/%C3%28/test",
    ] {
        let method = if path.ends_with("/test") {
            reqwest::Method::POST
        } else {
            reqwest::Method::GET
        };
        let r = app
            .call(method, path, Some(&app.admin_key), None)
            .await
            .expect(404);
        assert_eq!(r.json["error"]["code"], "not_found", "{path}: {}", r.text);
    }
}

/// The telemetry CSV export neutralises cells a spreadsheet would run as a formula, as the
/// audit export does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_telemetry_export_neutralises_formulas() {
    let app = spawn_app().await;
    let at = plantd_model::Timestamp::from_millis(plantd_model::Timestamp::now().millis() - 5_000);
    app.post(
        "/telemetry",
        &app.admin_key,
        json!({"data": [
            {"asset_id": "=HYPERLINK(\"x\")", "tag_name": "@SUM(A1)", "value": -1.5, "timestamp": at.to_rfc3339()},
        ]}),
    )
    .await
    .expect(200);
    let r = app
        .get(
            "/telemetry/export?asset_id=%3DHYPERLINK(%22x%22)",
            &app.admin_key,
        )
        .await
        .expect(200);
    let line = r.text.lines().nth(1).unwrap_or_default();
    assert!(
        line.contains("\"'=HYPERLINK(\"\"x\"\")\",'@SUM(A1),-1.5"),
        "{}",
        r.text
    );
}
