//! The live stream `/v1/ws` with a real WebSocket client: authentication, subscriptions by data
//! source, asset and tag, points as they are ingested, and the tier limits' close reasons.

use plantd_model::{Scope, Tier, Timestamp};
use plantd_test_support::spawn_app;
use plantd_test_support::stream::{next, send};
use serde_json::{Value, json};
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

fn point(asset: &str, tag: &str, value: f64) -> Value {
    json!({"asset_id": asset, "tag_name": tag, "value": value, "timestamp": Timestamp::now().to_rfc3339()})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_receive_matching_points_as_they_are_ingested() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let ds = app
        .post(
            "/data-sources",
            k,
            json!({"name": "PLC", "type": "modbus", "config": {"host": "h"}}),
        )
        .await
        .expect(201);
    let ds_id = ds.id();
    let mut ws = app.open_stream(k).await;
    send(&mut ws, json!({"type": "ping"})).await;
    assert_eq!(next(&mut ws).await, json!({"type": "pong"}));
    send(
        &mut ws,
        json!({"type": "subscribe", "asset_id": "Pump_01", "tag_name": "Flow"}),
    )
    .await;
    let sub = next(&mut ws).await;
    assert_eq!(sub["type"], "subscribed");
    let flow = sub["subscription"].as_str().unwrap().to_string();
    send(
        &mut ws,
        json!({"type": "subscribe", "data_source_id": ds_id}),
    )
    .await;
    let by_source = next(&mut ws).await["subscription"]
        .as_str()
        .unwrap()
        .to_string();

    app.post("/telemetry", k, json!({"data": [point("Pump_01", "Flow", 12.5), point("Pump_01", "Speed", 1450.0), point("Other", "Flow", 1.0)]}))
        .await
        .expect(200);
    let m = next(&mut ws).await;
    assert_eq!(m["type"], "telemetry");
    assert_eq!(m["subscription"], flow.as_str());
    assert_eq!(m["data"].as_array().unwrap().len(), 1);
    assert_eq!(m["data"][0]["value"], 12.5);
    assert_eq!(m["data"][0]["quality"], "good");

    app.post(
        "/telemetry",
        k,
        json!({"data_source_id": ds_id, "data": [point("Line", "T", 3.0)]}),
    )
    .await
    .expect(200);
    let m = next(&mut ws).await;
    assert_eq!(
        (
            m["subscription"].as_str().unwrap(),
            m["data"][0]["asset_id"].as_str().unwrap()
        ),
        (by_source.as_str(), "Line")
    );

    // Another organization's points never arrive; unsubscribing stops a subscription.
    let (_, other) = app.other_org("Other Co", Tier::Enterprise).await;
    app.post(
        "/telemetry",
        &other,
        json!({"data": [point("Pump_01", "Flow", 99.0)]}),
    )
    .await
    .expect(200);
    send(
        &mut ws,
        json!({"type": "unsubscribe", "subscription": flow}),
    )
    .await;
    assert_eq!(
        next(&mut ws).await,
        json!({"type": "unsubscribed", "subscription": flow})
    );
    app.post(
        "/telemetry",
        k,
        json!({"data": [point("Pump_01", "Flow", 13.0)]}),
    )
    .await
    .expect(200);
    send(&mut ws, json!({"type": "ping"})).await;
    assert_eq!(
        next(&mut ws).await,
        json!({"type": "pong"}),
        "nothing else was queued for us"
    );

    // Bad messages get an error message, not a dropped connection.
    send(&mut ws, json!({"type": "subscribe", "asset": "x"})).await;
    assert_eq!(next(&mut ws).await["code"], "validation_error");
    send(
        &mut ws,
        json!({"type": "unsubscribe", "subscription": "s999"}),
    )
    .await;
    assert_eq!(next(&mut ws).await["code"], "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_and_scopes() {
    let app = spawn_app().await;
    // No key: refused before the upgrade, in the API's envelope.
    let url = format!("ws://{}/v1/ws", app.addr);
    match tokio_tungstenite::connect_async(url.as_str()).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 401),
        other => panic!("expected 401, got {other:?}"),
    }
    let writer = app.key(&[Scope::WriteTelemetry]).await;
    let mut req = url.as_str().into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {writer}").parse().unwrap());
    match tokio_tungstenite::connect_async(req).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 403),
        other => panic!("expected 403, got {other:?}"),
    }
    // Browsers cannot send headers: the key may come as access_token on this route.
    let reader = app.key(&[Scope::ReadTelemetry]).await;
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("{url}?access_token={reader}"))
        .await
        .unwrap();
    send(&mut ws, json!({"type": "ping"})).await;
    assert_eq!(next(&mut ws).await["type"], "pong");
    // ...but nowhere else.
    let r = app
        .client
        .get(format!(
            "{}/data-sources?access_token={}",
            app.base, app.admin_key
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // A plain GET without an upgrade is a clear 400.
    let r = app.get("/ws", &reader).await.expect(400);
    assert_eq!(r.code(), "validation_error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tier_limits_close_with_a_reason() {
    let app = spawn_app().await;
    let (_, trial) = app.other_org("Trial", Tier::Trial).await;
    // Trial: 2 connections.
    let mut a = app.open_stream(&trial).await;
    let mut b = app.open_stream(&trial).await;
    let mut c = app.open_stream(&trial).await;
    let closed = next(&mut c).await;
    assert_eq!(closed["close"], u16::from(CloseCode::Policy));
    assert!(
        closed["reason"]
            .as_str()
            .unwrap()
            .contains("connection limit of 2 for the trial tier"),
        "{closed}"
    );
    // Trial: 5 messages per second in.
    for _ in 0..6 {
        send(&mut a, json!({"type": "ping"})).await;
    }
    let mut saw_close = None;
    for _ in 0..6 {
        let m = next(&mut a).await;
        if m.get("close").is_some() {
            saw_close = Some(m);
            break;
        }
    }
    let m = saw_close.expect("the sixth message in one second closes the connection");
    assert!(
        m["reason"]
            .as_str()
            .unwrap()
            .contains("inbound message rate limit of 5/s"),
        "{m}"
    );
    // A slot freed by a closed connection can be used again.
    drop(a);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut d = app.open_stream(&trial).await;
    send(&mut d, json!({"type": "ping"})).await;
    assert_eq!(next(&mut d).await["type"], "pong");
    send(&mut b, json!({"type": "ping"})).await;
    assert_eq!(next(&mut b).await["type"], "pong");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_beyond_its_outbound_rate_is_closed_with_a_reason() {
    // Enterprise WebSocket limits come from configuration: 3 messages per second out here.
    let mut config = plantd_app::AppConfig::default();
    config.limits.enterprise_websocket.messages_out_per_second = Some(3);
    let app = plantd_test_support::spawn_app_with(config).await;
    let k = app.admin_key.as_str();
    let mut ws = app.open_stream(k).await;
    for _ in 0..4 {
        send(&mut ws, json!({"type": "subscribe"})).await;
        assert_eq!(next(&mut ws).await["type"], "subscribed");
    }
    // One batch, four matching subscriptions: four messages in the same second.
    app.post("/telemetry", k, json!({"data": [point("A", "T", 1.0)]}))
        .await
        .expect(200);
    for _ in 0..3 {
        assert_eq!(next(&mut ws).await["type"], "telemetry");
    }
    let closed = next(&mut ws).await;
    assert_eq!(closed["close"], u16::from(CloseCode::Policy));
    assert!(
        closed["reason"]
            .as_str()
            .unwrap()
            .contains("outbound message rate limit of 3/s for the enterprise tier"),
        "{closed}"
    );
}

/// A subscription naming its series (what a page shows) gets only their points; an empty or
/// oversized list is refused with a reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_by_series_follows_only_those() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let mut ws = app.open_stream(k).await;
    send(
        &mut ws,
        json!({"type": "subscribe", "series": [
            {"asset_id": "Pump_01", "tag_name": "Flow"}, {"asset_id": "Tank", "tag_name": "Level"}]}),
    )
    .await;
    let sub = next(&mut ws).await;
    assert_eq!(sub["type"], "subscribed", "{sub}");
    assert_eq!(sub["filter"]["series"].as_array().unwrap().len(), 2);
    app.post(
        "/telemetry",
        k,
        json!({"data": [point("Pump_01", "Flow", 1.0), point("Pump_01", "Speed", 2.0),
        point("Tank", "Flow", 3.0), point("Tank", "Level", 4.0)]}),
    )
    .await
    .expect(200);
    let m = next(&mut ws).await;
    let got: Vec<(&str, &str)> = m["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["asset_id"].as_str().unwrap(),
                p["tag_name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [("Pump_01", "Flow"), ("Tank", "Level")]);

    send(&mut ws, json!({"type": "subscribe", "series": []})).await;
    let refused = next(&mut ws).await;
    assert_eq!(refused["code"], "validation_error");
    assert!(refused["message"].as_str().unwrap().contains("series"));
    let many: Vec<Value> = (0..1001)
        .map(|i| json!({"asset_id": format!("A{i}"), "tag_name": "T"}))
        .collect();
    send(&mut ws, json!({"type": "subscribe", "series": many})).await;
    assert_eq!(next(&mut ws).await["code"], "validation_error");
    send(
        &mut ws,
        json!({"type": "subscribe", "series": [{"asset_id": "A"}]}),
    )
    .await;
    assert_eq!(next(&mut ws).await["code"], "validation_error");
}
