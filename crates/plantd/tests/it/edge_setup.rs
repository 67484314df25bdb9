//! The edge agent's setup wizard (issue 34): a first start prints a setup code (and keeps it in
//! the data directory, for its owner only); the login page leads to the wizard; the code sets
//! the owner's password once and logs in; API keys work before. Then the host's network (its
//! loopback shown; a change refused without NetworkManager, and made through a recording
//! stand-in for `nmcli` that answers as NetworkManager does), the asset templates and an asset
//! added from one; a platform has no wizard; a restart after setup prints no code.

use crate::edge::{BIN, admin_key};
use plantd_test_support::{ServerProcess, spawn_app};
use serde_json::{Value, json};

use crate::console::browser as no_redirects;

async fn get(url: &str, token: Option<&str>) -> (u16, Value) {
    call(reqwest::Method::GET, url, token, None).await
}

async fn call(
    method: reqwest::Method,
    url: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut r = no_redirects().request(method, url);
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_wizard_sets_the_password_then_the_network_and_assets() {
    let dir = plantd_test_support::temp_dir("edge-setup");
    let data = dir.to_str().unwrap();
    // A stand-in for NetworkManager's client: it names the interface's connection and records
    // each call, as nmcli would take them.
    let calls = dir.join("nmcli-calls");
    let nmcli = dir.join("nmcli");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        &nmcli,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\ncase \"$*\" in\n  '-g GENERAL.CONNECTION device show lo') echo 'Wired connection 1' ;;\n  *GENERAL*) exit 10 ;;\nesac\n",
            calls.display()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&nmcli, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let args = ["edge", "--listen", "127.0.0.1:0", "--data-dir", data];
    let mut agent = ServerProcess::launch_with_env(
        BIN,
        &args,
        &[("PLANTD_NMCLI", nmcli.to_str().unwrap())],
        "stop:",
    );
    let base = agent.printed_after("listening on ").unwrap();
    let code = agent
        .printed_after("setup code: ")
        .expect("a setup code printed");
    let kept = std::fs::read_to_string(dir.join("setup-code")).unwrap();
    assert_eq!(kept.trim(), code);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("setup-code"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the code is its owner's only");
    }
    assert!(
        agent
            .printed
            .iter()
            .any(|l| l.contains(&format!("{base}/setup"))),
        "{:?}",
        agent.printed
    );

    // An API key works before the wizard.
    let key = admin_key(data);
    let (status, _) = get(&format!("{base}/v1/edge/config"), Some(&key)).await;
    assert_eq!(status, 200);

    // Pending: the login page leads to the wizard, whose first step asks for the code.
    let (status, state) = get(&format!("{base}/v1/edge/setup"), None).await;
    assert_eq!(
        (status, state["data"]["pending"].clone()),
        (200, json!(true))
    );
    let login = no_redirects()
        .get(format!("{base}/login"))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status().as_u16(), 303);
    assert_eq!(login.headers()["location"], "/setup");
    let page = no_redirects()
        .get(format!("{base}/setup?code={code}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("setup-password") && page.contains(&code),
        "{page}"
    );
    // The console's form: two passwords that differ, then a wrong code.
    let form = |c: &str, p: &str, again: &str| {
        no_redirects()
            .post(format!("{base}/setup"))
            .header("origin", &base)
            .form(&[
                ("setup_code", c),
                ("password", p),
                ("password_again", again),
            ])
            .send()
    };
    let differ = form(&code, "a-long-password-1", "a-long-password-2")
        .await
        .unwrap();
    assert_eq!(differ.status().as_u16(), 400);
    assert!(
        differ
            .text()
            .await
            .unwrap()
            .contains("the two passwords differ")
    );
    let wrong = form("pdi_nope", "a-long-password-1", "a-long-password-1")
        .await
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 400);
    assert!(wrong.text().await.unwrap().contains("setup code"));
    // Through the API: a short password is refused, the code kept; then set, once.
    let setup_url = format!("{base}/v1/edge/setup");
    let set_password = |password: &'static str| {
        call(
            reqwest::Method::POST,
            &setup_url,
            None,
            Some(json!({"setup_code": code, "password": password})),
        )
    };
    let (status, body) = set_password("short").await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(crate::edge::fields(&body), ["password"]);
    let set = no_redirects()
        .post(&setup_url)
        .json(&json!({"setup_code": code, "password": "a-long-password-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status().as_u16(), 200);
    assert!(
        set.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("plantd_session=")
    );
    let set: Value = set.json().await.unwrap();
    let token = set["data"]["session_token"].as_str().unwrap().to_string();
    assert_eq!(set["data"]["user"]["role"], "owner");
    let (status, again) = set_password("another-password-2").await;
    assert_eq!(
        (status, again["error"]["code"].clone()),
        (409, json!("setup_done"))
    );
    let (_, state) = get(&setup_url, None).await;
    assert_eq!(state["data"]["pending"], false);
    let (status, _) = call(
        reqwest::Method::POST,
        &format!("{base}/v1/auth/login"),
        None,
        Some(json!({"email": "admin@localhost", "password": "a-long-password-1"})),
    )
    .await;
    assert_eq!(status, 200, "the password set is the login's");

    // The network: the host's loopback; a change through NetworkManager (the stand-in).
    let (status, net) = get(&format!("{base}/v1/edge/network"), Some(&token)).await;
    assert_eq!(status, 200, "{net}");
    let lo = net["data"]["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["loopback"] == true)
        .cloned()
        .expect("a loopback interface");
    assert!(
        lo["addresses"]
            .as_array()
            .unwrap()
            .contains(&json!("127.0.0.1/8")),
        "{lo}"
    );
    assert_eq!(net["data"]["can_apply"], true);
    let network = format!("{base}/v1/edge/network");
    let (status, bad) = call(
        reqwest::Method::PUT,
        &network,
        Some(&token),
        Some(json!({"interface": "nope0", "method": "static", "address": "10.1.2.3"})),
    )
    .await;
    assert_eq!(status, 400, "{bad}");
    assert_eq!(crate::edge::fields(&bad), ["interface", "address"]);
    let (status, _) = call(
        reqwest::Method::PUT,
        &network,
        Some(&token),
        Some(
            json!({"interface": "lo", "method": "static", "address": "10.1.2.3/24",
                    "gateway": "10.1.2.1", "dns": ["10.1.2.1", "9.9.9.9"]}),
        ),
    )
    .await;
    assert_eq!(status, 200);
    let recorded = std::fs::read_to_string(&calls).unwrap();
    assert!(
        recorded.contains("connection modify Wired connection 1 ipv4.method manual ipv4.addresses 10.1.2.3/24 ipv4.gateway 10.1.2.1 ipv4.dns 10.1.2.1 9.9.9.9")
            && recorded.contains("connection up Wired connection 1"),
        "{recorded}"
    );
    // Without a login: nothing.
    let (status, _) = get(&network, None).await;
    assert_eq!(status, 401);

    // The templates, and an asset from one (the wizard's CSV line).
    let (_, templates) = get(&format!("{base}/v1/edge/templates"), Some(&token)).await;
    let pump = templates["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["asset_type"] == "centrifugal_pump")
        .cloned()
        .unwrap();
    assert_eq!(
        pump["sensors"][0],
        json!({"name": "Vibration_X", "unit": "mm/s", "modbus_address": 0})
    );
    let sensors: Vec<String> = pump["sensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| format!("{}:{}", s["name"].as_str().unwrap(), s["modbus_address"]))
        .collect();
    let csv = format!(
        "asset_id,asset_type,protocol,host,port,sensors\nPump_09,centrifugal_pump,modbus,127.0.0.1,5020,{}\n",
        sensors.join(";")
    );
    let added = no_redirects()
        .post(format!("{base}/v1/provisioning/import/csv"))
        .bearer_auth(&token)
        .header("content-type", "text/csv")
        .body(csv)
        .send()
        .await
        .unwrap();
    assert_eq!(added.status().as_u16(), 200);
    let page = no_redirects()
        .get(format!("{base}/setup"))
        .header("cookie", format!("plantd_session={token}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for part in [
        "setup-interfaces",
        "setup-cloud",
        "setup-template",
        "Centrifugal pump",
    ] {
        assert!(page.contains(part), "{part} in {page}");
    }
    assert!(agent.stop("TERM").success());

    // Started again: nothing to set up, no code.
    let mut again = ServerProcess::launch_with_env(BIN, &args, &[], "stop:");
    assert!(
        again.printed_after("setup code: ").is_none(),
        "{:?}",
        again.printed
    );
    assert!(!dir.join("setup-code").exists());
    assert!(again.stop("TERM").success());

    // A platform has no wizard.
    let platform = spawn_app().await;
    platform
        .get("/edge/setup", &platform.admin_key)
        .await
        .expect(404);
    let _ = std::fs::remove_dir_all(dir);
}
