//! The edge agent's uplink (issue 34; docs/api.md, "Store and forward"): once the agent is
//! enrolled, it connects to its cloud's MQTT device channel as its fleet device and
//!
//! - forwards what it stores: the telemetry outbox, its records packed into messages of up to
//!   5,000 points published with QoS 1, each record deleted only when the cloud has
//!   acknowledged every message carrying its points (the cloud acknowledges after its own
//!   durable write), so nothing is lost to a cut connection or a restart. What was kept while
//!   the cloud was away (the records older than the connection) goes oldest first at most
//!   `backfill_points_per_second`; what arrives meanwhile (live) goes at once beside it;
//! - sends its heartbeat every `heartbeat_interval` and answers its commands; the self-update's
//!   reports go on its `ota` topic and are sent again on the next connection until the cloud
//!   acknowledged them;
//! - checks its regional cloud's health every `health_check_interval` and, by the failover rule
//!   (`plantd_model::edge_regions::Failover`), moves to the next region of its order and back.

use plantd_app::App;
use plantd_app::edge_forward::{
    OutboxRecord, POINTS_PER_MESSAGE, UplinkLogin, mqtt_address, telemetry_payload,
};
use plantd_model::edge_regions::{Failover, RegionalCloud};
use plantd_model::telemetry::Point;
use rumqttc::{AsyncClient, Event, MqttOptions, Outgoing, Packet, QoS};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// Messages of the outbox in flight (published, not yet acknowledged) at most.
const WINDOW: usize = 16;
/// How often the uplink looks for new records in the outbox.
const LOOK_EVERY: Duration = Duration::from_millis(250);
/// Largest MQTT packet the uplink sends or takes (the cloud's broker takes 4 MiB).
const MAX_PACKET: usize = 4 * 1024 * 1024;
/// How often the agent looks whether what its tags measure changed (a source read units), to
/// tell the cloud again.
const DESCRIBE_EVERY: Duration = Duration::from_secs(5);

/// What a publish carries, to know what its acknowledgement settles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sent {
    /// A message of the outbox's points (its number in `carried`).
    Outbox(u64),
    /// A self-update report (its number).
    Report(u64),
    /// A heartbeat, an answer, a tag description: nothing waits for its acknowledgement.
    Other,
}

/// Runs the uplink of the agent's organization until `stop`.
pub fn start(app: App, org_id: String, stop: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(run(app, org_id, stop))
}

async fn run(app: App, org_id: String, mut stop: watch::Receiver<bool>) {
    let Some(edge) = app.config().edge.clone() else {
        return;
    };
    let mut regions: Vec<RegionalCloud> = Vec::new();
    let mut health: Option<JoinHandle<()>> = None;
    let (moved_tx, mut moved) = watch::channel(0usize);
    let moved_tx = std::sync::Arc::new(moved_tx);
    let mut delay = Duration::from_secs(1);
    loop {
        if *stop.borrow() {
            break;
        }
        let (login, order) = match app.uplink_route(&org_id).await {
            Ok(Some((login, order))) if !order.is_empty() => (login, order),
            _ => {
                // Not enrolled yet (or the database is busy): look again.
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(2)) => continue,
                    _ = stop.changed() => break,
                }
            }
        };
        if order != regions {
            if let Some(h) = health.take() {
                h.abort();
            }
            regions = order;
            let _ = moved_tx.send(0);
            health = Some(tokio::spawn(check_health(
                app.clone(),
                regions.clone(),
                login.clone(),
                edge.regions.health_check_interval,
                edge.regions.failover_threshold,
                moved_tx.clone(),
            )));
        }
        let cloud = regions[(*moved.borrow_and_update()).min(regions.len() - 1)].clone();
        app.uplink_reaching(&cloud);
        let outcome = session(&app, &org_id, &login, &cloud, &edge, &mut moved, &mut stop).await;
        match outcome {
            Ok(()) => delay = Duration::from_secs(1),
            Err(e) => {
                tracing::info!(region = %cloud.region, error = %e, "edge agent: the cloud's MQTT channel is not reachable; the points wait on the agent");
                app.uplink_connected(false, Some(e));
                // Wait before trying again, unless the failover rule moves the agent meanwhile.
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = moved.changed() => {}
                    _ = stop.changed() => {}
                }
                delay = (delay * 2).min(Duration::from_secs(30));
            }
        }
    }
    if let Some(h) = health {
        h.abort();
    }
    app.uplink_connected(false, Some("the agent stopped".into()));
}

/// The failover rule's health checks, every `interval`: the current region's and, while away,
/// the primary's (`App::region_serves`). A move is told on `moved`.
async fn check_health(
    app: App,
    regions: Vec<RegionalCloud>,
    login: UplinkLogin,
    interval: Duration,
    threshold: u32,
    moved: std::sync::Arc<watch::Sender<usize>>,
) {
    let mut rule = Failover::new(regions.len(), threshold);
    loop {
        tokio::time::sleep(interval).await;
        let current = rule.current();
        let current_ok = app.region_serves(&regions[current], &login).await;
        let primary_ok = if rule.away() {
            Some(app.region_serves(&regions[0], &login).await)
        } else {
            None
        };
        if let Some(to) = rule.observe(current_ok, primary_ok) {
            let reason = if to == 0 && current_ok {
                format!("{threshold} successful health checks of the primary region")
            } else {
                format!("{threshold} failed health checks")
            };
            app.uplink_failed_over(&regions[current], &regions[to], &reason);
            let _ = moved.send(to);
        }
    }
}

/// One outbox record on its way: its messages not yet acknowledged and its points in them.
struct InFlight {
    messages: usize,
    points: u64,
}

/// A token bucket of points per second for the backlog.
struct Bucket {
    rate: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn new(rate: u64) -> Self {
        Self {
            rate: rate.max(1) as f64,
            tokens: rate.max(1) as f64,
            at: Instant::now(),
        }
    }
    /// Whether a record of `points` may go now (taking its tokens).
    fn take(&mut self, points: usize) -> bool {
        let now = Instant::now();
        self.tokens =
            (self.tokens + now.duration_since(self.at).as_secs_f64() * self.rate).min(self.rate);
        self.at = now;
        if self.tokens >= (points as f64).min(self.rate) {
            self.tokens -= points as f64;
            true
        } else {
            false
        }
    }
}

/// One connection to `cloud` until it fails (Err), the failover rule moves the agent or it
/// stops (Ok).
async fn session(
    app: &App,
    org_id: &str,
    login: &UplinkLogin,
    cloud: &RegionalCloud,
    edge: &plantd_app::EdgeSettings,
    moved: &mut watch::Receiver<usize>,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), String> {
    let mqtt = cloud.mqtt.as_deref().ok_or_else(|| {
        format!(
            "the region {} names no MQTT address (its cloud runs without --mqtt-listen?); name it with PLANTD_MQTT_URL",
            cloud.region
        )
    })?;
    let (host, port) = mqtt_address(mqtt)?;
    let mut o = MqttOptions::new(&login.device_id, host, port);
    o.set_credentials(login.device_id.clone(), login.password.clone());
    o.set_keep_alive(Duration::from_secs(30));
    o.set_clean_session(true);
    o.set_max_packet_size(MAX_PACKET, MAX_PACKET);
    let (client, mut events) = AsyncClient::new(o, 4 * WINDOW);
    let (answers_tx, mut answers) = mpsc::channel::<Vec<u8>>(16);

    let mut connected = false;
    // Records up to this id were kept before the connection: the backlog.
    let mut live_from = 0i64;
    let mut in_flight: HashMap<i64, InFlight> = HashMap::new();
    // The records each outbox message carries points of, by the message's number.
    let mut carried: HashMap<u64, Vec<i64>> = HashMap::new();
    let mut next_message = 0u64;
    // The last look filled the window.
    let mut full = false;
    // What each publish not yet given its packet id carries.
    let mut unnumbered: VecDeque<Sent> = VecDeque::new();
    let mut by_pkid: HashMap<u16, Sent> = HashMap::new();
    let mut bucket = Bucket::new(edge.backfill_points_per_second);
    let mut look = tokio::time::interval(LOOK_EVERY);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut beat = tokio::time::interval(edge.heartbeat_interval);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // What the agent's tags measure: at each connection, then whenever it changed (units and
    // ranges a source said since, a person's words).
    let mut told_tags = None;
    let mut describe = tokio::time::interval(DESCRIBE_EVERY);
    describe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let publish = |unnumbered: &mut VecDeque<Sent>,
                   record: Sent,
                   topic: &str,
                   payload: Vec<u8>|
     -> Result<(), String> {
        unnumbered.push_back(record);
        client
            .try_publish(topic, QoS::AtLeastOnce, false, payload)
            .map_err(|e| format!("publishing: {e}"))
    };

    loop {
        tokio::select! {
            _ = stop.changed() => {
                let _ = client.try_disconnect();
                return Ok(());
            }
            _ = moved.changed() => {
                let _ = client.try_disconnect();
                return Ok(());
            }
            event = events.poll() => {
                match event.map_err(|e| format!("{mqtt}: {e}"))? {
                    Event::Incoming(Packet::ConnAck(_)) => {
                        connected = true;
                        live_from = app.outbox_newest().await.map_err(|e| e.to_string())?;
                        app.uplink_connected(true, None);
                        tracing::info!(region = %cloud.region, mqtt, "edge agent: connected to the cloud");
                        client
                            .try_subscribe(&login.topics.commands, QoS::AtLeastOnce)
                            .map_err(|e| format!("subscribing: {e}"))?;
                        // Update reports not acknowledged on an earlier connection go again.
                        app.ota_reports_resend();
                        beat.reset_immediately();
                        look.reset_immediately();
                        describe.reset_immediately();
                    }
                    Event::Outgoing(Outgoing::Publish(pkid)) => {
                        if let Some(sent) = unnumbered.pop_front()
                            && sent != Sent::Other
                        {
                            by_pkid.insert(pkid, sent);
                        }
                    }
                    Event::Incoming(Packet::PubAck(ack)) => {
                        let sent = by_pkid.remove(&ack.pkid);
                        if let Some(Sent::Report(n)) = sent {
                            app.ota_report_acked(n);
                        } else if let Some(Sent::Outbox(message)) = sent {
                            let mut done: Vec<i64> = Vec::new();
                            let mut points = 0;
                            for record in carried.remove(&message).unwrap_or_default() {
                                if let Some(f) = in_flight.get_mut(&record) {
                                    f.messages -= 1;
                                    if f.messages == 0 {
                                        points += f.points;
                                        in_flight.remove(&record);
                                        done.push(record);
                                    }
                                }
                            }
                            if !done.is_empty() {
                                app.outbox_forwarded(&done, points)
                                    .await
                                    .map_err(|e| e.to_string())?;
                            }
                            if std::mem::take(&mut full) {
                                look.reset_immediately();
                            }
                        }
                    }
                    Event::Incoming(Packet::Publish(p)) if p.topic == login.topics.commands => {
                        let (app, org, tx) = (app.clone(), org_id.to_string(), answers_tx.clone());
                        tokio::spawn(async move {
                            if let Some(answer) = app.edge_command(&org, &p.payload).await {
                                let _ = tx.send(answer).await;
                            }
                        });
                    }
                    _ => {}
                }
            }
            Some(answer) = answers.recv() => {
                publish(&mut unnumbered, Sent::Other, &login.topics.command_results, answer)?;
            }
            _ = app.ota_report_queued(), if connected => {
                for (n, report) in app.ota_reports_to_send() {
                    publish(&mut unnumbered, Sent::Report(n), &login.topics.ota, report)?;
                }
            }
            _ = beat.tick(), if connected => {
                publish(&mut unnumbered, Sent::Other, &login.topics.heartbeat, app.edge_heartbeat())?;
            }
            _ = describe.tick(), if connected => {
                if let Some((mark, messages)) =
                    app.edge_tags(org_id, told_tags).await.map_err(|e| e.to_string())?
                {
                    for tags in messages {
                        publish(&mut unnumbered, Sent::Other, &login.topics.tags, tags)?;
                    }
                    told_tags = Some(mark);
                }
            }
            _ = look.tick(), if connected => {
                let skip: Vec<i64> = in_flight.keys().copied().collect();
                let room = WINDOW.saturating_sub(unnumbered.len() + by_pkid.len());
                let alone = room == WINDOW;
                let mut budget = room * POINTS_PER_MESSAGE;
                // Live first: what arrived since the connection goes at once.
                let mut records: Vec<OutboxRecord> = Vec::new();
                if budget > 0 {
                    let live = app
                        .outbox_next(live_from, None, &skip, budget)
                        .await
                        .map_err(|e| e.to_string())?;
                    records = within_budget(live, &mut budget, alone);
                }
                let mut paced = false;
                if budget > 0 && live_from > 0 {
                    let backlog = app
                        .outbox_next(0, Some(live_from), &skip, budget)
                        .await
                        .map_err(|e| e.to_string())?;
                    for r in within_budget(backlog, &mut budget, alone && records.is_empty()) {
                        if !bucket.take(r.points.len()) {
                            paced = true;
                            break;
                        }
                        records.push(r);
                    }
                }
                // The window is full: the next look comes as soon as a message is acknowledged
                // rather than at the next tick (a backlog goes at the cloud's pace, not the
                // tick's), unless the backlog's rate holds it back.
                full = budget < POINTS_PER_MESSAGE && !paced;
                let (empty, records): (Vec<_>, Vec<_>) =
                    records.into_iter().partition(|r| r.points.is_empty());
                if !empty.is_empty() {
                    // Their series are gone (the organization's data was deleted): nothing to send.
                    let ids: Vec<i64> = empty.iter().map(|r| r.id).collect();
                    app.outbox_forwarded(&ids, 0).await.map_err(|e| e.to_string())?;
                }
                for Packed { parts, points } in pack(&records) {
                    for (id, n) in &parts {
                        let f = in_flight.entry(*id).or_insert(InFlight { messages: 0, points: 0 });
                        f.messages += 1;
                        f.points += *n as u64;
                    }
                    let message = next_message;
                    next_message += 1;
                    carried.insert(message, parts.into_iter().map(|(id, _)| id).collect());
                    publish(&mut unnumbered, Sent::Outbox(message), &login.topics.telemetry, telemetry_payload(points))?;
                }
            }
        }
    }
}

/// The first of `records` whose points fit in `budget` (taken from it). A record larger than
/// the whole window goes alone when nothing else is in flight (`alone`; else it would never go).
fn within_budget(records: Vec<OutboxRecord>, budget: &mut usize, alone: bool) -> Vec<OutboxRecord> {
    let mut kept = Vec::new();
    for r in records {
        let n = r.points.len();
        if n > *budget && !(kept.is_empty() && alone) {
            break;
        }
        *budget = budget.saturating_sub(n);
        kept.push(r);
    }
    kept
}

/// One message of the outbox's points: the records it carries points of (id, how many) and
/// the points.
struct Packed<'a> {
    parts: Vec<(i64, usize)>,
    points: Vec<&'a Point>,
}

/// The records' points, in order, in messages of at most [`POINTS_PER_MESSAGE`]: several small
/// records (a connector's scans, an API batch of a few points) share a message, a large one
/// spans several.
fn pack(records: &[OutboxRecord]) -> Vec<Packed<'_>> {
    let mut messages = Vec::new();
    let mut parts = Vec::new();
    let mut points = Vec::with_capacity(POINTS_PER_MESSAGE);
    for r in records {
        let mut rest = r.points.as_slice();
        while !rest.is_empty() {
            let take = (POINTS_PER_MESSAGE - points.len()).min(rest.len());
            points.extend(&rest[..take]);
            parts.push((r.id, take));
            rest = &rest[take..];
            if points.len() == POINTS_PER_MESSAGE {
                messages.push(Packed {
                    parts: std::mem::take(&mut parts),
                    points: std::mem::take(&mut points),
                });
            }
        }
    }
    if !points.is_empty() {
        messages.push(Packed { parts, points });
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use plantd_model::Timestamp;
    use plantd_model::telemetry::{Point, Quality};

    fn record(id: i64, points: usize) -> OutboxRecord {
        let p = Point {
            asset_id: "A".into(),
            tag_name: "T".into(),
            value: 1.0,
            timestamp: Timestamp::from_millis(0),
            quality: Quality::Good,
            data_source_id: None,
        };
        OutboxRecord {
            id,
            org_id: "o".into(),
            created_at: Timestamp::from_millis(0),
            points: vec![p; points],
        }
    }

    #[test]
    fn a_look_sends_no_more_points_than_the_window_holds() {
        let full = WINDOW * POINTS_PER_MESSAGE;
        // Scans waited while the cloud was away: as many as the window's points take.
        let scans: Vec<OutboxRecord> = (0..100).map(|i| record(i, full / 40)).collect();
        let mut budget = full;
        let sent = within_budget(scans, &mut budget, true);
        assert_eq!((sent.len(), budget), (40, 0));
        // With messages in flight, what is left of the window.
        let mut budget = 3 * POINTS_PER_MESSAGE;
        let sent = within_budget(
            vec![
                record(1, POINTS_PER_MESSAGE + 1),
                record(2, 1),
                record(3, 2 * POINTS_PER_MESSAGE),
            ],
            &mut budget,
            false,
        );
        assert_eq!((sent.len(), budget), (2, 2 * POINTS_PER_MESSAGE - 2));
        // A record larger than the window goes alone, when nothing else is in flight.
        let huge = || vec![record(1, full * 2), record(2, 1)];
        let mut budget = full;
        assert_eq!(within_budget(huge(), &mut budget, true).len(), 1);
        assert_eq!(budget, 0);
        let mut budget = full - POINTS_PER_MESSAGE;
        assert!(within_budget(huge(), &mut budget, false).is_empty());
    }

    #[test]
    fn small_records_share_a_message_and_a_large_one_spans_several() {
        let records = vec![
            record(1, 3),
            record(2, POINTS_PER_MESSAGE * 2),
            record(3, 1),
        ];
        let messages = pack(&records);
        let shape: Vec<(Vec<(i64, usize)>, usize)> = messages
            .iter()
            .map(|m| (m.parts.clone(), m.points.len()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (
                    vec![(1, 3), (2, POINTS_PER_MESSAGE - 3)],
                    POINTS_PER_MESSAGE
                ),
                (vec![(2, POINTS_PER_MESSAGE)], POINTS_PER_MESSAGE),
                (vec![(2, 3), (3, 1)], 4),
            ]
        );
        // Every point once, in order.
        let sent: usize = messages.iter().map(|m| m.points.len()).sum();
        assert_eq!(sent, 3 + POINTS_PER_MESSAGE * 2 + 1);
        assert!(pack(&[]).is_empty());
    }
}
