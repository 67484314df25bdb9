//! A TCP relay that can be cut and restored on the same port: what a client behind it sees of a
//! server that stops and comes back (connections refused while it is down, open ones cut).

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub struct Relay {
    /// Where clients connect.
    pub addr: SocketAddr,
    target: String,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.down();
    }
}

impl Relay {
    /// A relay on a free loopback port to `target` (`host:port`), up.
    pub async fn start(target: String) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
        let relay = Relay {
            addr: listener.local_addr().expect("relay address"),
            target,
            task: Mutex::new(None),
        };
        relay.serve(listener);
        relay
    }

    fn serve(&self, listener: TcpListener) {
        let target = self.target.clone();
        let task = tokio::spawn(async move {
            // Dropped with the task: every connection is cut when the relay goes down.
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                conns.spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        *self.task.lock().unwrap() = Some(task);
    }

    /// Cuts every connection and refuses new ones.
    pub fn down(&self) {
        if let Some(t) = self.task.lock().unwrap().take() {
            t.abort();
        }
    }

    /// Listens again on the same port.
    pub async fn up(&self) {
        for _ in 0..100 {
            if let Ok(listener) = TcpListener::bind(self.addr).await {
                self.serve(listener);
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the relay cannot listen on {} again", self.addr);
    }
}
