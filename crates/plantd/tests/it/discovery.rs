//! Network discovery (issue 34, `POST /v1/api/discover/scan`): the simulator (a child process)
//! is found over Modbus TCP (its device identification) and OPC UA (Hello, and its mDNS
//! announcement without its port named, which python-zeroconf also reads), with what one more
//! call needs to provision it; a server python-zeroconf announces is found; an independent BACnet/IP device (bacpypes3) answers Who-Is and
//! an independent EtherNet/IP adapter (cpppo) List Identity; bad requests are named; admin only.

use crate::connectors::start_sim;
use plantd_model::Scope;
use plantd_test_support::{ServerProcess, spawn_app, wait_for};
use serde_json::{Value, json};

/// This machine's name, as the simulator announces it.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

fn interop(script: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/interop")
        .join(script)
        .to_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_finds_the_simulator_and_independent_devices() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let path = "/api/discover/scan";

    // Refusals: each bad entry named; a key without admin refused.
    let r = app
        .post(
            path,
            &k,
            json!({"hosts": ["10.0.0.0/16", "bad host"], "ports": [0], "protocols": ["snmp"]}),
        )
        .await
        .expect(400);
    assert_eq!(
        crate::edge::fields(&r.json),
        ["hosts[0]", "hosts[1]", "ports[0]", "protocols[0]"]
    );
    app.post(path, &k, json!({"ports": [502]}))
        .await
        .expect(400);
    let writer = app.key(&[Scope::WriteAssets]).await;
    app.post(path, &writer, json!({"hosts": ["127.0.0.1"]}))
        .await
        .expect(403);

    // The simulator: Modbus TCP with its identification, OPC UA by its Hello.
    let sim = start_sim("discovery", 0, 0);
    let (m, o) = (sim.modbus_port, sim.opcua_port);
    let r = app
        .post(
            path,
            &k,
            json!({"hosts": ["127.0.0.1"], "ports": [m, o], "protocols": ["modbus", "opcua"]}),
        )
        .await
        .expect(200);
    // (Other tests' simulators announce themselves on this host too: only this one's ports.)
    let found: Vec<Value> = r.json["data"]["found"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["port"] == m || f["port"] == o)
        .cloned()
        .collect();
    assert_eq!(found.len(), 2, "{}", r.text);
    let modbus = found.iter().find(|f| f["protocol"] == "modbus").unwrap();
    assert_eq!(modbus["port"], m);
    assert_eq!(modbus["identity"]["vendor_name"], "plantd");
    assert_eq!(modbus["identity"]["product_code"], "plantd-sim");
    let opcua = found.iter().find(|f| f["protocol"] == "opcua").unwrap();
    assert_eq!(opcua["port"], o);
    assert_eq!(opcua["identity"]["acknowledged"], true);
    assert_eq!(r.json["data"]["scanned_addresses"], 1);
    // The simulator announces its OPC UA server over mDNS: found without naming its port.
    let r = app
        .post(
            path,
            &k,
            json!({"hosts": ["127.0.0.1"], "ports": [m], "protocols": ["opcua"]}),
        )
        .await
        .expect(200);
    let announced = r.json["data"]["found"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["port"] == o)
        .cloned()
        .unwrap_or_else(|| panic!("the simulator announced over mDNS: {}", r.text));
    assert_eq!(announced["protocol"], "opcua");
    assert_eq!(
        announced["identity"]["endpoint_url"],
        format!("opc.tcp://127.0.0.1:{o}/")
    );
    assert_eq!(
        announced["identity"]["mdns_name"],
        format!("plantd simulator on {} port {o}", hostname())
    );
    assert_eq!(announced["identity"]["acknowledged"], true);
    assert_eq!(announced["provision"]["port"], o);
    // An independent mDNS implementation (python-zeroconf) reads the announcement.
    if let Some(python) = plantd_test_support::peer(
        "PLANTD_TEST_PYTHON_MDNS",
        "to a python3 with zeroconf installed",
    ) {
        let out = std::process::Command::new(&python)
            .args([&interop("mdns_peer.py"), "browse", &o.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(seen["addresses"], json!(["127.0.0.1"]));
        assert_eq!(
            (seen["path"].clone(), seen["caps"].clone()),
            (json!("/"), json!("DA"))
        );
    }
    // One more call provisions it: the row is the discovery's, plus id, type and sensors.
    let row = modbus["provision"].clone();
    let r = app
        .post("/provisioning/import/qr", &k, json!({"id": "Found_Pump", "t": "centrifugal_pump",
              "h": row["host"], "o": row["port"], "p": row["protocol"], "s": [{"n": "Flow_Rate", "a": 14}]}))
        .await
        .expect(200);
    assert_eq!(r.json["data"]["imported"], 1);
    // Nothing answers on a closed port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = app
        .post(
            path,
            &k,
            json!({"hosts": ["127.0.0.1"], "ports": [closed], "protocols": ["modbus"]}),
        )
        .await
        .expect(200);
    assert_eq!(r.json["data"]["found"], json!([]));
    sim.stop();

    // A server announced by python-zeroconf is found (with its path), and said not to answer
    // OPC UA where nothing listens.
    if let Some(python) = plantd_test_support::peer(
        "PLANTD_TEST_PYTHON_MDNS",
        "to a python3 with zeroconf installed",
    ) {
        let mut peer = ServerProcess::launch(
            &python,
            &[&interop("mdns_peer.py"), "announce", &closed.to_string()],
            "ready",
        );
        let server = wait_for("the server python-zeroconf announces", 30, || async {
            let r = app
                .post(
                    path,
                    &k,
                    json!({"hosts": ["127.0.0.1"], "ports": [closed], "protocols": ["opcua"]}),
                )
                .await
                .expect(200);
            r.json["data"]["found"]
                .as_array()?
                .iter()
                .find(|f| f["port"] == closed)
                .cloned()
        })
        .await;
        assert_eq!(
            server["identity"]["endpoint_url"],
            format!("opc.tcp://127.0.0.1:{closed}/plc")
        );
        assert_eq!(
            server["identity"]["mdns_name"],
            format!("zeroconf plc {closed}")
        );
        assert_eq!(server["identity"]["acknowledged"], false);
        peer.stop("TERM");
    }

    // Independent responders from PyPI.
    let Some(python) = plantd_test_support::peer(
        "PLANTD_TEST_PYTHON_DISCOVERY",
        "to a python3 with bacpypes3 and cpppo installed",
    ) else {
        return;
    };
    let mut bacnet = ServerProcess::launch(
        &python,
        &[&interop("bacnet_device.py"), "127.0.0.2/8:47808", "599"],
        "ready",
    );
    let mut enip = ServerProcess::launch(
        &python,
        &[&interop("enip_adapter.py"), "127.0.0.1:44818"],
        "ready",
    );
    // Each scan waits 2 s for UDP answers: on a loaded machine one peer may answer a later scan
    // than the other, so answers are gathered across scans. A peer that has ended is named with
    // what it printed.
    let mut found: Vec<Value> = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while found.len() < 2 {
        let r = app
            .post(
                path,
                &k,
                json!({"hosts": ["127.0.0.1", "127.0.0.2"], "protocols": ["bacnet", "ethernet_ip"]}),
            )
            .await
            .expect(200);
        for f in r.json["data"]["found"].as_array().unwrap() {
            if !found.iter().any(|g| g["protocol"] == f["protocol"]) {
                found.push(f.clone());
            }
        }
        for (name, peer) in [("bacpypes3", &mut bacnet), ("cpppo", &mut enip)] {
            let ended = peer.child.try_wait().unwrap();
            let printed = peer.printed_since();
            assert!(ended.is_none(), "{name} ended ({ended:?}): {printed:?}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for the BACnet device and the EtherNet/IP adapter: found {found:?}; \
             bacpypes3 printed {:?}, cpppo printed {:?}",
            bacnet.printed,
            enip.printed
        );
    }
    let of = |p: &str| -> Value { found.iter().find(|f| f["protocol"] == p).unwrap().clone() };
    let b = of("bacnet");
    assert_eq!(
        (b["host"].as_str(), b["port"].as_u64()),
        (Some("127.0.0.2"), Some(47808))
    );
    assert_eq!(b["identity"]["device_instance"], 599);
    assert_eq!(b["provision"], Value::Null);
    let e = of("ethernet_ip");
    assert_eq!(
        (e["host"].as_str(), e["port"].as_u64()),
        (Some("127.0.0.1"), Some(44818))
    );
    assert!(
        e["identity"]["product_name"]
            .as_str()
            .unwrap()
            .contains("1756"),
        "{e}"
    );
    bacnet.stop("KILL");
    enip.stop("KILL");
}
