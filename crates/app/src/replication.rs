//! Replication between regions through NATS JetStream (SPEC 4.14, issue 33). One stream per
//! deployment, `PLANTD_<deployment>_REPLICATION` on subjects `plantd.<deployment>.replication.<region>`,
//! and one durable pull consumer per region on it, named by the region.
//!
//! The worker of each region (one node of a region: the replication lease) does two things in
//! turn:
//! - **publishes** what the outbox holds (the database's triggers queue every change of an
//!   organization, user, membership or API key in the transaction that makes it): each record's
//!   state as it is now, with a version (publication time, strictly increasing) and the region,
//!   deduplicated by JetStream on `Nats-Msg-Id`; the outbox rows go only once the stream
//!   acknowledged them, so a crash publishes again rather than never;
//! - **applies** what other regions published, in stream order, in one transaction per batch
//!   (a record is written only if its version is newer than the one held, last writer wins), then
//!   acknowledges; this node forgets the cached keys and organization regions the batch touched.
//!
//! `GET /api/v1/regions/replication` reads the consumers' state from JetStream.

use async_nats::jetstream;
use futures_util::StreamExt;
use plantd_model::Timestamp;
use plantd_model::region::{RegionId, ReplicatedKind};
use plantd_store::Change;
use serde::Serialize;
use std::time::Duration;
use tokio::sync::watch;

use crate::app::App;
use crate::error::AppError;

/// Changes published per round.
const PUBLISH_BATCH: i64 = 500;
/// Changes applied per transaction.
const APPLY_BATCH: usize = 500;
/// How long a fetch waits for changes from other regions before the outbox is looked at again.
const FETCH_WAIT: Duration = Duration::from_millis(100);
/// A replica with pending changes and no acknowledgement for this long is `stalled`.
const STALLED_AFTER: Duration = Duration::from_secs(60);

const WORKER: &str = "replication";

/// The names a deployment's stream and subjects carry: letters, digits, `-` and `_` kept,
/// anything else `_`.
pub(crate) fn safe_name(deployment: &str) -> String {
    deployment
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn stream_name(deployment: &str) -> String {
    format!("PLANTD_{}_REPLICATION", safe_name(deployment))
}

fn subject_of(deployment: &str, region: RegionId) -> String {
    format!("plantd.{}.replication.{region}", safe_name(deployment))
}

/// One replica of an organization's replicated data (SPEC 2.9).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct Replica {
    #[schema(value_type = String, example = "eu-west")]
    pub region: RegionId,
    /// Age of the oldest change the replica has not applied (0 when synced).
    pub lag_seconds: i64,
    /// `synced` (nothing pending), `lagging` (applying), `stalled` (pending and nothing
    /// applied for a minute, or its consumer missing) or `unknown` (NATS not reachable).
    pub status: &'static str,
    /// When the replica last acknowledged a change.
    pub last_sync: Option<Timestamp>,
    /// Changes published and not yet applied by the replica.
    pub pending: u64,
}

/// SPEC 2.9's replication view.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ReplicationStatus {
    #[schema(value_type = String, example = "us-east")]
    pub primary_region: RegionId,
    pub replicas: Vec<Replica>,
}

impl App {
    /// The organization's primary region and, for every other served region, how far its
    /// replica of the replicated data is behind (read from its JetStream consumer).
    pub async fn replication_status(&self, org_id: &str) -> Result<ReplicationStatus, AppError> {
        let (primary, _) = self.org_primary_region(org_id).await?;
        let settings = self.region_settings();
        let mut replicas = Vec::new();
        let js = self.regional().context();
        for region in settings.served() {
            if region == primary {
                continue;
            }
            replicas.push(match &js {
                Some(js) => replica_of(js, &settings.deployment, region).await,
                None => Replica {
                    region,
                    lag_seconds: 0,
                    status: "unknown",
                    last_sync: None,
                    pending: 0,
                },
            });
        }
        Ok(ReplicationStatus {
            primary_region: primary,
            replicas,
        })
    }
}

fn millis_of(nanos: i128) -> i64 {
    (nanos / 1_000_000) as i64
}

async fn replica_of(js: &jetstream::Context, deployment: &str, region: RegionId) -> Replica {
    let unknown = |status| Replica {
        region,
        lag_seconds: 0,
        status,
        last_sync: None,
        pending: 0,
    };
    let Ok(stream) = js.get_stream(stream_name(deployment)).await else {
        return unknown("unknown");
    };
    let Ok(info) = stream.consumer_info(region.as_str()).await else {
        return unknown("stalled");
    };
    let pending = info.num_pending + info.num_ack_pending as u64;
    let last_sync = info
        .ack_floor
        .last_active
        .map(|t| Timestamp::from_millis(millis_of(t.unix_timestamp_nanos())));
    if pending == 0 {
        return Replica {
            region,
            lag_seconds: 0,
            status: "synced",
            last_sync,
            pending,
        };
    }
    // The oldest change it has not acknowledged: the one after its acknowledgement floor.
    let oldest = stream
        .get_raw_message(info.ack_floor.stream_sequence + 1)
        .await
        .ok()
        .map(|m| millis_of(m.time.unix_timestamp_nanos()));
    let now = Timestamp::now().millis();
    let lag_seconds = oldest.map_or(0, |t| ((now - t).max(0)) / 1000);
    let idle = last_sync.map_or(i64::MAX, |t| now - t.millis());
    Replica {
        region,
        lag_seconds,
        status: if idle > STALLED_AFTER.as_millis() as i64 {
            "stalled"
        } else {
            "lagging"
        },
        last_sync,
        pending,
    }
}

/// The replication worker: without `--nats-url`, turns the outbox off and ends; with it,
/// connects (again and again until it can), then publishes and applies until stopped.
pub(crate) async fn run(app: App, mut stop: watch::Receiver<bool>) {
    let settings = app.region_settings().clone();
    let Some(url) = settings.nats_url.clone() else {
        if let Err(e) = app.store().set_replication_publish(false).await {
            tracing::warn!(error = %plantd_model::error_chain(&e), "cannot turn the replication outbox off");
        }
        return;
    };
    app.workers().register(WORKER);
    let connected = until_ok(
        &mut stop,
        || connect(&url, &settings),
        |e| {
            tracing::warn!(error = %e, nats = %url, "cannot reach the deployment's NATS server; trying again");
            app.workers().report(WORKER, Err(e));
        },
    )
    .await;
    let Some((js, consumer)) = connected else {
        return;
    };
    app.regional().set_jetstream(js.clone());
    if let Err(e) = app.store().set_replication_publish(true).await {
        tracing::error!(error = %plantd_model::error_chain(&e), "cannot turn the replication outbox on");
    }
    // One node of the region publishes and applies (always this one on SQLite).
    let mut lease = loop {
        match app.store().try_lease(plantd_store::REPLICATION_LEASE).await {
            Ok(Some(lease)) => break lease,
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %plantd_model::error_chain(&e), "cannot take the replication lease")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
            _ = stop.changed() => return,
        }
    };
    loop {
        let round = async {
            publish_outbox(&app, &js, &settings).await?;
            apply_incoming(&app, &consumer, settings.region).await
        };
        let result = tokio::select! {
            r = round => r,
            _ = lease.lost() => {
                tracing::warn!("lost the replication lease; another node of the region takes over");
                return;
            }
            _ = stop.changed() => return,
        };
        if let Err(e) = &result {
            tracing::warn!(error = %e, "replication round failed; trying again");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        app.workers().report(WORKER, result);
    }
}

/// A client of the deployment's NATS server named `name` (5 s to connect).
pub(crate) async fn nats_client(url: &str, name: String) -> Result<async_nats::Client, String> {
    async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(5))
        .connect(url)
        .await
        .map_err(|e| format!("connect to {url}: {e}"))
}

/// Runs `attempt` until it succeeds, waiting 250 ms, doubling up to 10 s, after each failure
/// (handed to `failed`); `None` once `stop` changes.
pub(crate) async fn until_ok<T, Fut>(
    stop: &mut watch::Receiver<bool>,
    mut attempt: impl FnMut() -> Fut,
    mut failed: impl FnMut(String),
) -> Option<T>
where
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let mut backoff = Duration::from_millis(250);
    loop {
        match attempt().await {
            Ok(v) => return Some(v),
            Err(e) => {
                failed(e);
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.changed() => return None,
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
}

async fn connect(
    url: &str,
    settings: &crate::config::RegionSettings,
) -> Result<(jetstream::Context, jetstream::consumer::PullConsumer), String> {
    let client = nats_client(
        url,
        format!("plantd {} {}", settings.deployment, settings.region),
    )
    .await?;
    let js = jetstream::new(client);
    let stream = js
        .get_or_create_stream(jetstream::stream::Config {
            name: stream_name(&settings.deployment),
            subjects: vec![format!(
                "plantd.{}.replication.*",
                safe_name(&settings.deployment)
            )],
            storage: jetstream::stream::StorageType::File,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("replication stream: {e}"))?;
    let name = settings.region.as_str().to_string();
    let consumer = stream
        .get_or_create_consumer(
            &name,
            jetstream::consumer::pull::Config {
                durable_name: Some(name.clone()),
                deliver_policy: jetstream::consumer::DeliverPolicy::All,
                ack_policy: jetstream::consumer::AckPolicy::Explicit,
                ack_wait: Duration::from_secs(30),
                max_ack_pending: 10_000,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| format!("replication consumer {name}: {e}"))?;
    Ok((js, consumer))
}

/// Publishes what the outbox holds, oldest first, and removes it once JetStream has it.
async fn publish_outbox(
    app: &App,
    js: &jetstream::Context,
    settings: &crate::config::RegionSettings,
) -> Result<(), String> {
    let err = |e: plantd_store::StoreError| plantd_model::error_chain(&e);
    loop {
        let entries = app
            .store()
            .replication_outbox(PUBLISH_BATCH)
            .await
            .map_err(err)?;
        let Some(last) = entries.last().map(|e| e.seq) else {
            return Ok(());
        };
        // An organization created without a region (by `plantd orgs create`, or before
        // regions) takes this one before it is published: its creation is in the outbox.
        app.store()
            .claim_unplaced_orgs(settings.region.as_str())
            .await
            .map_err(err)?;
        let subject = subject_of(&settings.deployment, settings.region);
        let mut acks = Vec::with_capacity(entries.len());
        let mut published = Vec::with_capacity(entries.len());
        for e in coalesced(&entries) {
            let record = app
                .store()
                .replicated_record(e.kind, &e.key)
                .await
                .map_err(err)?;
            let change = Change {
                kind: e.kind.as_str().to_string(),
                key: e.key.clone(),
                version: app.regional().next_version(),
                region: settings.region.as_str().to_string(),
                record,
            };
            let payload = serde_json::to_vec(&change).map_err(|e| e.to_string())?;
            let ack = js
                .send_publish(
                    subject.clone(),
                    jetstream::message::PublishMessage::build()
                        .payload(payload.into())
                        .message_id(format!("{}-{}", settings.region, e.seq)),
                )
                .await
                .map_err(|e| format!("publish: {e}"))?;
            acks.push(ack);
            published.push(change);
        }
        for ack in acks {
            ack.await
                .map_err(|e| format!("publish acknowledgement: {e}"))?;
        }
        app.store()
            .replication_published(last, &published)
            .await
            .map_err(err)?;
        if (entries.len() as i64) < PUBLISH_BATCH {
            return Ok(());
        }
    }
}

/// The records of a batch of queued changes, each once: a record changed several times is
/// published once, as it is now (every publication carries the record's whole current state),
/// at the place of its first change (so a user still comes before the membership that names
/// it), with the sequence of its last change (its message id, unique per region).
fn coalesced(entries: &[plantd_store::OutboxEntry]) -> Vec<plantd_store::OutboxEntry> {
    let mut out: Vec<plantd_store::OutboxEntry> = Vec::with_capacity(entries.len());
    let mut at: std::collections::HashMap<(ReplicatedKind, &str), usize> =
        std::collections::HashMap::new();
    for e in entries {
        match at.get(&(e.kind, e.key.as_str())) {
            Some(&i) => out[i].seq = out[i].seq.max(e.seq),
            None => {
                at.insert((e.kind, e.key.as_str()), out.len());
                out.push(e.clone());
            }
        }
    }
    out
}

/// Other regions' changes of a batch, each record once: its newest change (last writer wins
/// anyway), at the place of its first.
fn newest_per_record(changes: Vec<Change>) -> Vec<Change> {
    let mut out: Vec<Change> = Vec::with_capacity(changes.len());
    let mut at: std::collections::HashMap<(String, String), usize> =
        std::collections::HashMap::new();
    for c in changes {
        match at.get(&(c.kind.clone(), c.key.clone())) {
            Some(&i) => {
                if (c.version, &c.region) > (out[i].version, &out[i].region) {
                    out[i] = c;
                }
            }
            None => {
                at.insert((c.kind.clone(), c.key.clone()), out.len());
                out.push(c);
            }
        }
    }
    out
}

/// Applies one batch of other regions' changes (waiting briefly for some), then acknowledges it.
async fn apply_incoming(
    app: &App,
    consumer: &jetstream::consumer::PullConsumer,
    own: RegionId,
) -> Result<(), String> {
    let mut batch = consumer
        .batch()
        .max_messages(APPLY_BATCH)
        .expires(FETCH_WAIT)
        .messages()
        .await
        .map_err(|e| format!("fetch: {e}"))?;
    let mut messages = Vec::new();
    while let Some(m) = batch.next().await {
        messages.push(m.map_err(|e| format!("fetch: {e}"))?);
    }
    if messages.is_empty() {
        return Ok(());
    }
    let mut changes = Vec::with_capacity(messages.len());
    for m in &messages {
        match serde_json::from_slice::<Change>(&m.payload) {
            Ok(c) if c.region == own.as_str() => {}
            Ok(c) if ReplicatedKind::parse(&c.kind).is_some() => changes.push(c),
            Ok(c) => {
                tracing::warn!(kind = %c.kind, "a replicated change of an unknown kind is skipped")
            }
            Err(e) => tracing::warn!(error = %e, "an unreadable replicated change is skipped"),
        }
    }
    if !changes.is_empty() {
        apply(app, &newest_per_record(changes)).await?;
    }
    for m in &messages {
        m.ack().await.map_err(|e| format!("ack: {e}"))?;
    }
    Ok(())
}

/// Applies `changes` in one transaction, or, when that fails, one at a time so that only a
/// change that cannot be written (a unique email taken in this region) is skipped, with a
/// warning; then forgets what this node cached of the records touched.
async fn apply(app: &App, changes: &[Change]) -> Result<(), String> {
    match app.store().apply_replicated(changes).await {
        Ok(_) => {}
        Err(plantd_store::StoreError::Database(_)) => {
            for c in changes {
                if let Err(e) = app.store().apply_replicated(std::slice::from_ref(c)).await {
                    tracing::warn!(
                        kind = %c.kind, key = %c.key, region = %c.region,
                        error = %plantd_model::error_chain(&e),
                        "a replicated change cannot be written here and is skipped"
                    );
                }
            }
        }
        Err(e) => return Err(plantd_model::error_chain(&e)),
    }
    for c in changes {
        match ReplicatedKind::parse(&c.kind) {
            Some(ReplicatedKind::ApiKey) => app.forget_keys(std::slice::from_ref(&c.key)),
            Some(ReplicatedKind::Organization) => app.forget_organization(&c.key),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_changed_twice_in_a_batch_goes_once_at_its_first_place() {
        let e = |seq, kind, key: &str| plantd_store::OutboxEntry {
            seq,
            kind,
            key: key.into(),
        };
        let batch = [
            e(1, ReplicatedKind::User, "u1"),
            e(2, ReplicatedKind::Membership, "o1/u1"),
            e(3, ReplicatedKind::User, "u1"),
            e(4, ReplicatedKind::Organization, "o1"),
            e(5, ReplicatedKind::Organization, "o1"),
        ];
        let out: Vec<(i64, String)> = coalesced(&batch)
            .into_iter()
            .map(|e| (e.seq, e.key))
            .collect();
        assert_eq!(
            out,
            [(3, "u1".into()), (2, "o1/u1".into()), (5, "o1".into())]
        );
        let c = |version, region: &str, key: &str| Change {
            kind: "user".into(),
            key: key.into(),
            version,
            region: region.into(),
            record: None,
        };
        let newest = newest_per_record(vec![
            c(10, "us-east", "a"),
            c(5, "eu-west", "b"),
            c(12, "us-east", "a"),
            c(11, "eu-west", "a"),
        ]);
        let got: Vec<(String, i64)> = newest.into_iter().map(|c| (c.key, c.version)).collect();
        assert_eq!(got, [("a".into(), 12), ("b".into(), 5)]);
    }

    #[test]
    fn names_carry_the_deployment() {
        assert_eq!(stream_name("plant a.b"), "PLANTD_plant_a_b_REPLICATION");
        assert_eq!(
            subject_of("acme", RegionId::EuWest),
            "plantd.acme.replication.eu-west"
        );
    }
}
