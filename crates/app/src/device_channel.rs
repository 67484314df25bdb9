//! What devices do on the MQTT device channel, as use cases any door can call (the embedded
//! broker today, an external broker's client next): log in with their credentials, publish
//! telemetry (through [`App::ingest`], as `POST /v1/telemetry`), heartbeats and command results,
//! and receive their queued commands. The fleet worker writes when devices were last seen,
//! turns silent devices offline, and expires commands whose time to live ran out.

use plantd_model::Timestamp;
use plantd_model::audit::{ActorType, AuditEvent};
use plantd_model::device::{Command, CommandOutcome, CommandResult, CommandStatus, Heartbeat};
use plantd_model::event::EventType;
use plantd_model::telemetry::{Point, PointDefaults, Quality};
use plantd_model::validation::Validator;
use plantd_store::StatusChanged;
use std::sync::Arc;
use tokio::sync::watch;

use crate::access::{Actor, AuditTrail, CallFacts, CallOutcome};
use crate::app::App;
use crate::caller::{Caller, Credential};
use crate::error::{AppError, AppResult};
use crate::events::Event;
use crate::telemetry::{Batch, Stored};

/// A device logged in on the channel: what its messages are checked and stored as.
#[derive(Clone, Debug)]
pub struct DeviceSession {
    pub device_id: String,
    pub org_id: String,
    pub asset_id: String,
    /// The device as ingest's caller (`write:telemetry` on its organization).
    pub caller: Caller,
}

/// How often the fleet worker writes contacts, sweeps silent devices and expires commands.
const FLEET_TICK: std::time::Duration = std::time::Duration::from_secs(2);
const FLEET_WORKER: &str = "fleet";

impl App {
    /// Checks a device's MQTT login (username = device id, password from its registration) and
    /// audits it (`device.connect`, success or refusal).
    pub async fn device_login(
        &self,
        username: &str,
        password: &[u8],
        facts: CallFacts,
    ) -> AppResult<DeviceSession> {
        let trail = AuditTrail::new(facts, AuditEvent::DeviceConnect);
        let result = self.check_device_login(username, password, &trail).await;
        let outcome = match &result {
            Ok(_) => CallOutcome {
                status: CallOutcome::SUCCESS,
                error_code: None,
            },
            Err(_) => CallOutcome {
                status: 401,
                error_code: Some("authentication_error".into()),
            },
        };
        self.finish_audit(&trail, outcome).await;
        result
    }

    async fn check_device_login(
        &self,
        username: &str,
        password: &[u8],
        trail: &AuditTrail,
    ) -> AppResult<DeviceSession> {
        let refused = || AppError::Unauthenticated("bad device credentials".into());
        let login = match self.store().device_login(username).await {
            Ok(l) => l,
            Err(plantd_store::StoreError::NotFound) => return Err(refused()),
            Err(e) => return Err(e.into()),
        };
        trail.act_as(Actor {
            org_id: Some(login.org_id.clone()),
            actor_type: ActorType::Device,
            actor_id: Some(login.id.clone()),
            user_id: None,
        });
        trail.resource(&login.id);
        let given = std::str::from_utf8(password).unwrap_or_default();
        let hash = plantd_auth::hash_key(given);
        if !plantd_auth::equal_in_constant_time(
            hash.as_bytes(),
            login.mqtt_password_hash.as_bytes(),
        ) {
            return Err(refused());
        }
        self.session_of(login).await
    }

    /// A registered device as the channel's caller, without a password: for a door whose broker
    /// authenticated the device itself (an external broker, which names it in the topic).
    pub async fn device_session(&self, device_id: &str) -> AppResult<DeviceSession> {
        let login = self
            .store()
            .device_login(device_id)
            .await
            .map_err(AppError::missing("device"))?;
        self.session_of(login).await
    }

    /// The device as the channel's caller: `write:telemetry` on its organization, at its tier.
    pub(crate) async fn session_of(
        &self,
        login: plantd_store::DeviceLogin,
    ) -> AppResult<DeviceSession> {
        let tier = self.store().org(&login.org_id).await?.tier;
        Ok(DeviceSession {
            caller: device_caller(&login.id, &login.org_id, tier),
            device_id: login.id,
            org_id: login.org_id,
            asset_id: login.asset_id,
        })
    }

    /// Queued commands of devices that are online (an external broker holds what a device's
    /// persistent session misses while away).
    pub async fn queued_commands_of_online_devices(&self) -> AppResult<Vec<Command>> {
        Ok(self
            .store()
            .queued_commands_of_online(Timestamp::now(), 1000)
            .await?)
    }

    /// Which of `device_ids` are no longer registered (deleted since they logged in).
    pub async fn devices_gone(&self, device_ids: &[String]) -> AppResult<Vec<String>> {
        let mut gone = Vec::new();
        for chunk in device_ids.chunks(500) {
            let present = self.store().existing_devices(chunk).await?;
            gone.extend(chunk.iter().filter(|d| !present.contains(*d)).cloned());
        }
        Ok(gone)
    }

    /// A device's contact: it is online from now (written by the fleet worker, at once for
    /// this node's first contact).
    pub async fn device_seen(&self, session: &DeviceSession) {
        let now = Timestamp::now();
        if self.seen_devices().saw(
            &session.org_id,
            &session.device_id,
            now,
            self.contact_interval(),
        ) {
            self.write_contacts().await;
        }
    }

    /// A telemetry message: the body of `POST /v1/telemetry`, a point without `asset_id`
    /// belonging to the device's asset; checked, limited and stored as the HTTP ingest is.
    pub async fn device_telemetry(
        &self,
        session: &DeviceSession,
        payload: &[u8],
    ) -> AppResult<Stored> {
        self.device_seen(session).await;
        let defaults = PointDefaults {
            asset_id: Some(&session.asset_id),
            data_source_id: Some(&session.device_id),
        };
        self.ingest(&session.caller, Batch::Body(payload, defaults), None)
            .await
    }

    /// What a device says its tags measure (its tags topic): recorded as the connectors record
    /// what a source says (a person's own setting of a tag wins).
    pub async fn device_tags(&self, session: &DeviceSession, payload: &[u8]) -> AppResult<()> {
        self.device_seen(session).await;
        let said: plantd_model::device::DescribedTags = plantd_model::json::parse(payload)?;
        let mut v = Validator::new();
        said.check(&mut v);
        v.finish()?;
        let tags: Vec<_> = said
            .tags
            .into_iter()
            .map(plantd_model::device::DescribedTag::into_parts)
            .collect();
        self.record_device_tags(&session.org_id, &tags).await;
        Ok(())
    }

    /// A heartbeat: its figures are the device's health and telemetry of its asset.
    pub async fn device_heartbeat(&self, session: &DeviceSession, payload: &[u8]) -> AppResult<()> {
        self.device_seen(session).await;
        let hb: Heartbeat = plantd_model::json::parse(payload)?;
        let mut v = Validator::new();
        hb.check(&mut v);
        v.finish()?;
        let now = Timestamp::now();
        let figures =
            serde_json::to_value(&hb).map_err(|e| AppError::internal("encoding a heartbeat", e))?;
        self.store()
            .record_heartbeat(
                &session.org_id,
                &session.device_id,
                &figures,
                hb.firmware_version.as_deref(),
                now,
            )
            .await
            .map_err(AppError::missing("device"))?;
        let points: Vec<Point> = hb
            .figures()
            .into_iter()
            .map(|(tag, value)| Point {
                asset_id: session.asset_id.clone(),
                tag_name: tag.to_string(),
                value,
                timestamp: now,
                quality: Quality::Good,
                data_source_id: Some(session.device_id.clone()),
            })
            .collect();
        if !points.is_empty() {
            self.ingest(&session.caller, Batch::Points(points), None)
                .await?;
        }
        Ok(())
    }

    /// A device's answer to one of its commands.
    pub async fn device_command_result(
        &self,
        session: &DeviceSession,
        payload: &[u8],
    ) -> AppResult<()> {
        self.device_seen(session).await;
        let answer: CommandResult = plantd_model::json::parse(payload)?;
        let status = match answer.status {
            CommandOutcome::Succeeded => CommandStatus::Succeeded,
            CommandOutcome::Failed => CommandStatus::Failed,
        };
        self.store()
            .complete_command(
                &session.device_id,
                &answer.id,
                status,
                answer.result.as_ref(),
                Timestamp::now(),
            )
            .await
            .map_err(AppError::missing("open command of this device"))
    }

    /// Commands waiting for delivery to `device_ids` (queued, within their time to live),
    /// oldest first. Only the devices a node can reach are asked for, so commands for devices
    /// that are away never hold up the others'.
    pub async fn queued_commands(&self, device_ids: &[String]) -> AppResult<Vec<Command>> {
        let now = Timestamp::now();
        let mut commands = Vec::new();
        for chunk in device_ids.chunks(500) {
            commands.extend(self.store().queued_commands_of(chunk, now).await?);
        }
        Ok(commands)
    }

    /// A command was handed to its device.
    pub async fn command_delivered(&self, id: &str) -> AppResult<()> {
        Ok(self.store().command_sent(id, Timestamp::now()).await?)
    }

    /// Writes the contacts noted since the last write; devices that turn online are announced.
    async fn write_contacts(&self) {
        let contacts = self.seen_devices().take();
        if contacts.is_empty() {
            return;
        }
        let written: Vec<(String, Timestamp)> =
            contacts.iter().map(|(_, d, at)| (d.clone(), *at)).collect();
        match self.store().devices_seen(&contacts).await {
            Ok(changed) => {
                self.seen_devices().written(written);
                self.announce(changed).await;
            }
            Err(e) => {
                tracing::warn!(error = %plantd_model::error_chain(&e), "could not record device contacts; retrying");
                self.seen_devices().put_back(contacts);
            }
        }
    }

    /// Tells the stream of status changes and stores each as the `online` tag (1 or 0) of the
    /// device's asset, which alert rules can watch.
    async fn announce(&self, changes: Vec<StatusChanged>) {
        for c in changes {
            let online = c.event == EventType::DeviceOnline;
            if !online {
                self.seen_devices().forget(&c.device.id);
            }
            let point = Point {
                asset_id: c.device.asset_id.clone(),
                tag_name: "online".into(),
                value: if online { 1.0 } else { 0.0 },
                timestamp: Timestamp::now(),
                quality: Quality::Good,
                data_source_id: Some(c.device.id.clone()),
            };
            let tier = self
                .store()
                .org(&c.device.org_id)
                .await
                .map(|o| o.tier)
                .unwrap_or(plantd_model::Tier::Trial);
            let caller = device_caller(&c.device.id, &c.device.org_id, tier);
            if let Err(e) = self.ingest(&caller, Batch::Points(vec![point]), None).await {
                tracing::warn!(device = %c.device.id, error = %plantd_model::error_chain(&e), "could not store a device's online state as telemetry");
            }
            self.events().publish(Event::DeviceStatus {
                org_id: c.device.org_id.as_str().into(),
                event: c.event,
                device: Arc::new(c.device),
            });
        }
    }

    /// How often a connected device's contact is written: a sixth of the offline delay, between
    /// 2 and 30 s (30 s for the default 180 s).
    fn contact_interval(&self) -> std::time::Duration {
        (self.config().device_offline_after / 6)
            .clamp(FLEET_TICK, std::time::Duration::from_secs(30))
    }

    /// One pass of the fleet worker.
    async fn fleet_pass(&self) -> AppResult<()> {
        self.write_contacts().await;
        let now = Timestamp::now();
        // Contacts reach the database up to a tick late: sweeping a tick early keeps "offline
        // at most `device_offline_after` after the last contact".
        let delay = self
            .config()
            .device_offline_after
            .saturating_sub(FLEET_TICK);
        let cutoff = Timestamp::from_millis(now.millis() - delay.as_millis() as i64);
        let changed = self.store().sweep_offline(cutoff, now).await?;
        self.announce(changed).await;
        self.store().expire_commands(now).await?;
        Ok(())
    }
}

/// A device as ingest's caller.
fn device_caller(device_id: &str, org_id: &str, tier: plantd_model::Tier) -> Caller {
    Caller {
        credential: Credential::Device {
            id: device_id.to_string(),
        },
        org_id: org_id.to_string(),
        user_id: None,
        scopes: vec![plantd_model::Scope::WriteTelemetry],
        tier,
    }
}

/// The fleet worker: contacts written, silent devices offline, commands expired.
pub(crate) async fn run(app: App, mut stop: watch::Receiver<bool>) {
    app.workers().register(FLEET_WORKER);
    let mut tick = tokio::time::interval(FLEET_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => {
                app.write_contacts().await;
                return;
            }
        }
        let result = app.fleet_pass().await;
        if let Err(e) = &result {
            tracing::warn!(error = %plantd_model::error_chain(e), "fleet pass failed; retrying");
        }
        app.workers().report(
            FLEET_WORKER,
            result.map_err(|e| plantd_model::error_chain(&e)),
        );
    }
}
