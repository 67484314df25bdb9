//! Fleet (SPEC 2.8, 4.7): devices registered by an operator or by themselves with an
//! enrollment token, their groups, tokens, commands and health. What devices do over MQTT is
//! `device_channel.rs`. Decisions where SPEC is silent: docs/api.md, "Fleet".

use plantd_model::Timestamp;
use plantd_model::audit::ActorType;
use plantd_model::device::{
    Command, Device, DeviceGroup, DeviceStatus, DeviceTopics, EnrollmentToken, StatusChange,
};
use plantd_model::page::{Page, Paged};
use plantd_model::validation::Validator;
pub use plantd_store::DeviceFilter;
use plantd_store::{DeviceFields, NewDevice, NewEnrollmentToken, RegisterError};
use serde::{Deserialize, Serialize};
use std::time::Duration;

use crate::access::{Actor, AuditTrail};
use crate::app::App;
use crate::caller::Caller;
use crate::error::{AppError, AppResult};
use crate::events::Event;

/// Tags per device (and per token), and the length of each.
const MAX_TAGS: usize = 50;
const MAX_TAG_CHARS: usize = 64;
/// A device's metadata as JSON text.
const MAX_METADATA_BYTES: usize = 16 * 1024;
/// A command's time to live: default and maximum.
pub const DEFAULT_COMMAND_TTL: Duration = Duration::from_secs(3600);
const MAX_COMMAND_TTL_SECS: u64 = 7 * 24 * 3600;

/// A device's registration: by an operator (API key with `write:assets`, no token) or by the
/// device itself (`enrollment_token`, no API key).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewDeviceRequest {
    pub name: String,
    /// Unique within the organization.
    pub serial_number: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<serde_json::Value>,
    /// The asset the device's telemetry belongs to; default: the device id.
    pub asset_id: Option<String>,
    /// Groups to join (an operator's registration; a token's device joins the token's group).
    #[serde(default)]
    pub group_ids: Vec<String>,
    /// The secret of an enrollment token: a device registering itself.
    pub enrollment_token: Option<String>,
}

/// A partial update: absent fields keep their value; `group_ids` sets the device's groups.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceUpdate {
    pub name: Option<String>,
    pub tags: Option<Vec<String>>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    pub asset_id: Option<String>,
    pub group_ids: Option<Vec<String>>,
}

/// A device's MQTT login and topics, shown once at registration.
#[derive(Serialize, utoipa::ToSchema)]
pub struct MqttCredentials {
    pub client_id: String,
    pub username: String,
    /// Shown only here; stored hashed.
    pub password: String,
    pub topics: DeviceTopics,
}

/// A registered device with its MQTT credentials.
#[derive(Serialize, utoipa::ToSchema)]
pub struct RegisteredDevice {
    #[serde(flatten)]
    pub device: Device,
    pub mqtt: MqttCredentials,
}

/// A group's fields.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewGroup {
    pub name: String,
    #[serde(default)]
    pub description: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupUpdate {
    pub name: Option<String>,
    pub description: Option<String>,
}

/// An enrollment token's terms; every field optional.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTokenRequest {
    pub group_id: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// In the future; absent: the token does not expire.
    pub expires_at: Option<Timestamp>,
    /// At least 1; absent: unlimited until expiry.
    pub max_uses: Option<i64>,
}

/// A new enrollment token with its secret (shown once).
#[derive(Serialize, utoipa::ToSchema)]
pub struct CreatedToken {
    #[serde(flatten)]
    pub record: EnrollmentToken,
    /// Shown only here; stored hashed.
    pub token: String,
}

/// A command for a device.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewCommand {
    /// 1 to 128 characters.
    pub command: String,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub params: Option<serde_json::Value>,
    /// How long the command waits for the device (default 3600, at most 604800).
    pub ttl_seconds: Option<i64>,
}

/// A device's health: the last heartbeat's figures and the status history.
#[derive(Serialize, utoipa::ToSchema)]
pub struct DeviceHealth {
    pub device_id: String,
    pub status: DeviceStatus,
    pub last_seen_at: Option<Timestamp>,
    pub firmware_version: Option<String>,
    /// The last heartbeat's figures (`cpu_percent`, `memory_percent`, `disk_percent`,
    /// `temperature_c`, `uptime_seconds`, `firmware_version`), `{}` before the first.
    #[schema(value_type = Object)]
    pub heartbeat: serde_json::Value,
    pub heartbeat_at: Option<Timestamp>,
    /// Newest first, at most 100.
    pub status_history: Vec<StatusChange>,
}

fn check_tags(v: &mut Validator, field: &str, tags: &[String]) {
    v.check(
        tags.len() <= MAX_TAGS,
        field,
        format!("at most {MAX_TAGS} tags"),
    );
    for (i, t) in tags.iter().enumerate() {
        v.text(&format!("{field}[{i}]"), t, MAX_TAG_CHARS);
        v.check(
            !t.contains(','),
            &format!("{field}[{i}]"),
            "must not contain commas (the list filter separates tags with them)",
        );
    }
}

fn check_metadata(v: &mut Validator, metadata: &serde_json::Value) {
    v.check(metadata.is_object(), "metadata", "must be a JSON object");
    v.check(
        metadata.to_string().len() <= MAX_METADATA_BYTES,
        "metadata",
        format!("must be at most {MAX_METADATA_BYTES} bytes as JSON"),
    );
}

fn check_asset(v: &mut Validator, asset: &str) {
    v.text("asset_id", asset, 128);
    v.check(
        !asset.chars().any(|c| c.is_control() || c == ','),
        "asset_id",
        "must not contain control characters or commas",
    );
}

/// The tags of a comma-separated list filter (`press, north`), blanks dropped.
pub fn tag_list(text: Option<&str>) -> Vec<String> {
    text.into_iter()
        .flat_map(|t| t.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect()
}

/// Names (tags, group ids) without surrounding spaces or repeats, in their first order.
fn clean_list(tags: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in tags {
        let t = t.trim().to_string();
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

impl App {
    /// Registers a device: an operator's call (`caller`, no token) or a device's (`token`, no
    /// caller). The answer carries the MQTT password, shown only here.
    pub async fn register_device(
        &self,
        caller: Option<&Caller>,
        req: NewDeviceRequest,
        trail: &AuditTrail,
    ) -> AppResult<RegisteredDevice> {
        let mut v = Validator::new();
        v.text("name", req.name.trim(), 200);
        v.text("serial_number", req.serial_number.trim(), 128);
        check_tags(&mut v, "tags", &req.tags);
        let metadata = req.metadata.unwrap_or_else(|| serde_json::json!({}));
        check_metadata(&mut v, &metadata);
        if let Some(a) = &req.asset_id {
            check_asset(&mut v, a.trim());
        }
        let (org_id, token) = match (caller, req.enrollment_token.as_deref()) {
            (Some(_), Some(_)) => {
                return Err(AppError::invalid(
                    "enrollment_token",
                    "send either an API key or an enrollment token, not both",
                ));
            }
            (None, None) => {
                return Err(AppError::Unauthenticated(
                    "a device registers with an enrollment_token; an operator with an API key holding write:assets".into(),
                ));
            }
            (Some(c), None) => {
                v.finish()?;
                (c.org_id.clone(), None)
            }
            (None, Some(secret)) => {
                v.check(
                    req.group_ids.is_empty(),
                    "group_ids",
                    "a device enrolling with a token joins the token's group",
                );
                v.finish()?;
                let (org_id, token) = self.enrollment_token_of(secret.trim()).await?;
                trail.act_as(Actor {
                    org_id: Some(org_id.clone()),
                    actor_type: ActorType::Device,
                    actor_id: Some(token.id.clone()),
                    user_id: None,
                });
                (org_id, Some(token))
            }
        };
        let mut tags = req.tags;
        let mut group_ids = clean_list(req.group_ids);
        if let Some(t) = &token {
            tags.extend(t.tags.iter().cloned());
            group_ids.extend(t.group_id.iter().cloned());
        }
        let password = plantd_auth::generate_secret(plantd_auth::DEVICE_PASSWORD_PREFIX);
        let new = NewDevice {
            name: req.name.trim().to_string(),
            serial_number: req.serial_number.trim().to_string(),
            tags: clean_list(tags),
            metadata,
            asset_id: req.asset_id.map(|a| a.trim().to_string()),
            group_ids,
            mqtt_password_hash: password.hash,
        };
        let device = match self
            .store()
            .register_device(&org_id, &new, token.as_ref().map(|t| t.id.as_str()))
            .await
        {
            Ok(d) => d,
            Err(RegisterError::TokenUsedUp) => {
                return Err(AppError::Refused {
                    code: "enrollment_token_used_up",
                    message: "the enrollment token can enroll no more devices (used up, expired or revoked)".into(),
                });
            }
            Err(RegisterError::Store(plantd_store::StoreError::NotFound)) => {
                return Err(AppError::invalid(
                    "group_ids",
                    "names a group that does not exist",
                ));
            }
            Err(RegisterError::Store(e)) => return Err(e.into()),
        };
        trail.resource(&device.id);
        Ok(RegisteredDevice {
            mqtt: MqttCredentials {
                client_id: device.id.clone(),
                username: device.id.clone(),
                password: password.secret,
                topics: DeviceTopics::of(&device.id),
            },
            device,
        })
    }

    /// The organization and record of a usable token; its refusal otherwise.
    async fn enrollment_token_of(&self, secret: &str) -> AppResult<(String, EnrollmentToken)> {
        let unknown = || AppError::Unauthenticated("the enrollment token is not valid".into());
        if !secret.starts_with(plantd_auth::ENROLLMENT_PREFIX) {
            return Err(unknown());
        }
        let (org_id, token) = match self
            .store()
            .enrollment_token_by_hash(&plantd_auth::hash_key(secret))
            .await
        {
            Err(plantd_store::StoreError::NotFound) => return Err(unknown()),
            other => other?,
        };
        if let Some((code, message)) = token.refusal(Timestamp::now()) {
            return Err(AppError::Refused {
                code,
                message: message.to_string(),
            });
        }
        Ok((org_id, token))
    }

    pub async fn devices(
        &self,
        org_id: &str,
        filter: DeviceFilter,
        page: Page,
    ) -> AppResult<Paged<Device>> {
        let filter = DeviceFilter {
            tags: clean_list(filter.tags),
            ..filter
        };
        let (items, total) = self
            .store()
            .devices(org_id, &filter, (page.limit(), page.offset()))
            .await?;
        Ok(Paged { items, total })
    }

    pub async fn device(&self, org_id: &str, id: &str) -> AppResult<Device> {
        self.store()
            .device(org_id, id)
            .await
            .map_err(AppError::missing("device"))
    }

    pub async fn update_device(
        &self,
        org_id: &str,
        id: &str,
        update: DeviceUpdate,
    ) -> AppResult<Device> {
        let current = self.device(org_id, id).await?;
        let fields = DeviceFields {
            name: update.name.map_or(current.name, |n| n.trim().to_string()),
            tags: clean_list(update.tags.unwrap_or(current.tags)),
            metadata: update.metadata.unwrap_or(current.metadata),
            asset_id: update
                .asset_id
                .map_or(current.asset_id, |a| a.trim().to_string()),
            group_ids: clean_list(update.group_ids.unwrap_or(current.group_ids)),
        };
        let mut v = Validator::new();
        v.text("name", &fields.name, 200);
        check_tags(&mut v, "tags", &fields.tags);
        check_metadata(&mut v, &fields.metadata);
        check_asset(&mut v, &fields.asset_id);
        v.finish()?;
        let device = self
            .store()
            .update_device(org_id, id, &fields)
            .await
            .map_err(|e| match e {
                // The device was read above: a missing row now is one of the groups.
                plantd_store::StoreError::NotFound => {
                    AppError::invalid("group_ids", "names a group that does not exist")
                }
                other => other.into(),
            })?;
        self.events().publish(Event::DeviceChanged {
            device_id: device.id.clone(),
        });
        Ok(device)
    }

    /// Deletes a device; it is disconnected and its credentials are refused from then on.
    pub async fn delete_device(&self, org_id: &str, id: &str) -> AppResult<()> {
        self.store()
            .delete_device(org_id, id)
            .await
            .map_err(AppError::missing("device"))?;
        self.events().publish(Event::DeviceChanged {
            device_id: id.to_string(),
        });
        Ok(())
    }

    pub async fn device_health(&self, org_id: &str, id: &str) -> AppResult<DeviceHealth> {
        let device = self.device(org_id, id).await?;
        let health = self
            .store()
            .device_health(org_id, id)
            .await
            .map_err(AppError::missing("device"))?;
        Ok(DeviceHealth {
            device_id: device.id,
            status: device.status,
            last_seen_at: device.last_seen_at,
            firmware_version: device.firmware_version,
            heartbeat: health.heartbeat.unwrap_or_else(|| serde_json::json!({})),
            heartbeat_at: health.heartbeat_at,
            status_history: health.history,
        })
    }

    /// Queues a command; it is delivered at once if the device is connected, else when it
    /// connects, until its time to live.
    pub async fn send_command(
        &self,
        org_id: &str,
        device_id: &str,
        new: NewCommand,
    ) -> AppResult<Command> {
        let mut v = Validator::new();
        v.text("command", new.command.trim(), 128);
        let params = new.params.unwrap_or_else(|| serde_json::json!({}));
        v.check(params.is_object(), "params", "must be a JSON object");
        v.check(
            params.to_string().len() <= MAX_METADATA_BYTES,
            "params",
            format!("must be at most {MAX_METADATA_BYTES} bytes as JSON"),
        );
        let ttl = new
            .ttl_seconds
            .unwrap_or(DEFAULT_COMMAND_TTL.as_secs() as i64);
        v.check(
            (1..=MAX_COMMAND_TTL_SECS as i64).contains(&ttl),
            "ttl_seconds",
            format!("must be between 1 and {MAX_COMMAND_TTL_SECS}"),
        );
        v.finish()?;
        let expires_at = Timestamp::from_millis(Timestamp::now().millis() + ttl * 1000);
        let command = self
            .store()
            .create_command(org_id, device_id, new.command.trim(), &params, expires_at)
            .await
            .map_err(AppError::missing("device"))?;
        self.events().publish(Event::CommandQueued {
            device_ids: vec![device_id.to_string()],
        });
        Ok(command)
    }

    pub async fn device_commands(
        &self,
        org_id: &str,
        device_id: &str,
        page: Page,
    ) -> AppResult<Paged<Command>> {
        self.device(org_id, device_id).await?;
        let (items, total) = self
            .store()
            .commands(org_id, device_id, (page.limit(), page.offset()))
            .await?;
        Ok(Paged { items, total })
    }

    pub async fn create_group(&self, org_id: &str, new: NewGroup) -> AppResult<DeviceGroup> {
        let mut v = Validator::new();
        v.text("name", new.name.trim(), 200);
        v.check(
            new.description.chars().count() <= 2000,
            "description",
            "must be at most 2000 characters",
        );
        v.finish()?;
        Ok(self
            .store()
            .create_group(org_id, new.name.trim(), &new.description)
            .await?)
    }

    pub async fn groups(&self, org_id: &str, page: Page) -> AppResult<Paged<DeviceGroup>> {
        let (items, total) = self
            .store()
            .groups(org_id, (page.limit(), page.offset()))
            .await?;
        Ok(Paged { items, total })
    }

    pub async fn group(&self, org_id: &str, id: &str) -> AppResult<DeviceGroup> {
        self.store()
            .group(org_id, id)
            .await
            .map_err(AppError::missing("group"))
    }

    pub async fn update_group(
        &self,
        org_id: &str,
        id: &str,
        update: GroupUpdate,
    ) -> AppResult<DeviceGroup> {
        let current = self.group(org_id, id).await?;
        let name = update.name.map_or(current.name, |n| n.trim().to_string());
        let description = update.description.unwrap_or(current.description);
        let mut v = Validator::new();
        v.text("name", &name, 200);
        v.check(
            description.chars().count() <= 2000,
            "description",
            "must be at most 2000 characters",
        );
        v.finish()?;
        self.store()
            .update_group(org_id, id, &name, &description)
            .await
            .map_err(AppError::missing("group"))
    }

    pub async fn delete_group(&self, org_id: &str, id: &str) -> AppResult<()> {
        self.store()
            .delete_group(org_id, id)
            .await
            .map_err(AppError::missing("group"))
    }

    /// Creates an enrollment token; its secret is in the answer only.
    pub async fn create_enrollment_token(
        &self,
        org_id: &str,
        req: NewTokenRequest,
    ) -> AppResult<CreatedToken> {
        let mut v = Validator::new();
        check_tags(&mut v, "tags", &req.tags);
        if let Some(e) = req.expires_at {
            v.check(e > Timestamp::now(), "expires_at", "must be in the future");
        }
        if let Some(m) = req.max_uses {
            v.check(m >= 1, "max_uses", "must be at least 1");
        }
        v.finish()?;
        let secret = plantd_auth::generate_secret(plantd_auth::ENROLLMENT_PREFIX);
        let token = self
            .store()
            .create_enrollment_token(
                org_id,
                &NewEnrollmentToken {
                    token_hash: secret.hash,
                    prefix: secret.display_prefix,
                    group_id: req.group_id,
                    tags: clean_list(req.tags),
                    expires_at: req.expires_at,
                    max_uses: req.max_uses.map(|m| m as u64),
                },
            )
            .await
            .map_err(|e| match e {
                plantd_store::StoreError::NotFound => {
                    AppError::invalid("group_id", "names a group that does not exist")
                }
                other => other.into(),
            })?;
        Ok(CreatedToken {
            record: token,
            token: secret.secret,
        })
    }

    pub async fn enrollment_tokens(
        &self,
        org_id: &str,
        page: Page,
    ) -> AppResult<Paged<EnrollmentToken>> {
        let (items, total) = self
            .store()
            .enrollment_tokens(org_id, (page.limit(), page.offset()))
            .await?;
        Ok(Paged { items, total })
    }

    /// Revokes a token: devices it enrolled keep working; it enrolls no more.
    pub async fn revoke_enrollment_token(
        &self,
        org_id: &str,
        id: &str,
    ) -> AppResult<EnrollmentToken> {
        self.store()
            .revoke_enrollment_token(org_id, id)
            .await
            .map_err(AppError::missing("enrollment token"))
    }
}
