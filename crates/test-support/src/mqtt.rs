//! A device's MQTT 3.1.1 client for tests (rumqttc): connect with a device's credentials, read
//! what the broker publishes to it.

use rumqttc::{AsyncClient, ConnectReturnCode, Event, EventLoop, MqttOptions, Packet};
use std::time::Duration;

/// An MQTT 3.1.1 client logged in as a device; its event loop runs in a task that forwards
/// incoming publishes and the CONNACK code.
pub struct Device {
    pub client: AsyncClient,
    pub incoming: tokio::sync::mpsc::UnboundedReceiver<Packet>,
}

pub fn options(
    addr: std::net::SocketAddr,
    client_id: &str,
    user: &str,
    password: &str,
) -> MqttOptions {
    let mut o = MqttOptions::new(client_id, addr.ip().to_string(), addr.port());
    o.set_credentials(user, password);
    o.set_keep_alive(Duration::from_secs(30));
    o
}

async fn drive(mut events: EventLoop, tx: tokio::sync::mpsc::UnboundedSender<Packet>) {
    loop {
        match events.poll().await {
            Ok(Event::Incoming(p)) => {
                if tx.send(p).is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(rumqttc::ConnectionError::ConnectionRefused(code)) => {
                let _ = tx.send(Packet::ConnAck(rumqttc::ConnAck::new(code, false)));
                return;
            }
            Err(_) => {
                let _ = tx.send(Packet::Disconnect);
                return;
            }
        }
    }
}

pub async fn connect(opts: MqttOptions) -> (Device, ConnectReturnCode) {
    let (client, events) = AsyncClient::new(opts, 64);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(drive(events, tx));
    let code = loop {
        match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
            Ok(Some(Packet::ConnAck(c))) => break c.code,
            Ok(Some(Packet::Disconnect)) | Ok(None) => break ConnectReturnCode::ServiceUnavailable,
            Ok(Some(_)) => continue,
            Err(_) => panic!("no CONNACK within 10 s"),
        }
    };
    (
        Device {
            client,
            incoming: rx,
        },
        code,
    )
}

pub async fn next_publish(d: &mut Device, secs: u64) -> Option<rumqttc::Publish> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        match tokio::time::timeout_at(deadline, d.incoming.recv()).await {
            Ok(Some(Packet::Publish(p))) => return Some(p),
            Ok(Some(Packet::Disconnect)) | Ok(None) | Err(_) => return None,
            Ok(Some(_)) => continue,
        }
    }
}
