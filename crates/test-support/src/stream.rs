//! A WebSocket client of the live stream `/v1/ws`.

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::time::Duration;
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};

use crate::TestApp;

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

impl TestApp {
    /// Opens the stream with `Authorization: Bearer <key>`.
    pub async fn open_stream(&self, key: &str) -> Socket {
        let mut req = format!("ws://{}/v1/ws", self.addr)
            .into_client_request()
            .unwrap();
        req.headers_mut()
            .insert("authorization", format!("Bearer {key}").parse().unwrap());
        tokio_tungstenite::connect_async(req)
            .await
            .expect("websocket connects")
            .0
    }

    /// Opens the stream with the admin key in the query string (as browsers do) and sends
    /// `subscribe`.
    pub async fn subscribe(&self, subscribe: Value) -> Socket {
        let url = format!("ws://{}/v1/ws?access_token={}", self.addr, self.admin_key);
        let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        send(&mut ws, subscribe).await;
        ws
    }
}

pub async fn send(ws: &mut Socket, v: Value) {
    ws.send(Message::Text(v.to_string().into())).await.unwrap();
}

/// The next JSON message, or the close frame as `{"close": code, "reason": ...}`.
pub async fn next(ws: &mut Socket) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a message within 10 s");
        match msg {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(t.as_str()).unwrap(),
            Some(Ok(Message::Close(frame))) => {
                let f = frame.unwrap();
                return json!({"close": u16::from(f.code), "reason": f.reason.as_str()});
            }
            Some(Ok(_)) => continue,
            other => panic!("stream ended: {other:?}"),
        }
    }
}

/// The next message of `type` (skipping others, such as subscription confirmations).
pub async fn next_of_type(ws: &mut Socket, kind: &str) -> Value {
    loop {
        let v = next(ws).await;
        if v["type"] == kind {
            return v;
        }
    }
}
