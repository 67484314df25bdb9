//! People signing in: login sessions (token and cookie), roles, CSRF, throttled failures,
//! invitations by email and password reset, on both backends.

use plantd_test_support::{Reply, SmtpSink, TestApp, spawn_app, spawn_app_with};
use serde_json::{Value, json};

pub const OWNER: (&str, &str) = ("owner@example.com", "station-7-valve");

/// Logs in through the API; the reply as it came.
pub async fn login(app: &TestApp, email: &str, password: &str) -> Reply {
    app.call(
        reqwest::Method::POST,
        "/auth/login",
        None,
        Some(json!({"email": email, "password": password})),
    )
    .await
}

/// A session token of `email`.
pub async fn session(app: &TestApp, email: &str, password: &str) -> String {
    let r = login(app, email, password).await.expect(200);
    r.json["data"]["session_token"]
        .as_str()
        .unwrap()
        .to_string()
}

fn root(app: &TestApp) -> String {
    format!("http://{}", app.addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_log_in_list_end_and_log_out() {
    let app = spawn_app().await;
    let r = login(&app, OWNER.0, OWNER.1).await.expect(200);
    let token = r.json["data"]["session_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(token.starts_with("pds_"));
    assert_eq!(r.json["data"]["user"]["role"], "owner");
    assert_eq!(r.json["data"]["user"]["organization_id"], app.org_id);
    let cookie = r.header("set-cookie").unwrap().to_string();
    for part in ["plantd_session=pds_", "HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(cookie.contains(part), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: no Secure flag");

    // The session acts as its user, with the owner's scopes.
    let me = app.get("/users/me", &token).await.expect(200);
    assert_eq!(me.json["data"]["email"], OWNER.0);
    app.get("/api-keys", &token).await.expect(200);

    let second = session(&app, OWNER.0, OWNER.1).await;
    let list = app.get("/users/me/sessions", &token).await.expect(200);
    let sessions = list.json["data"].as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    assert_eq!(sessions.iter().filter(|s| s["current"] == true).count(), 1);
    let other_id = sessions.iter().find(|s| s["current"] == false).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.delete(&format!("/users/me/sessions/{other_id}"), &token)
        .await
        .expect(204);
    let gone = app.get("/users/me", &second).await.expect(401);
    assert_eq!(gone.code(), "authentication_error");
    app.delete(&format!("/users/me/sessions/{other_id}"), &token)
        .await
        .expect(404);

    // Logout ends the session and clears the cookie; an API key cannot log out.
    let out = app
        .post("/auth/logout", &token, json!({}))
        .await
        .expect(204);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    app.get("/users/me", &token).await.expect(401);
    assert_eq!(
        app.post("/auth/logout", &app.admin_key, json!({}))
            .await
            .expect(409)
            .code(),
        "conflict"
    );

    // A wrong password and an unknown email get the same answer.
    let wrong = login(&app, OWNER.0, "not-the-password").await.expect(401);
    let unknown = login(&app, "nobody@example.com", "not-the-password")
        .await
        .expect(401);
    assert_eq!(wrong.json, unknown.json);
    assert_eq!(wrong.json["error"]["message"], "invalid email or password");
    let missing = login(&app, "", "").await.expect(400);
    assert_eq!(missing.json["error"]["details"][0]["field"], "email");

    // A password change ends the user's other sessions, not the one that made it.
    let a = session(&app, OWNER.0, OWNER.1).await;
    let b = session(&app, OWNER.0, OWNER.1).await;
    app.post(
        "/users/me/password",
        &a,
        json!({"current_password": OWNER.1, "new_password": "correct-horse-pump-9"}),
    )
    .await
    .expect(204);
    app.get("/users/me", &a).await.expect(200);
    app.get("/users/me", &b).await.expect(401);
    let common = app
        .post(
            "/users/me/password",
            &a,
            json!({"current_password": "correct-horse-pump-9", "new_password": "password1234"}),
        )
        .await
        .expect(400);
    assert!(
        common.json["error"]["details"][0]["message"]
            .as_str()
            .unwrap()
            .contains("common")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_cookie_works_and_is_guarded_against_csrf() {
    let app = spawn_app().await;
    let token = session(&app, OWNER.0, OWNER.1).await;
    let client = plantd_test_support::client();
    let cookie = format!("plantd_session={token}");
    let call = |method: reqwest::Method, path: &str, origin: Option<&str>| {
        let mut req = client
            .request(method, format!("{}{path}", app.base))
            .header("cookie", &cookie)
            .json(&json!({"name": "Renamed by cookie"}));
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        req.send()
    };
    let r = call(reqwest::Method::GET, "/users/me", None).await.unwrap();
    assert_eq!(r.status(), 200, "reads need no Origin");
    let r = call(reqwest::Method::PUT, "/users/me", None).await.unwrap();
    assert_eq!(r.status(), 403, "a mutation without Origin is refused");
    let r = call(
        reqwest::Method::PUT,
        "/users/me",
        Some("http://evil.example"),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 403);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "authorization_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cross-site")
    );
    let r = call(reqwest::Method::PUT, "/users/me", Some(&root(&app)))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The same token as a bearer needs no Origin.
    app.put("/users/me", &token, json!({"name": "Bearer"}))
        .await
        .expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_are_throttled_per_account_and_per_address() {
    let app = spawn_app_with(plantd_app::AppConfig {
        login_failures_per_account: 3,
        login_failures_per_client: 5,
        ..Default::default()
    })
    .await;
    for _ in 0..3 {
        login(&app, OWNER.0, "wrong-password-x").await.expect(401);
    }
    let r = login(&app, OWNER.0, OWNER.1).await.expect(429);
    assert_eq!(r.code(), "rate_limited");
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=900).contains(&retry), "{retry}");
    // Unknown accounts count against the address too, and then everyone from it waits.
    login(&app, "ghost@example.com", "wrong-password-x")
        .await
        .expect(401);
    login(&app, "ghost@example.com", "wrong-password-x")
        .await
        .expect(401);
    let r = login(&app, "ghost2@example.com", "wrong-password-x")
        .await
        .expect(429);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("address")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invitations_set_passwords_and_members_act_with_their_role() {
    let app = spawn_app().await;
    let owner = session(&app, OWNER.0, OWNER.1).await;
    // No relay configured: the admin gets the link.
    let r = app
        .post(
            "/organizations/current/members/invite",
            &owner,
            json!({"email": "Mia@Plant.example", "role": "member", "name": "Mia"}),
        )
        .await
        .expect(201);
    let inv = &r.json["data"];
    assert_eq!(inv["status"], "invited");
    assert_eq!(inv["invitation"]["email_sent"], false);
    assert!(
        inv["invitation"]["email_error"]
            .as_str()
            .unwrap()
            .contains("smtp")
    );
    let url = inv["invitation"]["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("{}/invitations/accept?token=pdi_", root(&app))),
        "{url}"
    );
    let token = url.split("token=").nth(1).unwrap().to_string();
    // The link's page is served.
    let page = plantd_test_support::client().get(url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("mia@plant.example"));
    // Invited, not yet able to log in.
    login(&app, "mia@plant.example", "whatever-it-is")
        .await
        .expect(401);

    // Password rules name the field; a bad token too; neither spends the token.
    for (password, needle) in [
        ("short", "12"),
        ("qwertyuiop123", "common"),
        ("mia@plant.example", "email"),
    ] {
        let r = app
            .call(
                reqwest::Method::POST,
                "/auth/invitations/accept",
                None,
                Some(json!({"token": token, "password": password})),
            )
            .await
            .expect(400);
        assert_eq!(r.json["error"]["details"][0]["field"], "password");
        assert!(r.text.contains(needle), "{password}: {}", r.text);
    }
    let r = app
        .call(
            reqwest::Method::POST,
            "/auth/invitations/accept",
            None,
            Some(json!({"token": "pdi_made-up", "password": "a-fine-long-password"})),
        )
        .await
        .expect(400);
    assert_eq!(r.json["error"]["details"][0]["field"], "token");
    let ok = app
        .call(
            reqwest::Method::POST,
            "/auth/invitations/accept",
            None,
            Some(json!({"token": token, "password": "conveyor-belt-42", "name": "Mia K."})),
        )
        .await
        .expect(200);
    assert_eq!(ok.json["data"]["organization_id"], app.org_id);
    assert_eq!(ok.json["data"]["name"], "Mia K.");
    // Single use.
    app.call(
        reqwest::Method::POST,
        "/auth/invitations/accept",
        None,
        Some(json!({"token": token, "password": "conveyor-belt-42"})),
    )
    .await
    .expect(400);
    let members = app
        .get("/organizations/current/members", &owner)
        .await
        .expect(200);
    let mia = members.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["email"] == "mia@plant.example")
        .unwrap()
        .clone();
    assert_eq!(mia["status"], "active");

    // A member reads and acknowledges, but cannot administer or send telemetry.
    let mia = session(&app, "mia@plant.example", "conveyor-belt-42").await;
    let me = login(&app, "mia@plant.example", "conveyor-belt-42")
        .await
        .expect(200);
    assert_eq!(me.json["data"]["user"]["role"], "member");
    app.get("/data-sources", &mia).await.expect(200);
    app.get("/alerts", &mia).await.expect(200);
    let r = app.get("/api-keys", &mia).await.expect(403);
    assert_eq!(r.code(), "authorization_error");
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("role")
    );
    app.post("/telemetry", &mia, json!({"data": []}))
        .await
        .expect(403);
    app.post(
        "/organizations/current/members/invite",
        &mia,
        json!({"email": "x@plant.example"}),
    )
    .await
    .expect(403);

    // Only an owner invites an owner.
    plantd_app::operator::create_user(
        &app.store,
        Some(&app.org_id),
        "admin@plant.example",
        "valves-and-pumps-2",
        plantd_model::org::Role::Admin,
    )
    .await
    .unwrap();
    let admin = session(&app, "admin@plant.example", "valves-and-pumps-2").await;
    let r = app
        .post(
            "/organizations/current/members/invite",
            &admin,
            json!({"email": "boss@plant.example", "role": "owner"}),
        )
        .await
        .expect(403);
    assert!(r.text.contains("owner"));
    app.post(
        "/organizations/current/members/invite",
        &owner,
        json!({"email": "boss@plant.example", "role": "owner"}),
    )
    .await
    .expect(201);

    // Removing a member ends their sessions' access at once.
    let mia_id = members.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["email"] == "mia@plant.example")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.delete(&format!("/organizations/current/members/{mia_id}"), &owner)
        .await
        .expect(204);
    app.get("/data-sources", &mia).await.expect(401);
}

/// Invitation and reset emails through a real SMTP server (aiosmtpd with STARTTLS and AUTH).
/// Needs `PLANTD_TEST_PYTHON_SMTP`; skipped where absent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invitation_and_password_reset_emails() {
    let Some(python) = plantd_test_support::peer(
        "PLANTD_TEST_PYTHON_SMTP",
        "to a python3 with aiosmtpd installed",
    ) else {
        return;
    };
    let sink = SmtpSink::start(&python, false);
    let app = spawn_app_with(plantd_app::AppConfig {
        smtp: Some(sink.config.clone()),
        ..Default::default()
    })
    .await;
    let r = app
        .post(
            "/organizations/current/members/invite",
            &app.admin_key,
            json!({"email": "ops@plant.example"}),
        )
        .await
        .expect(201);
    assert_eq!(
        r.json["data"]["invitation"]["email_sent"], true,
        "{}",
        r.text
    );
    assert!(
        r.json["data"]["invitation"].get("url").is_none(),
        "the link goes by email only"
    );
    let mail = sink.messages();
    assert_eq!(mail.len(), 1);
    assert_eq!(mail[0]["rcpt_tos"], json!(["ops@plant.example"]));
    let text = mail[0]["data"]
        .as_str()
        .unwrap()
        .replace("=\r\n", "")
        .replace("=\n", "")
        .replace("=3D", "=");
    let token = link_token(&text, "pdi_");
    app.call(
        reqwest::Method::POST,
        "/auth/invitations/accept",
        None,
        Some(json!({"token": token, "password": "boiler-room-key-7"})),
    )
    .await
    .expect(200);
    let old = session(&app, "ops@plant.example", "boiler-room-key-7").await;

    // Reset: always 202; a link only for a real account.
    for email in ["ops@plant.example", "nobody@plant.example"] {
        let r = app
            .call(
                reqwest::Method::POST,
                "/auth/password-reset",
                None,
                Some(json!({"email": email})),
            )
            .await;
        assert_eq!(r.status, 202, "{}", r.text);
    }
    // The link is mailed in the background (the answer does not wait for the relay).
    plantd_test_support::wait_for("the reset email", 30, || async {
        (sink.messages().len() >= 2).then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let mail = sink.messages();
    assert_eq!(mail.len(), 2, "no email to an address without an account");
    let text = mail[1]["data"]
        .as_str()
        .unwrap()
        .replace("=\r\n", "")
        .replace("=\n", "")
        .replace("=3D", "=");
    let token = link_token(&text, "pdp_");
    let bad = app
        .call(
            reqwest::Method::POST,
            "/auth/password-reset/confirm",
            None,
            Some(json!({"token": token, "password": "qwertyuiop123"})),
        )
        .await
        .expect(400);
    assert_eq!(bad.json["error"]["details"][0]["field"], "password");
    app.call(
        reqwest::Method::POST,
        "/auth/password-reset/confirm",
        None,
        Some(json!({"token": token, "password": "new-boiler-key-8"})),
    )
    .await
    .expect(204);
    app.get("/users/me", &old).await.expect(401);
    login(&app, "ops@plant.example", "boiler-room-key-7")
        .await
        .expect(401);
    session(&app, "ops@plant.example", "new-boiler-key-8").await;
    app.call(
        reqwest::Method::POST,
        "/auth/password-reset/confirm",
        None,
        Some(json!({"token": token, "password": "another-boiler-key-9"})),
    )
    .await
    .expect(400);
}

fn link_token(text: &str, prefix: &str) -> String {
    let start = text
        .find(&format!("token={prefix}"))
        .expect("a link with a token")
        + "token=".len();
    text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}
