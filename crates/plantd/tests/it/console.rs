//! The web console over HTTP: pages need a session and send the browser to the login page and
//! back; the login form (its refusals, its same-origin check, no redirect off-site); every page
//! renders with the console's Content-Security-Policy; embedded files; another organization's
//! dashboard is missing. The browser-driven checks are in `browser.rs`.

use plantd_model::Tier;
use plantd_test_support::{TestApp, spawn_app};
use reqwest::header::{CONTENT_SECURITY_POLICY, CONTENT_TYPE, LOCATION, SET_COOKIE};
use serde_json::json;

use crate::identity::OWNER;

fn root(app: &TestApp) -> String {
    format!("http://{}", app.addr)
}

/// A client that shows redirects instead of following them.
pub(crate) fn browser() -> reqwest::Client {
    plantd_alerts::tls::install_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Posts the login form as a browser on the server's origin would; the response as it came.
async fn login_form(app: &TestApp, email: &str, password: &str, next: &str) -> reqwest::Response {
    browser()
        .post(format!("{}/login", root(app)))
        .header("origin", root(app))
        .form(&[("email", email), ("password", password), ("next", next)])
        .send()
        .await
        .unwrap()
}

/// The session cookie (`plantd_session=...`) of a successful console login.
pub async fn console_cookie(app: &TestApp, email: &str, password: &str) -> String {
    let r = login_form(app, email, password, "/").await;
    assert_eq!(r.status(), 303);
    r.headers()[SET_COOKIE]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string()
}

async fn page(
    app: &TestApp,
    cookie: &str,
    path: &str,
) -> (u16, String, reqwest::header::HeaderMap) {
    let r = browser()
        .get(format!("{}{path}", root(app)))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, r.text().await.unwrap(), headers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_need_a_session_and_login_returns_to_them() {
    let app = spawn_app().await;
    // Without a session: to the login page, remembering where the person was going.
    let r = browser()
        .get(format!("{}/alerts?status=active", root(&app)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(
        r.headers()[LOCATION],
        "/login?next=%2Falerts%3Fstatus%3Dactive"
    );
    let (status, html, headers) = page(&app, "", "/login?next=%2Falerts").await;
    assert_eq!(status, 200);
    assert!(html.contains("name=\"next\" value=\"/alerts\""), "{html}");
    assert!(html.contains("<label for=\"email\">Email</label>"));
    assert!(
        headers[CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );

    // A wrong password: the form again, with the reason, and no cookie.
    let r = login_form(&app, OWNER.0, "wrong-password-1", "/alerts").await;
    assert_eq!(r.status(), 401);
    assert!(r.headers().get(SET_COOKIE).is_none());
    let html = r.text().await.unwrap();
    assert!(html.contains("invalid email or password"), "{html}");
    assert!(
        html.contains("value=\"owner@example.com\""),
        "the email stays filled in"
    );

    // The right one: a session cookie and back to the page asked for.
    let r = login_form(&app, OWNER.0, OWNER.1, "/alerts").await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()[LOCATION], "/alerts");
    let cookie = r.headers()[SET_COOKIE].to_str().unwrap();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"));
    // `next` never leads off the site.
    for evil in [
        "//evil.example/x",
        "https://evil.example/",
        "/\\evil.example",
    ] {
        let r = login_form(&app, OWNER.0, OWNER.1, evil).await;
        assert_eq!(r.headers()[LOCATION], "/", "{evil}");
    }
    // A login form posted from another site is refused (CSRF).
    let r = browser()
        .post(format!("{}/login", root(&app)))
        .header("origin", "https://evil.example")
        .form(&[("email", OWNER.0), ("password", OWNER.1)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // Logging out ends the session: pages send the browser to the login page again.
    let cookie = console_cookie(&app, OWNER.0, OWNER.1).await;
    assert_eq!(page(&app, &cookie, "/").await.0, 200);
    let r = browser()
        .post(format!("{}/logout", root(&app)))
        .header("cookie", &cookie)
        .header("origin", root(&app))
        .form(&[("x", "")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert!(
        r.headers()[SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    assert_eq!(page(&app, &cookie, "/").await.0, 303);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_renders_what_the_organization_has() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let ds = app
        .post("/data-sources", k, json!({"name": "Line 1 PLC", "type": "modbus", "enabled": false, "config": {"host": "plc.invalid"}}))
        .await
        .expect(201)
        .id();
    app.post("/alert-rules", k, json!({"name": "Vibration <high>", "severity": "critical", "data_source_id": ds,
        "condition": {"tag_name": "Vibration_X", "operator": "gt", "value": 5.0, "duration_seconds": 0}}))
        .await
        .expect(201);
    let now = plantd_model::Timestamp::now().to_rfc3339();
    app.post(
        "/telemetry",
        k,
        json!({"data_source_id": ds, "data": [
        {"asset_id": "Pump_01", "tag_name": "Vibration_X", "value": 7.5, "timestamp": now}]}),
    )
    .await
    .expect(200);
    let dash = app
        .post("/dashboards", k, json!({"name": "Pump station"}))
        .await
        .expect(201)
        .id();
    let product = app
        .post("/products", k, json!({"name": "Edge Gateway", "sku": "HUB-PRO", "price": 499, "license_type": "subscription"}))
        .await
        .expect(201);
    app.post(
        "/licenses",
        k,
        json!({"product_id": product.json["data"]["id"], "validity_days": 30,
        "max_activations": 2, "customer_email": "ops@plant.example"}),
    )
    .await
    .expect(201);
    let cookie = console_cookie(&app, OWNER.0, OWNER.1).await;
    for (path, expect) in [
        (
            "/",
            vec![
                "Open alerts (1)",
                "data-asset=\"Pump_01\"",
                "data-tag=\"Vibration_X\"",
                "7.500",
                "▲ critical",
            ],
        ),
        (
            "/dashboards",
            vec!["Pump station", "data-action=\"/v1/dashboards\"", "Import"],
        ),
        (
            &format!("/dashboards/{dash}"),
            vec![
                &format!("data-dashboard-id=\"{dash}\""),
                "/assets/dashboard.js",
                "/assets/vendor/uplot/uPlot.iife.min.js",
            ],
        ),
        (
            &format!("/dashboards/{dash}/edit"),
            vec![
                "/assets/dashboard_edit.js",
                "<option value=\"Pump_01\">",
                "id=\"tags-Pump_01\"",
            ],
        ),
        (
            "/alerts",
            vec![
                "id=\"alerts-page\"",
                "Vibration &lt;high&gt;",
                "Acknowledge",
                "Resolve",
            ],
        ),
        (
            "/alert-rules",
            vec![
                "Vibration &lt;high&gt;",
                "Disable",
                "name=\"condition.tag_name\"",
            ],
        ),
        (
            "/data-sources",
            vec![
                "Line 1 PLC",
                "○ disabled",
                "data-action=\"/v1/data-sources\"",
                "name=\"config.endpoint\"",
            ],
        ),
        (
            "/api-keys",
            vec!["test admin", "New key", "value=\"read:telemetry\""],
        ),
        ("/members", vec!["owner@example.com", "Send invitation"]),
        (
            "/licenses",
            vec![
                "Edge Gateway",
                "HUB-PRO",
                "ops@plant.example",
                "0 / 2",
                "pdl_",
                "Suspend",
                "Renew",
                "Issue license",
            ],
        ),
    ] {
        let (status, html, headers) = page(&app, &cookie, path).await;
        assert_eq!(status, 200, "{path}: {html}");
        for e in expect {
            assert!(html.contains(e), "{path} lacks {e}: {html}");
        }
        assert!(!html.contains("<script>"), "{path}: no inline script");
        assert_eq!(headers["x-frame-options"], "DENY");
    }
    // Another organization's dashboard is missing, not shown.
    let (_, other) = app.other_org("Other plant", Tier::Professional).await;
    let theirs = app
        .post("/dashboards", &other, json!({"name": "Theirs"}))
        .await
        .expect(201)
        .id();
    let (status, html, _) = page(&app, &cookie, &format!("/dashboards/{theirs}")).await;
    assert_eq!(status, 404);
    assert!(!html.contains("Theirs"));
    assert_eq!(
        page(&app, &cookie, &format!("/dashboards/{theirs}/edit"))
            .await
            .0,
        404
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_files_are_served_with_their_types() {
    let app = spawn_app().await;
    for (path, kind) in [
        ("/assets/console.css", "text/css"),
        ("/assets/console.js", "text/javascript"),
        ("/assets/dashboard.js", "text/javascript"),
        ("/assets/dashboard_edit.js", "text/javascript"),
        ("/assets/vendor/uplot/uPlot.iife.min.js", "text/javascript"),
        ("/assets/vendor/uplot/LICENSE", "text/plain"),
    ] {
        let r = browser()
            .get(format!("{}{path}", root(&app)))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert!(
            r.headers()[CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with(kind),
            "{path}"
        );
        assert!(r.bytes().await.unwrap().len() > 100, "{path} has content");
    }
    let r = browser()
        .get(format!("{}/assets/../Cargo.toml", root(&app)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    app.stop().await;
}

/// Console logins (refused ones too, without the password) and logouts are audited like the
/// API's: a failed login of a known account in its organization, naming the user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_logins_and_logouts_are_audited() {
    let app = spawn_app().await;
    let wrong = login_form(&app, OWNER.0, "not-the-password-1", "/").await;
    assert_eq!(wrong.status(), 401);
    let cookie = console_cookie(&app, OWNER.0, OWNER.1).await;
    let out = browser()
        .post(format!("{}/logout", root(&app)))
        .header("origin", root(&app))
        .header("cookie", &cookie)
        .form(&[("x", "")])
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 303);
    let logs = app
        .get(
            "/audit/logs?categories=sessions&per_page=100",
            &app.admin_key,
        )
        .await
        .expect(200);
    let rows: Vec<_> = logs.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|r| {
            assert!(!r.to_string().contains("not-the-password-1"), "{r}");
            (
                r["event_type"].as_str().unwrap().to_string(),
                r["outcome"].as_str().unwrap().to_string(),
                r["status_code"].as_u64().unwrap(),
                r["path"].as_str().unwrap().to_string(),
                r["user_id"].as_str().map(str::to_string),
            )
        })
        .collect();
    let owner = app
        .get("/organizations/current/members", &app.admin_key)
        .await
        .expect(200)
        .json["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["email"] == OWNER.0)
        .map(|m| m["id"].as_str().unwrap().to_string());
    assert_eq!(
        rows,
        [
            (
                "session.login".into(),
                "failure".into(),
                401,
                "/login".into(),
                owner.clone()
            ),
            (
                "session.login".into(),
                "success".into(),
                303,
                "/login".into(),
                owner.clone()
            ),
            (
                "session.logout".into(),
                "success".into(),
                303,
                "/logout".into(),
                owner
            ),
        ]
    );
}

/// At plant scale the overview sends one page of tags, alarms first and then stale values,
/// with search, an abnormal-only filter and paging; it follows live only what it shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_of_a_large_plant_is_searched_and_paged() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let now = plantd_model::Timestamp::now();
    let old = plantd_model::Timestamp::from_millis(now.millis() - 10 * 60_000);
    // 300 assets of 10 tags; Unit_250 / T7 has not been confirmed for 10 minutes (stale).
    for chunk in 0..3 {
        let mut data = Vec::new();
        for a in chunk * 100..(chunk + 1) * 100 {
            for t in 0..10 {
                let at = if (a, t) == (250, 7) { old } else { now };
                data.push(
                    json!({"asset_id": format!("Unit_{a:03}"), "tag_name": format!("T{t}"),
                    "value": a as f64 + t as f64 / 10.0, "timestamp": at.to_rfc3339()}),
                );
            }
        }
        app.post("/telemetry", k, json!({ "data": data }))
            .await
            .expect(200);
    }
    app.post(
        "/alerts",
        k,
        json!({"title": "Seal leak", "severity": "warning",
        "asset_id": "Unit_150", "tag_name": "T3"}),
    )
    .await
    .expect(201);
    let cookie = console_cookie(&app, OWNER.0, OWNER.1).await;
    let rows = |html: &str| -> Vec<(String, String)> {
        html.split("<tr data-asset=\"")
            .skip(1)
            .map(|s| {
                let asset = s.split('"').next().unwrap().to_string();
                let tag = s.split("data-tag=\"").nth(1).unwrap();
                (asset, tag.split('"').next().unwrap().to_string())
            })
            .collect()
    };

    let (status, html, _) = page(&app, &cookie, "/").await;
    assert_eq!(status, 200);
    let first = rows(&html);
    assert_eq!(first.len(), 200, "one page of rows");
    assert_eq!(
        first[0],
        ("Unit_150".into(), "T3".into()),
        "the alarm first"
    );
    assert_eq!(
        first[10],
        ("Unit_250".into(), "T7".into()),
        "then the stale asset"
    );
    assert!(html.contains("Page 1 of 15"), "{html}");
    assert!(html.contains("300 assets") && html.contains("3000 tags"));
    assert!(
        !html.contains("data-complete"),
        "a partial page follows its series"
    );
    assert!(html.len() < 300_000, "{} bytes", html.len());

    let (_, html, _) = page(&app, &cookie, "/?q=unit_042").await;
    let found = rows(&html);
    assert_eq!(found.len(), 10);
    assert!(found.iter().all(|(a, _)| a == "Unit_042"));
    let (_, html, _) = page(&app, &cookie, "/?q=T3").await;
    assert!(html.contains("of 300 matching") && html.contains("Page 1 of 2"));
    assert!(rows(&html).iter().all(|(_, t)| t == "T3"));
    let (_, html, _) = page(&app, &cookie, "/?abnormal=1").await;
    assert_eq!(
        rows(&html),
        [
            ("Unit_150".to_string(), "T3".to_string()),
            ("Unit_250".to_string(), "T7".to_string())
        ]
    );
    let (_, html, _) = page(&app, &cookie, "/?page=15").await;
    let last = rows(&html);
    assert_eq!(last.len(), 200);
    assert_eq!(last.last().unwrap(), &("Unit_299".into(), "T9".into()));
    assert!(html.contains("(continued)") || last[0].1 == "T0");
    let (_, beyond, _) = page(&app, &cookie, "/?page=99").await;
    assert!(
        beyond.contains("Page 15 of 15"),
        "a page past the end shows the last"
    );
    for odd in ["/?page=-1&q=%00", "/?page=x&abnormal=", "/?q=%FF%FE"] {
        assert_eq!(page(&app, &cookie, odd).await.0, 200, "{odd}");
    }
    let (_, none, _) = page(&app, &cookie, "/?q=nothing-like-this").await;
    assert!(none.contains("No tag matches."));

    // Many open alerts: the overview shows the newest, the alerts page pages them.
    // (POST /alerts allows 100 a minute per key.)
    let second = app.key(&[plantd_model::Scope::WriteAlerts]).await;
    for i in 0..120 {
        let k = if i < 60 { k } else { second.as_str() };
        app.post(
            "/alerts",
            k,
            json!({"title": format!("Check {i}"), "severity": "info",
            "asset_id": format!("Unit_{i:03}")}),
        )
        .await
        .expect(201);
    }
    let (_, html, _) = page(&app, &cookie, "/").await;
    assert!(html.contains("Open alerts (121)") && html.contains("all open alerts"));
    let (_, html, _) = page(&app, &cookie, "/alerts?severity=info").await;
    assert!(
        html.contains("Page 1 of 2") && html.contains("120 alerts"),
        "{html}"
    );
    let (_, html, _) = page(&app, &cookie, "/alerts?severity=info&page=2").await;
    assert_eq!(html.matches("data-alert-id=").count(), 20);
    assert!(html.contains("Check 0"), "the oldest on the last page");

    // A plant that fits on one page is followed whole (new series get their rows).
    let small = spawn_app().await;
    small
        .post("/telemetry", small.admin_key.as_str(), json!({"data": [
            {"asset_id": "Pump_01", "tag_name": "Flow", "value": 1.0, "timestamp": now.to_rfc3339()}]}))
        .await
        .expect(200);
    let cookie = console_cookie(&small, OWNER.0, OWNER.1).await;
    let (_, html, _) = page(&small, &cookie, "/").await;
    assert!(html.contains("data-complete=\"true\""));
}
