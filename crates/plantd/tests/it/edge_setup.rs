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

/// Runs a command of the test's network; its output, or the test fails with its error.
fn host(args: &[&str]) -> String {
    let out = std::process::Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A host of its own for the agent: a network namespace with a system bus and a real
/// NetworkManager managing its `lan0` (a veth), `mgmt0` (another veth, left to the test)
/// carrying the test's requests. Everything goes when it drops.
struct NetworkManagerHost {
    netns: String,
    bus: String,
    dir: std::path::PathBuf,
    daemons: Vec<std::process::Child>,
}

impl NetworkManagerHost {
    fn start(dir: &std::path::Path) -> Self {
        let netns = format!("plantd-nm-{}", std::process::id());
        let bus = format!("unix:path={}", dir.join("bus").display());
        let mut this = Self {
            netns: netns.clone(),
            bus: bus.clone(),
            dir: dir.to_path_buf(),
            daemons: Vec::new(),
        };
        host(&["ip", "netns", "add", &netns]);
        for (outside, inside) in [("pnm-lan", "lan0"), ("pnm-mgmt", "mgmt0")] {
            host(&[
                "ip", "link", "add", outside, "type", "veth", "peer", "name", inside, "netns",
                &netns,
            ]);
            host(&["ip", "link", "set", outside, "up"]);
        }
        host(&["ip", "addr", "add", "10.231.0.1/24", "dev", "pnm-mgmt"]);
        for args in [
            &["ip", "link", "set", "lo", "up"][..],
            &["ip", "addr", "add", "10.231.0.2/24", "dev", "mgmt0"],
            &["ip", "link", "set", "mgmt0", "up"],
        ] {
            host(&[&["ip", "netns", "exec", &netns][..], args].concat());
        }
        // A system bus of its own, so nothing of the machine's is touched.
        std::fs::write(
            dir.join("bus.conf"),
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>system</type><listen>{bus}</listen><auth>EXTERNAL</auth>
<policy context="default"><allow user="*"/><allow own="*"/><allow send_type="method_call"/>
<allow send_destination="*"/><allow receive_sender="*"/></policy></busconfig>"#
            ),
        )
        .unwrap();
        let spawn = |cmd: &mut std::process::Command| {
            cmd.stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        };
        this.daemons.push(spawn(
            std::process::Command::new("dbus-daemon")
                .arg(format!("--config-file={}", dir.join("bus.conf").display()))
                .arg("--nofork"),
        ));
        for _ in 0..100 {
            if dir.join("bus").exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // NetworkManager keeps its connections in the test's folder, leaves the host's DNS
        // and name alone, makes no connection by itself, and reads a read-only /sys (no udev
        // in a namespace: it then takes the kernel's devices as they are).
        std::fs::write(
            dir.join("nm.conf"),
            format!(
                "[main]\nplugins=keyfile\nauth-polkit=false\ndns=none\nrc-manager=unmanaged\n\
                 hostname-mode=none\nno-auto-default=*\n[keyfile]\npath={}\n\
                 unmanaged-devices=interface-name:mgmt0\n",
                dir.join("connections").display()
            ),
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("connections")).unwrap();
        this.daemons.push(spawn(
            std::process::Command::new("ip")
                .args(["netns", "exec", &netns, "unshare", "-m", "sh", "-c"])
                .arg(format!(
                    "mount -o remount,ro /sys && exec NetworkManager --no-daemon --config={} --state-file={}",
                    dir.join("nm.conf").display(),
                    dir.join("nm.state").display()
                ))
                .env("DBUS_SYSTEM_BUS_ADDRESS", &bus),
        ));
        for _ in 0..200 {
            let out = std::process::Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &netns,
                    "nmcli",
                    "-t",
                    "-f",
                    "DEVICE,STATE",
                    "device",
                ])
                .env("DBUS_SYSTEM_BUS_ADDRESS", &bus)
                .output()
                .unwrap();
            if String::from_utf8_lossy(&out.stdout).contains("lan0:disconnected") {
                return this;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("NetworkManager did not take lan0");
    }

    /// `nmcli` in the namespace, on its bus.
    fn nmcli(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &self.netns, "nmcli"])
            .args(args)
            .env("DBUS_SYSTEM_BUS_ADDRESS", &self.bus)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "nmcli {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for NetworkManagerHost {
    fn drop(&mut self) {
        for d in &mut self.daemons {
            let _ = d.kill();
            let _ = d.wait();
        }
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
        for outside in ["pnm-lan", "pnm-mgmt"] {
            let _ = std::process::Command::new("ip")
                .args(["link", "del", outside])
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The wizard's network step against a real NetworkManager (Debian's, in a network namespace
/// of the test's, `PLANTD_TEST_NETWORKMANAGER` set by `.ci/run`): the agent lists the interface
/// NetworkManager manages, gives it a static address, gateway and name servers that the kernel
/// then carries, and refuses an interface NetworkManager does not manage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_wizard_sets_an_interface_through_networkmanager() {
    if std::env::var_os("PLANTD_TEST_NETWORKMANAGER").is_none() {
        eprintln!(
            "skipped: PLANTD_TEST_NETWORKMANAGER is not set (root, iproute2, dbus-daemon and NetworkManager)"
        );
        return;
    }
    let dir = plantd_test_support::temp_dir("edge-nm");
    std::fs::create_dir_all(&dir).unwrap();
    let nm = NetworkManagerHost::start(&dir);
    nm.nmcli(&[
        "connection",
        "add",
        "type",
        "ethernet",
        "ifname",
        "lan0",
        "con-name",
        "plant-lan",
        "ipv4.method",
        "manual",
        "ipv4.addresses",
        "10.232.0.2/24",
        "ipv6.method",
        "disabled",
    ]);
    nm.nmcli(&["connection", "up", "plant-lan"]);

    let data = dir.join("agent");
    let data = data.to_str().unwrap();
    let mut agent = ServerProcess::launch_with_env(
        "ip",
        &[
            "netns",
            "exec",
            &nm.netns,
            BIN,
            "edge",
            "--listen",
            "0.0.0.0:3000",
            "--data-dir",
            data,
        ],
        &[("DBUS_SYSTEM_BUS_ADDRESS", nm.bus.as_str())],
        "stop:",
    );
    let key = admin_key(data);
    let network = "http://10.231.0.2:3000/v1/edge/network";
    let (status, net) = get(network, Some(&key)).await;
    assert_eq!(status, 200, "{net}");
    assert_eq!(net["data"]["can_apply"], true, "{net}");
    let addresses = |net: &Value, name: &str| -> Vec<Value> {
        net["data"]["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == name)
            .map(|i| i["addresses"].as_array().unwrap().clone())
            .unwrap_or_default()
    };
    assert_eq!(addresses(&net, "lan0"), [json!("10.232.0.2/24")], "{net}");

    let (status, set) = call(
        reqwest::Method::PUT,
        network,
        Some(&key),
        Some(
            json!({"interface": "lan0", "method": "static", "address": "10.232.0.7/24",
                    "gateway": "10.232.0.1", "dns": ["10.232.0.1", "9.9.9.9"]}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{set}");
    assert_eq!(addresses(&set, "lan0"), [json!("10.232.0.7/24")], "{set}");
    let kernel = host(&["ip", "-n", &nm.netns, "-4", "-o", "addr", "show", "lan0"]);
    assert!(
        kernel.contains("10.232.0.7/24") && !kernel.contains("10.232.0.2/"),
        "{kernel}"
    );
    let kept = nm.nmcli(&[
        "-g",
        "ipv4.method,ipv4.addresses,ipv4.gateway,ipv4.dns",
        "connection",
        "show",
        "plant-lan",
    ]);
    assert_eq!(
        kept.lines().collect::<Vec<_>>(),
        [
            "manual",
            "10.232.0.7/24",
            "10.232.0.1",
            "10.232.0.1,9.9.9.9"
        ],
        "{kept}"
    );
    let route = host(&["ip", "-n", &nm.netns, "-4", "route", "show", "default"]);
    assert!(route.contains("via 10.232.0.1 dev lan0"), "{route}");

    // An interface NetworkManager leaves alone is refused, and nothing changes on it.
    let (status, refused) = call(
        reqwest::Method::PUT,
        network,
        Some(&key),
        Some(json!({"interface": "mgmt0", "method": "static", "address": "10.231.0.9/24"})),
    )
    .await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(
        refused["error"]["code"], "network_not_applicable",
        "{refused}"
    );
    let (_, net) = get(network, Some(&key)).await;
    let mgmt = addresses(&net, "mgmt0");
    assert!(
        mgmt.contains(&json!("10.231.0.2/24")) && !mgmt.contains(&json!("10.231.0.9/24")),
        "{net}"
    );
    assert!(agent.stop("TERM").success());
}
