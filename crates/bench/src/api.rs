//! `plantd-bench api`: authenticated `GET /v1/data-sources` requests per second and latency
//! percentiles over loopback, with rate limiting (finite enterprise limits) and audit on, on
//! SQLite and on PostgreSQL, beside `GET /v1/health` (the HTTP stack without auth or database)
//! as a reference ceiling. The server runs as its own process (the release `plantd` binary next
//! to this one); the load generator is a lean HTTP/1.1 keep-alive client. Both share the
//! machine's cores: the table says so.

use anyhow::{Result, bail};
use http_body_util::Full;
use hyper::body::Bytes;
use std::time::Duration;

use crate::harness::{Options, backends, connect, drop_database, load, request, start_server};

pub(crate) async fn run(o: &Options) -> Result<()> {
    let backends = backends(o);
    crate::harness::request_table(
        "API",
        o.connections.unwrap_or(16),
        o,
        "rate limiting on (finite enterprise limits), audit on; 20 data sources in the organization",
        38,
    );
    for (name, url) in &backends {
        let (server, key) = start_server(o, url.as_deref())?;
        let mut sender = connect(&server.addr).await?;
        seed_data_sources(&mut sender, &server.addr, &key).await?;
        let _ = load(
            &server.addr,
            &key,
            "/v1/data-sources",
            o.connections.unwrap_or(16),
            Duration::from_secs(2),
        )
        .await?;
        for (label, path) in [
            (
                "GET /v1/data-sources (auth, limits, list)",
                "/v1/data-sources",
            ),
            ("GET /v1/health (reference)", "/v1/health"),
        ] {
            let r = load(
                &server.addr,
                &key,
                path,
                o.connections.unwrap_or(16),
                o.duration,
            )
            .await?;
            r.print_row(name, label, 38);
        }
        drop(server);
        drop_database(url.as_deref(), o.postgres_url.as_deref());
    }
    println!(
        "\ntarget (issue 2): >= 20,000 req/s and p99 < 5 ms for GET /v1/data-sources on 2 cores"
    );
    Ok(())
}

/// The 20 data sources (about 6 KB of JSON) that `GET /v1/data-sources` lists in the API
/// benchmarks.
pub(crate) async fn seed_data_sources(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    addr: &str,
    key: &str,
) -> Result<()> {
    for i in 0..20 {
        let body = format!(
            r#"{{"name": "PLC {i}", "type": "modbus", "enabled": false, "config": {{"host": "10.0.0.{i}"}}}}"#
        );
        let s = request(sender, "POST", addr, "/v1/data-sources", key, Some(&body)).await?;
        if s != 201 {
            bail!("creating data sources failed with {s}");
        }
    }
    Ok(())
}
