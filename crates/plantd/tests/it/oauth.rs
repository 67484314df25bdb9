//! The OAuth 2.0 authorization server: applications, the code flow with PKCE driven as a
//! browser would (login and consent forms), client credentials, rotating refresh tokens,
//! revocation, introspection, RS256 access tokens accepted by the API with their scopes, the
//! second error shape, signing-key rotation, and tenancy; on both backends.

use plantd_model::Tier;
use plantd_test_support::{TestApp, spawn_app};
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use serde_json::{Value, json};

use crate::console::browser;
use crate::identity::OWNER;

const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
const CALLBACK: &str = "http://127.0.0.1:9/callback";

fn root(app: &TestApp) -> String {
    format!("http://{}", app.addr)
}

async fn register(app: &TestApp, key: &str, kind: &str, scopes: Value) -> Value {
    app.post(
        "/oauth/applications",
        key,
        json!({"name": format!("{kind} app"), "redirect_uris": [CALLBACK], "application_type": kind, "scopes": scopes}),
    )
    .await
    .expect(201)
    .json["data"]
    .clone()
}

/// POSTs a form to a root endpoint: (status, headers, JSON body).
async fn form(
    app: &TestApp,
    path: &str,
    basic: Option<(&str, &str)>,
    params: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut req = browser().post(format!("{}{path}", root(app))).form(params);
    if let Some((id, secret)) = basic {
        req = req.basic_auth(id, Some(secret));
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let text = r.text().await.unwrap();
    (
        status,
        headers,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

/// Runs the browser part of the code flow: the login page, the login form, the consent page
/// and the approval. Returns where the server sends the browser at the end.
async fn authorize(app: &TestApp, query: &str, approve: bool) -> String {
    let b = browser();
    let url = format!("{}/oauth/authorize?{query}", root(app));
    let page = b.get(&url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("name=\"password\"") && html.contains("Log in"),
        "{html}"
    );
    let mut fields: Vec<(String, String)> = hidden_fields(&html);
    fields.push(("email".into(), OWNER.0.into()));
    fields.push(("password".into(), OWNER.1.into()));
    fields.push(("action".into(), "login".into()));
    let r = b
        .post(format!("{}/oauth/authorize", root(app)))
        .header(ORIGIN, root(app))
        .form(&fields)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303, "{}", r.text().await.unwrap());
    let cookie = r.headers()[SET_COOKIE]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let back = r.headers()[LOCATION].to_str().unwrap().to_string();
    assert!(back.starts_with("/oauth/authorize?"));
    let consent = b
        .get(format!("{}{back}", root(app)))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    let html = consent.text().await.unwrap();
    assert!(html.contains("Allow") && html.contains("app"), "{html}");
    let mut fields = hidden_fields(&html);
    fields.push((
        "action".into(),
        if approve { "approve" } else { "deny" }.into(),
    ));
    // Without the Origin of the server, the decision is refused (CSRF).
    let forged = b
        .post(format!("{}/oauth/authorize", root(app)))
        .header(COOKIE, &cookie)
        .header(ORIGIN, "http://evil.example")
        .form(&fields)
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    let r = b
        .post(format!("{}/oauth/authorize", root(app)))
        .header(COOKIE, &cookie)
        .header(ORIGIN, root(app))
        .form(&fields)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    r.headers()[LOCATION].to_str().unwrap().to_string()
}

fn hidden_fields(html: &str) -> Vec<(String, String)> {
    html.split("<input type=\"hidden\" ")
        .skip(1)
        .map(|part| {
            let attr = |name: &str| {
                let start = part.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
                let end = start + part[start..].find('"').unwrap();
                part[start..end]
                    .replace("&amp;", "&")
                    .replace("&quot;", "\"")
            };
            (attr("name"), attr("value"))
        })
        .filter(|(name, _)| name != "action")
        .collect()
}

/// Exchanges a public client's authorization code: (status, body).
async fn exchange(
    app: &TestApp,
    client_id: &str,
    code: &str,
    redirect_uri: &str,
    verifier: Option<&str>,
) -> (u16, Value) {
    let mut params = vec![
        ("grant_type", "authorization_code"),
        ("client_id", client_id),
        ("code", code),
        ("redirect_uri", redirect_uri),
    ];
    if let Some(v) = verifier {
        params.push(("code_verifier", v));
    }
    let (status, _, body) = form(app, "/oauth/token", None, &params).await;
    (status, body)
}

/// Refreshes a public client's grant: (status, body).
async fn refresh(app: &TestApp, client_id: &str, token: &str, scope: Option<&str>) -> (u16, Value) {
    let mut params = vec![
        ("grant_type", "refresh_token"),
        ("client_id", client_id),
        ("refresh_token", token),
    ];
    if let Some(s) = scope {
        params.push(("scope", s));
    }
    let (status, _, body) = form(app, "/oauth/token", None, &params).await;
    (status, body)
}

/// A query parameter of a URL, decoded.
fn query_param(url: &str, name: &str) -> Option<String> {
    let url = reqwest::Url::parse(url).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applications_are_registered_validated_and_rotated() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let web = register(&app, k, "web", json!(["read:assets", "read:telemetry"])).await;
    assert!(web["client_id"].as_str().unwrap().starts_with("pdc-"));
    let secret = web["client_secret"].as_str().unwrap();
    assert!(secret.starts_with("pdcs_"));
    let spa = register(&app, k, "spa", json!(["read:assets"])).await;
    assert!(
        spa.get("client_secret").is_none(),
        "public clients have no secret"
    );
    let id = web["id"].as_str().unwrap();
    let got = app
        .get(&format!("/oauth/applications/{id}"), k)
        .await
        .expect(200);
    assert!(
        got.json["data"].get("client_secret").is_none(),
        "shown once"
    );
    let list = app.get("/oauth/applications", k).await.expect(200);
    assert_eq!(list.json["meta"]["total"], 2);

    for (body, field) in [
        (
            json!({"name": "x", "redirect_uris": ["http://example.com/cb"], "application_type": "web"}),
            "redirect_uris[0]",
        ),
        (
            json!({"name": "x", "redirect_uris": ["https://example.com/cb#frag"], "application_type": "web"}),
            "redirect_uris[0]",
        ),
        (
            json!({"name": "x", "redirect_uris": [], "application_type": "spa"}),
            "redirect_uris",
        ),
        (
            json!({"name": "x", "redirect_uris": ["com.example.app:/cb"], "application_type": "spa"}),
            "redirect_uris[0]",
        ),
        (
            json!({"name": "", "redirect_uris": ["https://a.example/cb"], "application_type": "web"}),
            "name",
        ),
        (
            json!({"name": "x", "redirect_uris": ["https://a.example/cb"], "application_type": "desktop"}),
            "application_type",
        ),
        (
            json!({"name": "x", "redirect_uris": ["https://a.example/cb"], "application_type": "web", "scopes": ["root"]}),
            "scopes[0]",
        ),
    ] {
        let r = app.post("/oauth/applications", k, body).await.expect(400);
        assert_eq!(r.json["error"]["details"][0]["field"], field, "{}", r.text);
    }
    register(&app, k, "mobile", json!(["read:assets"])).await;
    app.post("/oauth/applications", k,
        json!({"name": "native", "redirect_uris": ["com.example.plant:/cb"], "application_type": "mobile"}))
        .await
        .expect(201);

    let updated = app
        .put(
            &format!("/oauth/applications/{id}"),
            k,
            json!({"name": "Historian", "scopes": ["read:telemetry"]}),
        )
        .await
        .expect(200);
    assert_eq!(updated.json["data"]["scopes"], json!(["read:telemetry"]));
    app.put(
        &format!("/oauth/applications/{id}"),
        k,
        json!({"application_type": "spa"}),
    )
    .await
    .expect(400);

    // The old secret stops working when rotated.
    let cid = web["client_id"].as_str().unwrap();
    let (s, _, _) = form(
        &app,
        "/oauth/token",
        Some((cid, secret)),
        &[("grant_type", "client_credentials")],
    )
    .await;
    assert_eq!(s, 200);
    let rotated = app
        .post(
            &format!("/oauth/applications/{id}/rotate-secret"),
            k,
            json!({}),
        )
        .await
        .expect(200);
    let new_secret = rotated.json["data"]["client_secret"].as_str().unwrap();
    let (s, h, body) = form(
        &app,
        "/oauth/token",
        Some((cid, secret)),
        &[("grant_type", "client_credentials")],
    )
    .await;
    assert_eq!((s, body["error"].as_str()), (401, Some("invalid_client")));
    assert!(h["www-authenticate"].to_str().unwrap().starts_with("Basic"));
    let (s, _, _) = form(
        &app,
        "/oauth/token",
        Some((cid, new_secret)),
        &[("grant_type", "client_credentials")],
    )
    .await;
    assert_eq!(s, 200);
    let spa_id = spa["id"].as_str().unwrap();
    app.post(
        &format!("/oauth/applications/{spa_id}/rotate-secret"),
        k,
        json!({}),
    )
    .await
    .expect(409);

    // Only admins manage applications; another organization sees none of them.
    let reader = app.key(&[plantd_model::Scope::ReadAssets]).await;
    app.get("/oauth/applications", &reader).await.expect(403);
    let (_, other) = app.other_org("Other", Tier::Starter).await;
    app.get(&format!("/oauth/applications/{id}"), &other)
        .await
        .expect(404);
    app.delete(&format!("/oauth/applications/{id}"), &other)
        .await
        .expect(404);
    assert_eq!(
        app.get("/oauth/applications", &other)
            .await
            .expect(200)
            .json["meta"]["total"],
        0
    );

    // Deleting an application ends its tokens.
    let (_, _, tok) = form(
        &app,
        "/oauth/token",
        Some((cid, new_secret)),
        &[("grant_type", "client_credentials")],
    )
    .await;
    let at = tok["access_token"].as_str().unwrap();
    app.get("/data-sources", at).await.expect(403);
    app.delete(&format!("/oauth/applications/{id}"), k)
        .await
        .expect(204);
    let r = app.get("/data-sources", at).await.expect(401);
    assert_eq!(r.json["error"], "invalid_token");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_credentials_tokens_carry_scopes_and_errors_use_the_second_shape() {
    let app = spawn_app().await;
    let web = register(
        &app,
        &app.admin_key,
        "web",
        json!(["read:assets", "write:assets"]),
    )
    .await;
    let (cid, secret) = (
        web["client_id"].as_str().unwrap(),
        web["client_secret"].as_str().unwrap(),
    );

    // client_secret_post and client_secret_basic both work; scope within the application's.
    let (s, h, tok) = form(
        &app,
        "/oauth/token",
        None,
        &[
            ("grant_type", "client_credentials"),
            ("client_id", cid),
            ("client_secret", secret),
            ("scope", "read:assets"),
        ],
    )
    .await;
    assert_eq!(s, 200, "{tok}");
    assert_eq!(h["cache-control"], "no-store");
    assert_eq!(tok["token_type"], "Bearer");
    assert_eq!(tok["expires_in"], 3600);
    assert_eq!(tok["scope"], "read:assets");
    assert!(tok.get("refresh_token").is_none());
    let at = tok["access_token"].as_str().unwrap().to_string();
    let (_, _, all) = form(
        &app,
        "/oauth/token",
        Some((cid, secret)),
        &[("grant_type", "client_credentials")],
    )
    .await;
    assert_eq!(all["scope"], "read:assets write:assets");

    // The API takes the token like a key, with its scopes.
    app.get("/data-sources", &at).await.expect(200);
    let r = app
        .post(
            "/data-sources",
            &at,
            json!({"name": "x", "type": "modbus", "config": {"host": "h"}}),
        )
        .await
        .expect(403);
    assert_eq!(
        r.json,
        json!({"error": "insufficient_scope", "error_description": "this access token lacks the 'write:assets' scope this operation needs"})
    );
    assert!(
        r.header("www-authenticate")
            .unwrap()
            .contains("error=\"insufficient_scope\"")
    );
    let r = app
        .get("/data-sources", &format!("{at}x"))
        .await
        .expect(401);
    assert_eq!(r.json["error"], "invalid_token");
    assert!(
        r.header("www-authenticate")
            .unwrap()
            .starts_with("Bearer realm=\"plantd\", error=\"invalid_token\"")
    );
    // API key errors keep the envelope.
    let r = app
        .get(
            "/data-sources",
            "pdk_unknownunknownunknownunknownunknownunknown1",
        )
        .await
        .expect(401);
    assert_eq!(r.code(), "authentication_error");

    // Introspection: active with its claims, for a confidential client of the organization.
    let (s, _, info) = form(
        &app,
        "/oauth/introspect",
        Some((cid, secret)),
        &[("token", &at)],
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(info["active"], true);
    assert_eq!(info["sub"], cid);
    assert_eq!(info["org"], app.org_id);
    assert_eq!(info["aud"], root(&app));
    assert_eq!(info["iss"], root(&app));
    assert!(
        info["jti"].is_string()
            && info["exp"].as_i64().unwrap() - info["iat"].as_i64().unwrap() == 3600
    );

    // Refusals, each with its code.
    type Case<'a> = (
        Vec<(&'a str, &'a str)>,
        Option<(&'a str, &'a str)>,
        u16,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            vec![("grant_type", "password")],
            Some((cid, secret)),
            400,
            "unsupported_grant_type",
        ),
        (vec![], Some((cid, secret)), 400, "invalid_request"),
        (
            vec![("grant_type", "client_credentials"), ("scope", "admin")],
            Some((cid, secret)),
            400,
            "invalid_scope",
        ),
        (
            vec![("grant_type", "client_credentials"), ("scope", "root")],
            Some((cid, secret)),
            400,
            "invalid_scope",
        ),
        (
            vec![
                ("grant_type", "client_credentials"),
                ("client_id", "pdc-nobody"),
            ],
            None,
            401,
            "invalid_client",
        ),
        (
            vec![
                ("grant_type", "client_credentials"),
                ("client_secret", secret),
            ],
            Some((cid, secret)),
            400,
            "invalid_request",
        ),
        (
            vec![
                ("grant_type", "authorization_code"),
                ("code", "pdc_made-up"),
                ("redirect_uri", CALLBACK),
            ],
            Some((cid, secret)),
            400,
            "invalid_grant",
        ),
        (
            vec![
                ("grant_type", "refresh_token"),
                ("refresh_token", "pdr_made-up"),
            ],
            Some((cid, secret)),
            400,
            "invalid_grant",
        ),
    ];
    for (params, basic, status, error) in cases {
        let (s, _, body) = form(&app, "/oauth/token", basic, &params).await;
        assert_eq!(
            (s, body["error"].as_str().unwrap_or_default()),
            (status, error),
            "{params:?}: {body}"
        );
        assert!(body["error_description"].is_string());
    }
    let r = browser()
        .post(format!("{}/oauth/token", root(&app)))
        .header(CONTENT_TYPE, "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    // Public clients may not use client credentials.
    let spa = register(&app, &app.admin_key, "spa", json!(["read:assets"])).await;
    let (s, _, body) = form(
        &app,
        "/oauth/token",
        None,
        &[
            ("grant_type", "client_credentials"),
            ("client_id", spa["client_id"].as_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(
        (s, body["error"].as_str().unwrap()),
        (400, "unauthorized_client")
    );

    // Revocation (RFC 7009): the token stops at once; unknown tokens answer 200 too.
    let (s, _, _) = form(
        &app,
        "/oauth/revoke",
        Some((cid, secret)),
        &[("token", &at)],
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(
        app.get("/data-sources", &at).await.expect(401).json["error"],
        "invalid_token"
    );
    let (s, _, _) = form(
        &app,
        "/oauth/revoke",
        Some((cid, secret)),
        &[("token", "nonsense")],
    )
    .await;
    assert_eq!(s, 200);
    let (_, _, info) = form(
        &app,
        "/oauth/introspect",
        Some((cid, secret)),
        &[("token", &at)],
    )
    .await;
    assert_eq!(info, json!({"active": false}));

    // Metadata and keys.
    let meta: Value = plantd_test_support::client()
        .get(format!(
            "{}/.well-known/oauth-authorization-server",
            root(&app)
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(meta["issuer"], root(&app));
    assert_eq!(meta["code_challenge_methods_supported"], json!(["S256"]));
    let jwks: Value = plantd_test_support::client()
        .get(format!("{}/.well-known/jwks.json", root(&app)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(jwks["keys"][0]["kty"], "RSA");
    assert!(jwks["keys"][0].get("d").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_code_flow_with_pkce_refresh_rotation_and_replays() {
    let app = spawn_app().await;
    let spa = register(
        &app,
        &app.admin_key,
        "spa",
        json!(["read:assets", "read:alerts", "admin"]),
    )
    .await;
    let cid = spa["client_id"].as_str().unwrap().to_string();
    let q = format!(
        "response_type=code&client_id={cid}&redirect_uri={}&scope=read%3Aassets+read%3Aalerts&state=xyz%20123&code_challenge={CHALLENGE}&code_challenge_method=S256",
        urlencode(CALLBACK)
    );
    let back = authorize(&app, &q, true).await;
    assert!(back.starts_with(CALLBACK), "{back}");
    assert_eq!(query_param(&back, "state").as_deref(), Some("xyz 123"));
    assert_eq!(query_param(&back, "iss"), Some(root(&app)));
    let code = query_param(&back, "code").unwrap();

    // The verifier must match, and the redirect URI must be the same.
    let (s, body) = exchange(&app, &cid, &code, "http://127.0.0.1:9/other", None).await;
    assert_eq!((s, body["error"].as_str().unwrap()), (400, "invalid_grant"));
    let (s, tok) = exchange(&app, &cid, &code, CALLBACK, Some(VERIFIER)).await;
    // The code was spent by the failed attempt above: a second use revokes nothing yet (no
    // tokens were issued) and is refused.
    assert_eq!(
        (s, tok["error"].as_str().unwrap_or_default()),
        (400, "invalid_grant"),
        "{tok}"
    );

    let back = authorize(&app, &q, true).await;
    let code = query_param(&back, "code").unwrap();
    let (s, body) = exchange(&app, &cid, &code, CALLBACK, Some("x".repeat(43).as_str())).await;
    assert_eq!((s, body["error"].as_str().unwrap()), (400, "invalid_grant"));
    let back = authorize(&app, &q, true).await;
    let code = query_param(&back, "code").unwrap();
    let (s, tok) = exchange(&app, &cid, &code, CALLBACK, Some(VERIFIER)).await;
    assert_eq!(s, 200, "{tok}");
    assert_eq!(tok["scope"], "read:assets read:alerts");
    let at = tok["access_token"].as_str().unwrap().to_string();
    let rt = tok["refresh_token"].as_str().unwrap().to_string();
    let me = app.get("/users/me", &at).await.expect(200);
    assert_eq!(me.json["data"]["email"], OWNER.0);
    app.get("/alerts", &at).await.expect(200);
    assert_eq!(
        app.get("/api-keys", &at).await.expect(403).json["error"],
        "insufficient_scope"
    );

    // Using the code again revokes what it gave.
    let (s, body) = exchange(&app, &cid, &code, CALLBACK, Some(VERIFIER)).await;
    assert_eq!((s, body["error"].as_str().unwrap()), (400, "invalid_grant"));
    assert_eq!(
        app.get("/alerts", &at).await.expect(401).json["error"],
        "invalid_token"
    );
    let (_, body) = refresh(&app, &cid, &rt, None).await;
    assert_eq!(body["error"], "invalid_grant");

    // Refresh tokens rotate; presenting a rotated one revokes the family.
    let back = authorize(&app, &q, true).await;
    let code = query_param(&back, "code").unwrap();
    let (_, tok) = exchange(&app, &cid, &code, CALLBACK, Some(VERIFIER)).await;
    let rt1 = tok["refresh_token"].as_str().unwrap().to_string();
    let (s, tok2) = refresh(&app, &cid, &rt1, Some("read:assets")).await;
    assert_eq!(s, 200, "{tok2}");
    assert_eq!(tok2["scope"], "read:assets");
    let rt2 = tok2["refresh_token"].as_str().unwrap().to_string();
    assert_ne!(rt1, rt2);
    let at2 = tok2["access_token"].as_str().unwrap().to_string();
    app.get("/data-sources", &at2).await.expect(200);
    let (_, body) = refresh(&app, &cid, &rt2, Some("admin")).await;
    assert_eq!(
        body["error"], "invalid_scope",
        "a refresh cannot widen the grant"
    );
    let (_, body) = refresh(&app, &cid, &rt1, None).await;
    assert_eq!(body["error"], "invalid_grant");
    assert_eq!(
        app.get("/data-sources", &at2).await.expect(401).json["error"],
        "invalid_token"
    );
    let (_, body) = refresh(&app, &cid, &rt2, None).await;
    assert_eq!(
        body["error"], "invalid_grant",
        "the whole family is revoked"
    );

    // Deny sends access_denied back with the state.
    let back = authorize(&app, &q, false).await;
    assert_eq!(
        query_param(&back, "error").as_deref(),
        Some("access_denied")
    );
    assert_eq!(query_param(&back, "state").as_deref(), Some("xyz 123"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_authorization_requests_never_redirect_to_strangers() {
    let app = spawn_app().await;
    let spa = register(&app, &app.admin_key, "spa", json!(["read:assets"])).await;
    let cid = spa["client_id"].as_str().unwrap();
    let cb = urlencode(CALLBACK);
    let b = browser();
    let get = |q: String| {
        let b = b.clone();
        let url = format!("{}/oauth/authorize?{q}", root(&app));
        async move { b.get(url).send().await.unwrap() }
    };
    // Unknown client or unregistered redirect URI: an error page, no redirect.
    for q in [
        format!("response_type=code&client_id=pdc-nobody&redirect_uri={cb}"),
        format!("response_type=code&client_id={cid}&redirect_uri=https%3A%2F%2Fevil.example%2Fcb"),
        format!("response_type=code&client_id={cid}&redirect_uri={cb}x"),
    ] {
        let r = get(q.clone()).await;
        assert_eq!(r.status(), 400, "{q}");
        assert!(r.headers().get(LOCATION).is_none());
        assert_eq!(r.headers()["x-frame-options"], "DENY");
    }
    // A good client and URI get the error back at the URI.
    for (q, error) in [
        (
            format!("response_type=code&client_id={cid}&redirect_uri={cb}&state=s"),
            "invalid_request",
        ),
        (
            format!(
                "response_type=code&client_id={cid}&redirect_uri={cb}&code_challenge={CHALLENGE}&code_challenge_method=plain"
            ),
            "invalid_request",
        ),
        (
            format!(
                "response_type=token&client_id={cid}&redirect_uri={cb}&code_challenge={CHALLENGE}&code_challenge_method=S256"
            ),
            "unsupported_response_type",
        ),
        (
            format!(
                "response_type=code&client_id={cid}&redirect_uri={cb}&scope=admin&code_challenge={CHALLENGE}&code_challenge_method=S256"
            ),
            "invalid_scope",
        ),
    ] {
        let r = get(q.clone()).await;
        assert_eq!(r.status(), 303, "{q}");
        let to = r.headers()[LOCATION].to_str().unwrap();
        assert!(to.starts_with(CALLBACK), "{to}");
        assert_eq!(query_param(to, "error").as_deref(), Some(error), "{q}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_applications_stay_in_their_organization() {
    let app = spawn_app().await;
    let (b_org, b_key) = app.other_org("B Corp", Tier::Professional).await;
    let a_web = register(
        &app,
        &app.admin_key,
        "web",
        json!(["read:assets", "write:assets"]),
    )
    .await;
    let b_web = register(&app, &b_key, "web", json!(["read:assets"])).await;
    app.post(
        "/data-sources",
        &b_key,
        json!({"name": "B PLC", "type": "modbus", "config": {"host": "plc-b.invalid"}}),
    )
    .await
    .expect(201);
    let token = |w: &Value| {
        let (cid, secret) = (
            w["client_id"].as_str().unwrap().to_string(),
            w["client_secret"].as_str().unwrap().to_string(),
        );
        let app = &app;
        async move {
            let (_, _, t) = form(
                app,
                "/oauth/token",
                Some((&cid, &secret)),
                &[("grant_type", "client_credentials")],
            )
            .await;
            t["access_token"].as_str().unwrap().to_string()
        }
    };
    let a_at = token(&a_web).await;
    let b_at = token(&b_web).await;
    assert_eq!(
        app.get("/data-sources", &a_at).await.expect(200).json["meta"]["total"],
        0
    );
    assert_eq!(
        app.get("/data-sources", &b_at).await.expect(200).json["meta"]["total"],
        1
    );
    // A's client learns nothing of B's tokens, nor revokes them.
    let (a_cid, a_secret) = (
        a_web["client_id"].as_str().unwrap(),
        a_web["client_secret"].as_str().unwrap(),
    );
    let (_, _, info) = form(
        &app,
        "/oauth/introspect",
        Some((a_cid, a_secret)),
        &[("token", &b_at)],
    )
    .await;
    assert_eq!(info, json!({"active": false}));
    form(
        &app,
        "/oauth/revoke",
        Some((a_cid, a_secret)),
        &[("token", &b_at)],
    )
    .await;
    app.get("/data-sources", &b_at).await.expect(200);
    // A user of A cannot approve B's application.
    let q = format!(
        "response_type=code&client_id={}&redirect_uri={}",
        b_web["client_id"].as_str().unwrap(),
        urlencode(CALLBACK)
    );
    let b = browser();
    let login = b
        .post(format!("{}/oauth/authorize", root(&app)))
        .header(ORIGIN, root(&app))
        .form(&[
            ("action", "login"),
            ("email", OWNER.0),
            ("password", OWNER.1),
            ("response_type", "code"),
            ("client_id", b_web["client_id"].as_str().unwrap()),
            ("redirect_uri", CALLBACK),
        ])
        .send()
        .await
        .unwrap();
    // The login is for B's organization, where A's owner is no member.
    assert_eq!(login.status(), 403);
    assert!(login.text().await.unwrap().contains("not a member"));
    let _ = (q, b_org);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_keys_rotate_without_breaking_tokens() {
    let app = spawn_app().await;
    let web = register(&app, &app.admin_key, "web", json!(["read:assets"])).await;
    let (cid, secret) = (
        web["client_id"].as_str().unwrap(),
        web["client_secret"].as_str().unwrap(),
    );
    let (_, _, t) = form(
        &app,
        "/oauth/token",
        Some((cid, secret)),
        &[("grant_type", "client_credentials")],
    )
    .await;
    let old = t["access_token"].as_str().unwrap().to_string();
    let new_kid = plantd_app::operator::rotate_signing_key(&app.store)
        .await
        .unwrap();
    // A node that starts now signs with the new key and publishes both.
    let node = app.another_node().await;
    let jwks: Value = plantd_test_support::client()
        .get(format!("{}/.well-known/jwks.json", root(&node)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kids: Vec<&str> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert_eq!(kids.len(), 2);
    assert_eq!(kids[0], new_kid);
    // The token signed before the rotation still works.
    app.get("/data-sources", &old).await.expect(200);
    let (_, _, t) = form(
        &node,
        "/oauth/token",
        Some((cid, secret)),
        &[("grant_type", "client_credentials")],
    )
    .await;
    let fresh = t["access_token"].as_str().unwrap().to_string();
    node.get("/data-sources", &fresh).await.expect(200);
}

/// `s` percent-encoded for a query string.
fn urlencode(s: &str) -> String {
    reqwest::Url::parse_with_params("http://x/", [("v", s)])
        .expect("a URL")
        .query()
        .unwrap_or_default()
        .trim_start_matches("v=")
        .to_string()
}

/// Independent clients: python's authlib runs the code flow with PKCE (driving the login and
/// consent forms), refresh rotation and client credentials; PyJWT's `PyJWKClient` verifies an
/// access token against the JWKS with `aud`, `iss` and `exp`. Needs `PLANTD_TEST_PYTHON_OAUTH`
/// (a python3 with authlib, PyJWT, requests and cryptography, set by `.ci/run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authlib_and_pyjwt_interoperate() {
    let Some(python) = plantd_test_support::peer(
        "PLANTD_TEST_PYTHON_OAUTH",
        "to a python3 with authlib and PyJWT",
    ) else {
        return;
    };
    let app = spawn_app().await;
    let spa = register(
        &app,
        &app.admin_key,
        "spa",
        json!(["read:assets", "read:alerts"]),
    )
    .await;
    let web = register(&app, &app.admin_key, "web", json!(["read:assets"])).await;
    let stdout = plantd_test_support::run_interop(
        &python,
        "oauth_client.py",
        &[
            &root(&app),
            spa["client_id"].as_str().unwrap(),
            web["client_id"].as_str().unwrap(),
            web["client_secret"].as_str().unwrap(),
            OWNER.0,
            OWNER.1,
            CALLBACK,
        ],
    )
    .await;
    plantd_test_support::printed_every(
        &stdout,
        &[
            "authorization_code+pkce",
            "api_with_user_token",
            "pyjwt_jwks_verification",
            "refresh_rotation",
            "client_credentials",
        ],
    );
}

/// The audit records of `event` in the organization, oldest first: (outcome, status, actor
/// type, resource id).
async fn records(app: &TestApp, event: &str) -> Vec<(String, u64, String, Option<String>)> {
    let r = app
        .get(
            &format!("/audit/logs?event_types={event}&per_page=100"),
            &app.admin_key,
        )
        .await
        .expect(200);
    let mut list: Vec<_> = r.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            assert!(
                !x.to_string().contains(OWNER.1),
                "no record holds a password: {x}"
            );
            (
                x["outcome"].as_str().unwrap().to_string(),
                x["status_code"].as_u64().unwrap(),
                x["actor_type"].as_str().unwrap().to_string(),
                x["resource_id"].as_str().map(str::to_string),
            )
        })
        .collect();
    list.reverse();
    list
}

/// Every request that changes something is audited, whatever the door: the authorization
/// page's login and decisions, token grants (and refused ones), revocations and
/// introspections, in the application's organization.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorization_server_audits_decisions_grants_and_revocations() {
    let app = spawn_app().await;
    let spa = register(&app, &app.admin_key, "spa", json!(["read:assets"])).await;
    let cid = spa["client_id"].as_str().unwrap().to_string();
    let q = format!(
        "response_type=code&client_id={cid}&redirect_uri={}&scope=read%3Aassets&code_challenge={CHALLENGE}&code_challenge_method=S256",
        urlencode(CALLBACK)
    );
    let back = authorize(&app, &q, true).await;
    let code = query_param(&back, "code").unwrap();
    authorize(&app, &q, false).await;
    let (s, _) = exchange(&app, &cid, &code, CALLBACK, Some("x".repeat(43).as_str())).await;
    assert_eq!(s, 400);
    let back = authorize(&app, &q, true).await;
    let code = query_param(&back, "code").unwrap();
    let (s, tok) = exchange(&app, &cid, &code, CALLBACK, Some(VERIFIER)).await;
    assert_eq!(s, 200, "{tok}");
    let rt = tok["refresh_token"].as_str().unwrap();
    let (s, _, _) = form(
        &app,
        "/oauth/revoke",
        None,
        &[("client_id", &cid), ("token", rt)],
    )
    .await;
    assert_eq!(s, 200);

    let decisions = records(&app, "oauth.authorize").await;
    let client = Some(cid.clone());
    // Two approvals and a denial (a redirect back to the client each), by the user's session;
    // the forged decision (another Origin) of each round is refused before anything is done.
    let done: Vec<_> = decisions.iter().filter(|d| d.1 == 303).collect();
    assert_eq!(done.len(), 3, "{decisions:?}");
    assert!(
        done.iter()
            .all(|d| d.0 == "success" && d.2 == "session" && d.3 == client),
        "{done:?}"
    );
    let logins = records(&app, "session.login").await;
    assert!(
        logins.len() >= 3 && logins.iter().all(|l| l.0 == "success" && l.2 == "session"),
        "the authorization page's logins: {logins:?}"
    );
    let grants = records(&app, "oauth.token").await;
    assert_eq!(
        grants
            .iter()
            .map(|g| (g.0.as_str(), g.1, g.2.as_str()))
            .collect::<Vec<_>>(),
        [
            ("failure", 400, "oauth_client"),
            ("success", 200, "oauth_client")
        ]
    );
    assert!(grants.iter().all(|g| g.3 == client));
    let revoked = records(&app, "oauth.revoke").await;
    assert_eq!(
        revoked,
        [("success".into(), 200, "oauth_client".into(), client)]
    );
}

/// A password change ends the user's OAuth grants (their applications' access and refresh
/// tokens, as RFC 9700 advises) beside their other sessions; wrong current passwords count as
/// failed logins of the account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_change_revokes_grants_and_wrong_guesses_are_throttled() {
    let app = spawn_app().await;
    let spa = register(&app, &app.admin_key, "spa", json!(["read:assets"])).await;
    let cid = spa["client_id"].as_str().unwrap().to_string();
    let q = format!(
        "response_type=code&client_id={cid}&redirect_uri={}&scope=read%3Aassets&code_challenge={CHALLENGE}&code_challenge_method=S256",
        urlencode(CALLBACK)
    );
    let back = authorize(&app, &q, true).await;
    let code = query_param(&back, "code").unwrap();
    let (s, tok) = exchange(&app, &cid, &code, CALLBACK, Some(VERIFIER)).await;
    assert_eq!(s, 200, "{tok}");
    let at = tok["access_token"].as_str().unwrap().to_string();
    let rt = tok["refresh_token"].as_str().unwrap().to_string();
    app.get("/data-sources", &at).await.expect(200);

    let me = crate::identity::session(&app, OWNER.0, OWNER.1).await;
    let change = |current: &str, new: &str| {
        app.post(
            "/users/me/password",
            &me,
            json!({"current_password": current, "new_password": new}),
        )
    };
    change(OWNER.1, "a-new-valve-password-9").await.expect(204);
    let (_, body) = refresh(&app, &cid, &rt, None).await;
    assert_eq!(body["error"], "invalid_grant", "{body}");
    assert_eq!(
        app.get("/data-sources", &at).await.expect(401).json["error"],
        "invalid_token"
    );

    let mut statuses = Vec::new();
    for i in 0..11 {
        statuses.push(
            change(&format!("wrong-guess-{i}"), "another-valve-password-7")
                .await
                .status,
        );
    }
    assert_eq!(&statuses[..10], &[400; 10], "{statuses:?}");
    assert_eq!(statuses[10], 429, "{statuses:?}");
}
