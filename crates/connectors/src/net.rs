//! TCP dialling with messages a user can act on.

use std::time::Duration;
use tokio::net::TcpStream;

/// `host:port`, with IPv6 addresses in brackets.
pub fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Resolves `host` and connects to the first address that answers, within `timeout`.
pub async fn dial(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, String> {
    let addr = host_port(host, port);
    let attempt = async {
        let addrs: Vec<_> = tokio::net::lookup_host(&addr)
            .await
            .map_err(|_| format!("could not resolve host '{host}'"))?
            .collect();
        let mut last = format!("could not resolve host '{host}'");
        for a in addrs {
            match TcpStream::connect(a).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) => last = describe_io_error(&e, &addr),
            }
        }
        Err(last)
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "no answer from {addr} within {} s (timed out)",
            timeout.as_secs_f64()
        )),
    }
}

pub fn describe_io_error(e: &std::io::Error, addr: &str) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => format!("connection refused by {addr}: nothing listens on that port"),
        TimedOut => format!("connection to {addr} timed out"),
        HostUnreachable | NetworkUnreachable => format!("{addr} is unreachable from this server"),
        PermissionDenied => format!("connecting to {addr} is not permitted"),
        ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof => {
            format!("{addr} closed the connection")
        }
        _ if e.to_string().contains("lookup address") => {
            let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
            format!("could not resolve host '{host}'")
        }
        _ => format!("could not connect to {addr}: {e}"),
    }
}

/// How long a connection test may take in all.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a connection test that ran out of time says.
pub(crate) fn timed_out(target: &str) -> String {
    format!(
        "no answer from {target} within {} s (timed out)",
        PROBE_TIMEOUT.as_secs()
    )
}
