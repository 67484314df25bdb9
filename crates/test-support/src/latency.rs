//! A TCP relay that delays every byte by a fixed time in each direction, so tests of regions
//! measure real round trips between "distant" instances on loopback. (The machine's kernel has
//! no `sch_netem`, so `tc netem` cannot add the delay.)

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// A running relay: connect to `addr`, reach the target `one_way` later in each direction.
pub struct DelayedRelay {
    pub addr: std::net::SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for DelayedRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a relay on a free loopback port to `target` (`host:port`) adding `one_way` to each
/// direction (a round trip costs twice that).
pub async fn delayed_relay(target: String, one_way: Duration) -> DelayedRelay {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
    let addr = listener.local_addr().expect("relay address");
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        while let Ok((inbound, _)) = listener.accept().await {
            let target = target.clone();
            conns.spawn(async move {
                let Ok(outbound) = TcpStream::connect(&target).await else {
                    return;
                };
                let (in_read, in_write) = inbound.into_split();
                let (out_read, out_write) = outbound.into_split();
                let up = tokio::spawn(pump(in_read, out_write, one_way));
                pump(out_read, in_write, one_way).await;
                up.abort();
            });
        }
    });
    DelayedRelay { addr, task }
}

/// Copies `from` to `to`, each chunk written `delay` after it was read, in order.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((due, bytes)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    });
    let mut buf = vec![0_u8; 64 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = writer.await;
}
