//! What devices do on their channel, as stored: commands (queued, sent, answered, expired), the
//! last heartbeat, when each device was last seen, and status changes with their history. A
//! status change queues its `device.online` / `device.offline` webhook deliveries in its own
//! transaction, so each change is announced once, whichever node saw it.

use plantd_model::device::{Command, CommandStatus, Device, DeviceStatus, StatusChange};
use plantd_model::event::EventType;
use plantd_model::{Timestamp, new_id};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use crate::devices::device_in;
use crate::rows::OrgTable;
use crate::webhooks::queue_deliveries;
use crate::{Result, Store, StoreError};

const COMMANDS: OrgTable = OrgTable {
    name: "device_commands",
    columns: "*",
    order: "created_at DESC, id",
};

/// A device's last heartbeat and its status history, newest first.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceHealthRecord {
    pub heartbeat: Option<serde_json::Value>,
    pub heartbeat_at: Option<Timestamp>,
    pub history: Vec<StatusChange>,
}

/// A device's status change, as announced.
#[derive(Clone, Debug)]
pub struct StatusChanged {
    pub event: EventType,
    pub device: Device,
}

fn command_from_row(row: &AnyRow) -> Result<Command> {
    let status: String = row.try_get("status")?;
    let params: String = row.try_get("params")?;
    let result: Option<String> = row.try_get("result")?;
    let ts = |c: &str| -> Result<Option<Timestamp>> {
        Ok(row
            .try_get::<Option<i64>, _>(c)?
            .map(Timestamp::from_millis))
    };
    Ok(Command {
        id: row.try_get("id")?,
        device_id: row.try_get("device_id")?,
        command: row.try_get("command")?,
        params: serde_json::from_str(&params)?,
        status: CommandStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("command status {status}")))?,
        result: result.map(|r| serde_json::from_str(&r)).transpose()?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        sent_at: ts("sent_at")?,
        completed_at: ts("completed_at")?,
        expires_at: Timestamp::from_millis(row.try_get("expires_at")?),
    })
}

/// Sets the device's status, records it in the history and queues its webhook deliveries.
async fn change_status(
    conn: &mut AnyConnection,
    org_id: &str,
    device_id: &str,
    status: DeviceStatus,
    now: Timestamp,
) -> Result<StatusChanged> {
    sqlx::query("UPDATE devices SET status = $1 WHERE org_id = $2 AND id = $3")
        .bind(status.as_str())
        .bind(org_id)
        .bind(device_id)
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "INSERT INTO device_status_history (id, org_id, device_id, status, at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(new_id())
    .bind(org_id)
    .bind(device_id)
    .bind(status.as_str())
    .bind(now.millis())
    .execute(&mut *conn)
    .await?;
    let device = device_in(conn, org_id, device_id).await?;
    let event = match status {
        DeviceStatus::Online => EventType::DeviceOnline,
        _ => EventType::DeviceOffline,
    };
    let data = serde_json::to_value(&device)?;
    queue_deliveries(conn, org_id, event, |delivery| {
        serde_json::json!({"id": delivery, "event": event, "created_at": now, "data": data})
            .to_string()
    })
    .await?;
    Ok(StatusChanged { event, device })
}

/// Queues a command for a device within a transaction; returns its id.
pub(crate) async fn insert_command(
    conn: &mut AnyConnection,
    org_id: &str,
    device_id: &str,
    command: &str,
    params: &serde_json::Value,
    expires_at: Timestamp,
) -> Result<String> {
    let id = new_id();
    sqlx::query(
        "INSERT INTO device_commands (id, org_id, device_id, command, params, status, created_at, expires_at) \
         VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7)",
    )
    .bind(&id)
    .bind(org_id)
    .bind(device_id)
    .bind(command)
    .bind(params.to_string())
    .bind(Timestamp::now().millis())
    .bind(expires_at.millis())
    .execute(&mut *conn)
    .await?;
    Ok(id)
}

impl Store {
    /// Queues a command for the organization's device.
    pub async fn create_command(
        &self,
        org_id: &str,
        device_id: &str,
        command: &str,
        params: &serde_json::Value,
        expires_at: Timestamp,
    ) -> Result<Command> {
        let mut tx = self.begin_write().await?;
        device_in(&mut tx, org_id, device_id).await?;
        let id = insert_command(&mut tx, org_id, device_id, command, params, expires_at).await?;
        tx.commit().await?;
        self.org_row(&COMMANDS, org_id, &id, command_from_row).await
    }

    /// A page of the device's commands, newest first, and how many there are.
    pub async fn commands(
        &self,
        org_id: &str,
        device_id: &str,
        (limit, offset): (i64, i64),
    ) -> Result<(Vec<Command>, u64)> {
        let total: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM device_commands WHERE org_id = $1 AND device_id = $2",
        )
        .bind(org_id)
        .bind(device_id)
        .fetch_one(self.pool())
        .await?
        .try_get("n")?;
        let rows = sqlx::query(
            "SELECT * FROM device_commands WHERE org_id = $1 AND device_id = $2 \
             ORDER BY created_at DESC, id LIMIT $3 OFFSET $4",
        )
        .bind(org_id)
        .bind(device_id)
        .bind(limit)
        .bind(offset)
        .fetch_all(self.pool())
        .await?;
        let commands = rows.iter().map(command_from_row).collect::<Result<_>>()?;
        Ok((commands, total as u64))
    }

    /// Commands still to deliver (queued, not expired) of `device_ids`, oldest first.
    pub async fn queued_commands_of(
        &self,
        device_ids: &[String],
        now: Timestamp,
    ) -> Result<Vec<Command>> {
        if device_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT * FROM device_commands WHERE device_id IN {} AND status = 'queued' \
             AND expires_at > $1 ORDER BY created_at, id",
            crate::devices::placeholders(2, device_ids.len())
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(now.millis());
        for id in device_ids {
            q = q.bind(id.clone());
        }
        let rows = q.fetch_all(self.pool()).await?;
        rows.iter().map(command_from_row).collect()
    }

    /// Queued commands (within their time to live) of devices that are online, oldest first.
    pub async fn queued_commands_of_online(
        &self,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<Command>> {
        let rows = sqlx::query(
            "SELECT c.* FROM device_commands c JOIN devices d ON d.id = c.device_id \
             WHERE c.status = 'queued' AND c.expires_at > $1 AND d.status = 'online' \
             ORDER BY c.created_at, c.id LIMIT $2",
        )
        .bind(now.millis())
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(command_from_row).collect()
    }

    /// Marks a delivered command `sent` (if it was still queued).
    pub async fn command_sent(&self, id: &str, now: Timestamp) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "UPDATE device_commands SET status = 'sent', sent_at = $1 WHERE id = $2 AND status = 'queued'",
        )
        .bind(now.millis())
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records the device's answer to its own open command; `NotFound` when the device has no
    /// open command with that id (another device's, unknown, answered or expired).
    pub async fn complete_command(
        &self,
        device_id: &str,
        id: &str,
        status: CommandStatus,
        result: Option<&serde_json::Value>,
        now: Timestamp,
    ) -> Result<()> {
        let q = sqlx::query(
            "UPDATE device_commands SET status = $1, result = $2, completed_at = $3 \
             WHERE id = $4 AND device_id = $5 AND status IN ('queued', 'sent') AND expires_at > $6",
        )
        .bind(status.as_str())
        .bind(result.map(|r| r.to_string()))
        .bind(now.millis())
        .bind(id)
        .bind(device_id)
        .bind(now.millis());
        self.write_one(q).await
    }

    /// Marks every open command whose time to live has passed `expired`; how many.
    pub async fn expire_commands(&self, now: Timestamp) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "UPDATE device_commands SET status = 'expired', completed_at = $1 \
             WHERE status IN ('queued', 'sent') AND expires_at <= $1",
        )
        .bind(now.millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }

    /// Stores a device's heartbeat (its figures, and its firmware version when it says one),
    /// durably, together with the heartbeats of other devices arriving at the same time
    /// (`heartbeat_writer.rs`); `NotFound` when the device is gone.
    pub async fn record_heartbeat(
        &self,
        org_id: &str,
        device_id: &str,
        heartbeat: &serde_json::Value,
        firmware_version: Option<&str>,
        now: Timestamp,
    ) -> Result<()> {
        use crate::heartbeat_writer::{Heartbeat, HeartbeatGroup};
        let queue = self
            .heartbeat_writer
            .get_or_init(|| crate::group_writer::spawn::<HeartbeatGroup>(self.db.clone()));
        let h = Heartbeat {
            org_id: org_id.to_string(),
            device_id: device_id.to_string(),
            figures: heartbeat.to_string(),
            firmware_version: firmware_version.map(str::to_string),
            at: now,
        };
        match crate::group_writer::write::<HeartbeatGroup>(queue, h).await? {
            true => Ok(()),
            false => Err(StoreError::NotFound),
        }
    }

    /// Records when devices were last seen (`(org_id, device_id, at)`), in one transaction;
    /// each device not `online` turns online, and its change is returned.
    pub async fn devices_seen(
        &self,
        seen: &[(String, String, Timestamp)],
    ) -> Result<Vec<StatusChanged>> {
        let mut changed = Vec::new();
        if seen.is_empty() {
            return Ok(changed);
        }
        let mut tx = self.begin_write().await?;
        for (org_id, device_id, at) in seen {
            let row = sqlx::query(
                "UPDATE devices SET last_seen_at = $1 WHERE org_id = $2 AND id = $3 \
                 AND (last_seen_at IS NULL OR last_seen_at < $1) RETURNING status",
            )
            .bind(at.millis())
            .bind(org_id)
            .bind(device_id)
            .fetch_optional(&mut *tx)
            .await?;
            let status: Option<String> = row.map(|r| r.try_get("status")).transpose()?;
            if status.is_some_and(|s| s != DeviceStatus::Online.as_str()) {
                changed.push(
                    change_status(&mut tx, org_id, device_id, DeviceStatus::Online, *at).await?,
                );
            }
        }
        tx.commit().await?;
        Ok(changed)
    }

    /// Turns `offline` every online device last seen before `cutoff`; the changes.
    pub async fn sweep_offline(
        &self,
        cutoff: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<StatusChanged>> {
        let due = sqlx::query(
            "SELECT org_id, id FROM devices WHERE status = 'online' AND last_seen_at < $1 LIMIT 1000",
        )
        .bind(cutoff.millis())
        .fetch_all(self.pool())
        .await?;
        let mut changed = Vec::new();
        if due.is_empty() {
            return Ok(changed);
        }
        let mut tx = self.begin_write().await?;
        for row in &due {
            let org_id: String = row.try_get("org_id")?;
            let id: String = row.try_get("id")?;
            // Another node may have swept it, or the device came back, since the read.
            let still = sqlx::query(
                "SELECT 1 AS one FROM devices WHERE id = $1 AND status = 'online' AND last_seen_at < $2",
            )
            .bind(&id)
            .bind(cutoff.millis())
            .fetch_optional(&mut *tx)
            .await?;
            if still.is_some() {
                changed
                    .push(change_status(&mut tx, &org_id, &id, DeviceStatus::Offline, now).await?);
            }
        }
        tx.commit().await?;
        Ok(changed)
    }

    /// The device's last heartbeat and its latest 100 status changes.
    pub async fn device_health(&self, org_id: &str, device_id: &str) -> Result<DeviceHealthRecord> {
        let row = sqlx::query(
            "SELECT heartbeat, heartbeat_at FROM devices WHERE org_id = $1 AND id = $2",
        )
        .bind(org_id)
        .bind(device_id)
        .fetch_optional(self.pool())
        .await?
        .ok_or(StoreError::NotFound)?;
        let heartbeat: Option<String> = row.try_get("heartbeat")?;
        let history = sqlx::query(
            "SELECT status, at FROM device_status_history WHERE org_id = $1 AND device_id = $2 \
             ORDER BY at DESC, id DESC LIMIT 100",
        )
        .bind(org_id)
        .bind(device_id)
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(|r| {
            let s: String = r.try_get("status")?;
            Ok(StatusChange {
                status: DeviceStatus::parse(&s)
                    .ok_or_else(|| StoreError::Corrupt(format!("device status {s}")))?,
                at: Timestamp::from_millis(r.try_get("at")?),
            })
        })
        .collect::<Result<_>>()?;
        Ok(DeviceHealthRecord {
            heartbeat: heartbeat.map(|h| serde_json::from_str(&h)).transpose()?,
            heartbeat_at: row
                .try_get::<Option<i64>, _>("heartbeat_at")?
                .map(Timestamp::from_millis),
            history,
        })
    }
}
