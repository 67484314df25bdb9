//! The server under test: [`spawn_app`] (a fresh database, an organization with its owner and
//! admin key, the real server on port 0), HTTP helpers ([`TestApp`], [`Reply`]), peers.

use crate::{fresh_database, unique_name};
use plantd_app::{AppConfig, operator};
use plantd_model::{Scope, Tier};
use plantd_store::Store;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::net::SocketAddr;
use std::path::PathBuf;

pub struct TestApp {
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT/v1`
    pub base: String,
    pub client: reqwest::Client,
    pub store: Store,
    /// The organization created for the test (enterprise) and an admin key of it.
    pub org_id: String,
    pub admin_key: String,
    pub database_url: String,
    /// The application the server serves (what other doors, such as MQTT, are started with).
    pub app: plantd_app::App,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    temp_dir: Option<PathBuf>,
}

/// A response read whole: status, headers and JSON body (`Value::Null` when not JSON).
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
    pub json: Value,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    /// The `id` of the record in `data` (a created resource's).
    pub fn id(&self) -> String {
        self.json["data"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no data.id in {}", self.text))
            .to_string()
    }
    /// The items of a list answer's `data`.
    pub fn items(&self) -> Vec<Value> {
        self.json["data"]
            .as_array()
            .unwrap_or_else(|| panic!("no data list in {}", self.text))
            .clone()
    }
    /// The error code of an error envelope.
    pub fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or_default()
    }
    /// Panics with the body when the status differs: test failures then show the answer.
    pub fn expect(self, status: u16) -> Self {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status; body: {}",
            self.text
        );
        self
    }
}

/// The value of `var`, naming an external peer a test needs (a python with a package, a
/// broker, a program); without it, `None` and a line saying the test is skipped and how to run
/// it (`how`). Under CI (`CI` set) a missing peer fails the test: CI provides every peer.
pub fn peer(var: &str, how: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) => Some(value),
        Err(_) => {
            assert!(std::env::var("CI").is_err(), "CI must set {var}");
            eprintln!("skipped: set {var} {how}");
            None
        }
    }
}

/// Runs the independent peer `tests/interop/<script>` with `python` and `args`; panics with its
/// output unless it succeeds, and answers what it printed, in which a test looks for each
/// `ok <step>` line with [`printed_every`].
pub async fn run_interop(python: &str, script: &str, args: &[&str]) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/interop")
        .join(script);
    let out = tokio::process::Command::new(python)
        .arg(path)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {python} {script}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script} failed:\n{stdout}\n{stderr}");
    stdout
}

/// Panics unless `stdout` holds an `ok <step>` line for each step.
pub fn printed_every(stdout: &str, steps: &[&str]) {
    for step in steps {
        assert!(stdout.contains(&format!("ok {step}")), "{step}: {stdout}");
    }
}

/// An HTTP client for tests (with the process's TLS provider installed, as the server's).
pub fn client() -> reqwest::Client {
    plantd_alerts::tls::install_provider();
    reqwest::Client::new()
}

/// Starts the app with default configuration.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(AppConfig::default()).await
}

pub async fn spawn_app_with(config: AppConfig) -> TestApp {
    spawn_app_on(bind_loopback().await, config).await
}

/// A listener on a free loopback port: bind several first when servers must know each
/// other's addresses before they start (the regions of one deployment).
pub async fn bind_loopback() -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind port 0")
}

/// Serves an empty database (no organization, user or key: `org_id` and `admin_key` are
/// empty) on `listener`: a region that receives its organizations through replication.
pub async fn spawn_empty_on(listener: tokio::net::TcpListener, config: AppConfig) -> TestApp {
    let (database_url, temp_dir) = fresh_database().await;
    let store = Store::connect(&database_url)
        .await
        .expect("connect to the test database");
    start_node(
        listener,
        store,
        config,
        String::new(),
        String::new(),
        database_url,
        temp_dir,
    )
    .await
}

/// [`spawn_app_with`] on `listener`.
pub async fn spawn_app_on(listener: tokio::net::TcpListener, config: AppConfig) -> TestApp {
    // PLANTD_TEST_LOG=debug shows the server's log in test output.
    if let Ok(filter) = std::env::var("PLANTD_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    }
    let (database_url, temp_dir) = fresh_database().await;
    let store = Store::connect(&database_url)
        .await
        .expect("connect to the test database");
    let org = operator::create_org(&store, "Test Org", Tier::Enterprise)
        .await
        .expect("create org");
    operator::create_user(
        &store,
        Some(&org.id),
        "owner@example.com",
        "station-7-valve",
        plantd_model::org::Role::Owner,
    )
    .await
    .expect("create owner");
    let (_, admin_key) =
        operator::create_key(&store, Some(&org.id), "test admin", &[Scope::Admin], None)
            .await
            .expect("create admin key");
    start_node(
        listener,
        store,
        config,
        org.id,
        admin_key,
        database_url,
        temp_dir,
    )
    .await
}

/// Serves `store` on `listener`.
async fn start_node(
    listener: tokio::net::TcpListener,
    store: Store,
    config: AppConfig,
    org_id: String,
    admin_key: String,
    database_url: String,
    temp_dir: Option<PathBuf>,
) -> TestApp {
    let addr = listener.local_addr().expect("local addr");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let app = plantd_app::App::new(store.clone(), config.listening_on(addr));
    let server = tokio::spawn(plantd_api::serve(listener, app.clone(), async {
        let _ = rx.await;
    }));
    TestApp {
        addr,
        base: format!("http://{addr}/v1"),
        client: client(),
        store,
        org_id,
        admin_key,
        database_url,
        app,
        shutdown: Some(tx),
        server: Some(server),
        temp_dir,
    }
}

impl TestApp {
    /// Starts the MQTT device channel of this server on a free loopback port.
    pub async fn start_mqtt(&self) -> plantd_mqtt::MqttChannel {
        self.start_mqtt_tls(None).await
    }

    /// Starts the MQTT device channel, and MQTT over TLS with `(certificate, key)` files, on
    /// free loopback ports.
    pub async fn start_mqtt_tls(
        &self,
        tls: Option<(PathBuf, PathBuf)>,
    ) -> plantd_mqtt::MqttChannel {
        let loopback: SocketAddr = "127.0.0.1:0".parse().expect("an address");
        let settings = plantd_mqtt::MqttSettings {
            listen: loopback,
            tls: tls.map(|(cert, key)| (loopback, cert, key)),
        };
        plantd_mqtt::start(self.app.clone(), &settings)
            .await
            .expect("the MQTT channel starts")
    }

    /// Sends a request with an optional bearer key and JSON body.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        read(req.send().await.expect("request sent")).await
    }

    /// Sends raw bytes with a content type.
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        content_type: &str,
        body: &str,
    ) -> Reply {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("content-type", content_type)
            .body(body.to_string());
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        read(req.send().await.expect("request sent")).await
    }

    pub async fn get(&self, path: &str, key: &str) -> Reply {
        self.call(Method::GET, path, Some(key), None).await
    }
    pub async fn post(&self, path: &str, key: &str, body: Value) -> Reply {
        self.call(Method::POST, path, Some(key), Some(body)).await
    }
    pub async fn put(&self, path: &str, key: &str, body: Value) -> Reply {
        self.call(Method::PUT, path, Some(key), Some(body)).await
    }
    pub async fn delete(&self, path: &str, key: &str) -> Reply {
        self.call(Method::DELETE, path, Some(key), None).await
    }

    /// Reads the list at `path` (admin key) until `done` holds of it, for at most 30 s.
    pub async fn wait_list(&self, path: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let list = self.get(path, &self.admin_key).await.expect(200).json["data"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if done(&list) {
                return list;
            }
            assert!(std::time::Instant::now() < deadline, "{path}: {list:?}");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// A key of this test's organization with `scopes`.
    pub async fn key(&self, scopes: &[Scope]) -> String {
        operator::create_key(&self.store, Some(&self.org_id), "test key", scopes, None)
            .await
            .expect("create key")
            .1
    }

    /// Another organization with an owner and an admin key: `(org_id, admin_key)`.
    pub async fn other_org(&self, name: &str, tier: Tier) -> (String, String) {
        let org = operator::create_org(&self.store, name, tier)
            .await
            .expect("create org");
        let email = format!("owner-{}@example.com", unique_name());
        operator::create_user(
            &self.store,
            Some(&org.id),
            &email,
            "station-7-valve",
            plantd_model::org::Role::Owner,
        )
        .await
        .expect("create owner");
        let (_, key) =
            operator::create_key(&self.store, Some(&org.id), "admin", &[Scope::Admin], None)
                .await
                .expect("key");
        (org.id, key)
    }

    /// Another API node on the same database (as on PostgreSQL, where several nodes share
    /// one), for the same organization and admin key; default configuration.
    pub async fn another_node(&self) -> TestApp {
        self.another_node_with(AppConfig::default()).await
    }

    /// Another node on the same database with `config`.
    pub async fn another_node_with(&self, config: AppConfig) -> TestApp {
        let store = Store::connect(&self.database_url)
            .await
            .expect("connect to the shared database");
        start_node(
            bind_loopback().await,
            store,
            config,
            self.org_id.clone(),
            self.admin_key.clone(),
            self.database_url.clone(),
            None,
        )
        .await
    }

    /// Stops the server gracefully and waits for it.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(dir) = &self.temp_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

async fn read(resp: reqwest::Response) -> Reply {
    let status = resp.status();
    let headers = resp.headers().clone();
    let text = resp.text().await.unwrap_or_default();
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        text,
        json,
    }
}
