//! `plantd-bench identity`: what OAuth 2.0 costs. Client-credentials grants per second at
//! `POST /oauth/token` (client authentication, a grant row, an RS256 signature), and
//! `GET /v1/data-sources` authenticated by an RS256 access token against the same request with an
//! API key, in one run (issue 13's target: the token within 15% of the key). SQLite and
//! PostgreSQL; the release server runs in its own process and shares the cores with the load.

use anyhow::{Context, Result};
use hyper::body::Bytes;
use serde_json::json;
use std::time::Duration;

use crate::api::seed_data_sources;
use crate::harness::{
    Load, Options, Probe, backends, connect, drop_database, load_probe, post_json, request_table,
    start_server,
};

pub(crate) async fn run(o: &Options) -> Result<()> {
    let connections = o.connections.unwrap_or(16);
    request_table(
        "identity",
        connections,
        o,
        "rate limiting on (finite enterprise limits), audit on; 20 data sources; rows alternate key and token twice and add up",
        52,
    );
    for (backend, url) in &backends(o) {
        let (server, key) = start_server(o, url.as_deref())?;
        let addr = server.addr.clone();
        let mut sender = connect(&addr).await?;
        seed_data_sources(&mut sender, &addr, &key).await?;
        let app = post_json(
            &mut sender,
            &addr,
            "/v1/oauth/applications",
            &key,
            &json!({"name": "bench", "application_type": "web",
                "redirect_uris": ["https://bench.example/cb"], "scopes": ["read:assets"]}),
            201,
        )
        .await?;
        let client_id = app["data"]["client_id"].as_str().context("client_id")?;
        let secret = app["data"]["client_secret"]
            .as_str()
            .context("client_secret")?;
        let grant = Probe {
            method: "POST",
            path: "/oauth/token".into(),
            authorization: String::new(),
            body: Some((
                "application/x-www-form-urlencoded",
                Bytes::from(format!(
                    "grant_type=client_credentials&client_id={client_id}&client_secret={secret}"
                )),
            )),
            expect: 200,
        };
        let (status, answer) = grant.call(&mut sender, &addr).await?;
        anyhow::ensure!(
            status == 200,
            "the token endpoint answered {status}: {}",
            String::from_utf8_lossy(&answer)
        );
        let token: serde_json::Value = serde_json::from_slice(&answer)?;
        let token = token["access_token"].as_str().context("access_token")?;

        let with_key = Probe::get("/v1/data-sources", &key);
        let with_token = Probe::get("/v1/data-sources", token);
        let warm = Duration::from_secs(2);
        load_probe(&addr, &with_key, connections, warm).await?;
        load_probe(&addr, &with_token, connections, warm).await?;
        // Alternating halves, so a noisy neighbour weighs on both credentials alike.
        let half = o.duration / 2;
        let (mut keyed, mut tokened) = (Load::default(), Load::default());
        for _ in 0..2 {
            keyed.add(load_probe(&addr, &with_key, connections, half).await?);
            tokened.add(load_probe(&addr, &with_token, connections, half).await?);
        }
        let grants = load_probe(&addr, &grant, connections, o.duration).await?;
        let rows = [
            ("GET /v1/data-sources, API key", &keyed),
            ("GET /v1/data-sources, RS256 access token", &tokened),
            ("POST /oauth/token client_credentials (grants)", &grants),
        ];
        for (label, r) in rows {
            r.print_row(backend, label, 52);
        }
        println!(
            "{:<11} token / key throughput: {:.1}% (target: >= 85%)\n",
            backend,
            100.0 * tokened.per_second() / keyed.per_second()
        );
        drop(server);
        drop_database(url.as_deref(), o.postgres_url.as_deref());
    }
    println!(
        "target (issue 13): GET /v1/data-sources with a JWT within 15% of the same with an API key; client-credentials grants/s reported (client_secret_post)"
    );
    Ok(())
}
