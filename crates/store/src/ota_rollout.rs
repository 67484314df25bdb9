//! How OTA deployments move, as stored: each transition (a phase started, paused, completed,
//! stopped, cancelled, rolled back) in one transaction conditional on the status it read, with
//! the commands that tell devices to update or roll back and the webhook deliveries of its
//! `ota.deployment.*` event; devices' reports and timeouts. Every transaction that changes a
//! deployment or depends on its status locks the deployment's row first, so on PostgreSQL a
//! report and a rollback never miss each other.

use plantd_model::Timestamp;
use plantd_model::event::EventType;
use plantd_model::ota::{Deployment, DeploymentStatus, DeviceState};
use sqlx::{AnyConnection, Row};

use crate::device_channel::insert_command;
use crate::ota::{
    ACTIVE, DEPLOYMENT_COLUMNS, OtaCommand, ReportUpdate, add_devices, announce,
    deployment_from_row,
};
use crate::{Result, Store, StoreError};

/// Sets the deployment's status (and the given columns) if it is still in `from`; `false`
/// when another node or call moved it first.
async fn move_status(
    conn: &mut AnyConnection,
    id: &str,
    from: DeploymentStatus,
    to: DeploymentStatus,
    extra: &str,
    now: Timestamp,
) -> Result<bool> {
    let finished = if to.is_active() {
        ""
    } else {
        ", finished_at = $4"
    };
    let sql = format!(
        "UPDATE ota_deployments SET status = $1, updated_at = $4{finished}{extra} \
         WHERE id = $2 AND status = $3"
    );
    let done = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(to.as_str())
        .bind(id)
        .bind(from.as_str())
        .bind(now.millis())
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Tells every pending device of phases up to `phase` to update: a command each, the device
/// `notified` with its deadline. Returns the devices told.
async fn notify(
    conn: &mut AnyConnection,
    d: &Deployment,
    phase: u32,
    command: &OtaCommand,
    now: Timestamp,
) -> Result<Vec<String>> {
    let rows = sqlx::query(
        "SELECT device_id FROM ota_deployment_devices \
         WHERE deployment_id = $1 AND state = 'pending' AND phase <= $2 ORDER BY device_id",
    )
    .bind(&d.id)
    .bind(phase as i64)
    .fetch_all(&mut *conn)
    .await?;
    let mut told = Vec::with_capacity(rows.len());
    let deadline = now.millis() + d.device_timeout_seconds as i64 * 1000;
    for row in rows {
        let device: String = row.try_get("device_id")?;
        let command_id = insert_command(
            conn,
            &d.org_id,
            &device,
            command.command,
            &command.params,
            command.expires_at,
        )
        .await?;
        sqlx::query(
            "UPDATE ota_deployment_devices SET state = 'notified', command_id = $1, \
             notified_at = $2, deadline_at = $3, updated_at = $2 \
             WHERE deployment_id = $4 AND device_id = $5",
        )
        .bind(&command_id)
        .bind(now.millis())
        .bind(deadline)
        .bind(&d.id)
        .bind(&device)
        .execute(&mut *conn)
        .await?;
        told.push(device);
    }
    Ok(told)
}

/// Ends an active deployment as `to` (if it is still as read): devices not reached are not
/// updated. `false` when another node or call moved it first.
async fn stop(
    conn: &mut AnyConnection,
    d: &Deployment,
    to: DeploymentStatus,
    now: Timestamp,
) -> Result<bool> {
    if !move_status(conn, &d.id, d.status, to, "", now).await? {
        return Ok(false);
    }
    cancel_unreached(conn, &d.id, now).await?;
    Ok(true)
}

/// Devices not reached yet are not updated: pending ones, and those whose update command is
/// still queued (its command expires).
async fn cancel_unreached(conn: &mut AnyConnection, id: &str, now: Timestamp) -> Result<()> {
    sqlx::query(
        "UPDATE ota_deployment_devices SET state = 'cancelled', updated_at = $2 \
         WHERE deployment_id = $1 AND (state = 'pending' OR (state = 'notified' AND command_id IN \
         (SELECT c.id FROM device_commands c WHERE c.status = 'queued')))",
    )
    .bind(id)
    .bind(now.millis())
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "UPDATE device_commands SET status = 'expired', completed_at = $2 WHERE status = 'queued' \
         AND id IN (SELECT command_id FROM ota_deployment_devices WHERE deployment_id = $1 AND state = 'cancelled')",
    )
    .bind(id)
    .bind(now.millis())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Tells every device that installed the package (succeeded) to return to its previous
/// version. Returns the devices told.
async fn roll_back_installed(
    conn: &mut AnyConnection,
    d: &Deployment,
    command: &OtaCommand,
    now: Timestamp,
) -> Result<Vec<String>> {
    let rows = sqlx::query(
        "SELECT device_id FROM ota_deployment_devices WHERE deployment_id = $1 AND state = 'succeeded' ORDER BY device_id",
    )
    .bind(&d.id)
    .fetch_all(&mut *conn)
    .await?;
    let mut told = Vec::with_capacity(rows.len());
    for row in rows {
        let device: String = row.try_get("device_id")?;
        roll_back_one(conn, d, &device, command, now).await?;
        told.push(device);
    }
    Ok(told)
}

async fn roll_back_one(
    conn: &mut AnyConnection,
    d: &Deployment,
    device: &str,
    command: &OtaCommand,
    now: Timestamp,
) -> Result<()> {
    let command_id = insert_command(
        conn,
        &d.org_id,
        device,
        command.command,
        &command.params,
        command.expires_at,
    )
    .await?;
    sqlx::query(
        "UPDATE ota_deployment_devices SET state = 'rolling_back', command_id = $1, message = NULL, \
         progress_percent = NULL, deadline_at = $2, updated_at = $3 WHERE deployment_id = $4 AND device_id = $5",
    )
    .bind(&command_id)
    .bind(now.millis() + d.device_timeout_seconds as i64 * 1000)
    .bind(now.millis())
    .bind(&d.id)
    .bind(device)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Completes the command a device's final report answers.
async fn complete_command(
    conn: &mut AnyConnection,
    deployment_id: &str,
    device_id: &str,
    succeeded: bool,
    message: Option<&str>,
    now: Timestamp,
) -> Result<()> {
    sqlx::query(
        "UPDATE device_commands SET status = $1, completed_at = $2, result = $3 \
         WHERE status IN ('queued', 'sent') AND id = (SELECT command_id FROM ota_deployment_devices \
         WHERE deployment_id = $4 AND device_id = $5)",
    )
    .bind(if succeeded { "succeeded" } else { "failed" })
    .bind(now.millis())
    .bind(serde_json::json!({"message": message}).to_string())
    .bind(deployment_id)
    .bind(device_id)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Locks the deployment's row for this transaction if its status is one of `statuses` (an SQL
/// list): status changes lock it too, so what follows sees the status it checked.
pub(crate) async fn lock_if(conn: &mut AnyConnection, id: &str, statuses: &str) -> Result<bool> {
    let sql = format!(
        "UPDATE ota_deployments SET updated_at = updated_at WHERE id = $1 AND status IN {statuses}"
    );
    let done = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

impl Store {
    /// Adds devices that joined the targets while the deployment runs, pending in `phase`.
    pub async fn add_deployment_devices(
        &self,
        deployment_id: &str,
        org_id: &str,
        devices: &[(String, u32)],
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        if !lock_if(&mut tx, deployment_id, ACTIVE).await? {
            return Ok(());
        }
        add_devices(&mut tx, deployment_id, org_id, devices, Timestamp::now()).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Starts phase `phase` (from `from`, at `from_phase`): the deployment in progress, the
    /// pending devices of every phase up to it told. `None` when it had moved meanwhile.
    pub async fn start_phase(
        &self,
        d: &Deployment,
        phase: u32,
        command: &OtaCommand,
    ) -> Result<Option<(Deployment, Vec<String>)>> {
        let now = Timestamp::now();
        let mut tx = self.begin_write().await?;
        let moved = sqlx::query(
            "UPDATE ota_deployments SET status = 'in_progress', current_phase = $1, resume_at = NULL, \
             started_at = COALESCE(started_at, $2), updated_at = $2 \
             WHERE id = $3 AND status = $4 AND current_phase = $5",
        )
        .bind(phase as i64)
        .bind(now.millis())
        .bind(&d.id)
        .bind(d.status.as_str())
        .bind(d.current_phase as i64)
        .execute(&mut *tx)
        .await?;
        if moved.rows_affected() == 0 {
            return Ok(None);
        }
        let told = notify(&mut tx, d, phase, command, now).await?;
        let d = announce(&mut tx, &d.id, EventType::OtaDeploymentPhaseStarted).await?;
        tx.commit().await?;
        Ok(Some((d, told)))
    }

    /// Whether the deployment has pending devices in its started phases (devices that joined
    /// the targets): a read, so that the engine's pass writes only when there is someone to tell.
    pub async fn has_joined(&self, d: &Deployment) -> Result<bool> {
        Ok(sqlx::query(
            "SELECT 1 AS one FROM ota_deployment_devices \
             WHERE deployment_id = $1 AND state = 'pending' AND phase <= $2 LIMIT 1",
        )
        .bind(&d.id)
        .bind(d.current_phase as i64)
        .fetch_optional(self.pool())
        .await?
        .is_some())
    }

    /// Tells the pending devices of started phases (devices that joined the targets), if the
    /// deployment is still in progress.
    pub async fn notify_joined(&self, d: &Deployment, command: &OtaCommand) -> Result<Vec<String>> {
        let mut tx = self.begin_write().await?;
        if !lock_if(&mut tx, &d.id, "('in_progress')").await? {
            return Ok(Vec::new());
        }
        let told = notify(&mut tx, d, d.current_phase, command, Timestamp::now()).await?;
        tx.commit().await?;
        Ok(told)
    }

    /// Pauses an in-progress deployment after its phase, until `resume_at` or until continued.
    pub async fn pause_deployment(
        &self,
        d: &Deployment,
        resume_at: Option<Timestamp>,
    ) -> Result<Option<Deployment>> {
        let now = Timestamp::now();
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "UPDATE ota_deployments SET resume_at = $1 WHERE id = $2 AND status = 'in_progress'",
        )
        .bind(resume_at.map(|t| t.millis()))
        .bind(&d.id)
        .execute(&mut *tx)
        .await?;
        if !move_status(
            &mut tx,
            &d.id,
            DeploymentStatus::InProgress,
            DeploymentStatus::Paused,
            "",
            now,
        )
        .await?
        {
            return Ok(None);
        }
        let d = announce(&mut tx, &d.id, EventType::OtaDeploymentPaused).await?;
        tx.commit().await?;
        Ok(Some(d))
    }

    pub async fn complete_deployment(&self, d: &Deployment) -> Result<Option<Deployment>> {
        let mut tx = self.begin_write().await?;
        if !move_status(
            &mut tx,
            &d.id,
            d.status,
            DeploymentStatus::Completed,
            "",
            Timestamp::now(),
        )
        .await?
        {
            return Ok(None);
        }
        let d = announce(&mut tx, &d.id, EventType::OtaDeploymentCompleted).await?;
        tx.commit().await?;
        Ok(Some(d))
    }

    /// Stops a deployment whose phase crossed its threshold: `failed`, or `rolled_back` with
    /// every installed device told to roll back when `rollback` is given. Devices not reached
    /// are not updated.
    pub async fn abort_deployment(
        &self,
        d: &Deployment,
        reason: &str,
        rollback: Option<&OtaCommand>,
    ) -> Result<Option<(Deployment, Vec<String>)>> {
        let now = Timestamp::now();
        let mut tx = self.begin_write().await?;
        let to = if rollback.is_some() {
            DeploymentStatus::RolledBack
        } else {
            DeploymentStatus::Failed
        };
        sqlx::query("UPDATE ota_deployments SET reason = $1 WHERE id = $2 AND status = $3")
            .bind(reason)
            .bind(&d.id)
            .bind(d.status.as_str())
            .execute(&mut *tx)
            .await?;
        if !stop(&mut tx, d, to, now).await? {
            return Ok(None);
        }
        let told = match rollback {
            Some(c) => roll_back_installed(&mut tx, d, c, now).await?,
            None => Vec::new(),
        };
        // Announced as failed in both cases; a rollback is announced too.
        let mut done = announce(&mut tx, &d.id, EventType::OtaDeploymentFailed).await?;
        if rollback.is_some() {
            done = announce(&mut tx, &d.id, EventType::OtaDeploymentRolledBack).await?;
        }
        tx.commit().await?;
        Ok(Some((done, told)))
    }

    /// Cancels an active deployment: devices not reached are not updated; the others finish.
    pub async fn cancel_deployment(&self, d: &Deployment) -> Result<Option<Deployment>> {
        let now = Timestamp::now();
        let mut tx = self.begin_write().await?;
        if !stop(&mut tx, d, DeploymentStatus::Cancelled, now).await? {
            return Ok(None);
        }
        let d = announce(&mut tx, &d.id, EventType::OtaDeploymentCancelled).await?;
        tx.commit().await?;
        Ok(Some(d))
    }

    /// Rolls a deployment back by hand: every installed device is told to return to its
    /// previous version, devices not reached are not updated.
    pub async fn roll_back_deployment(
        &self,
        d: &Deployment,
        command: &OtaCommand,
    ) -> Result<Option<(Deployment, Vec<String>)>> {
        let now = Timestamp::now();
        let mut tx = self.begin_write().await?;
        if !stop(&mut tx, d, DeploymentStatus::RolledBack, now).await? {
            return Ok(None);
        }
        let told = roll_back_installed(&mut tx, d, command, now).await?;
        let d = announce(&mut tx, &d.id, EventType::OtaDeploymentRolledBack).await?;
        tx.commit().await?;
        Ok(Some((d, told)))
    }

    /// Resumes a deployment paused for a person: its next phase starts.
    pub async fn continue_deployment(
        &self,
        d: &Deployment,
        command: &OtaCommand,
    ) -> Result<Option<(Deployment, Vec<String>)>> {
        self.start_phase(d, d.current_phase + 1, command).await
    }

    /// A device's state in a deployment, with the deployment's status.
    pub async fn deployment_device_state(
        &self,
        deployment_id: &str,
        device_id: &str,
    ) -> Result<(DeviceState, Deployment)> {
        let row = sqlx::query(
            "SELECT state FROM ota_deployment_devices WHERE deployment_id = $1 AND device_id = $2",
        )
        .bind(deployment_id)
        .bind(device_id)
        .fetch_optional(self.pool())
        .await?
        .ok_or(StoreError::NotFound)?;
        let state: String = row.try_get("state")?;
        let state = DeviceState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("device state {state}")))?;
        let sql = format!("SELECT {DEPLOYMENT_COLUMNS} FROM ota_deployments WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(deployment_id)
            .fetch_one(self.pool())
            .await?;
        Ok((state, deployment_from_row(&row)?))
    }

    /// Records a device's report if its state is still what the report was decided on (`None`
    /// otherwise: a concurrent report or timeout came first). A final report completes the
    /// device's command. A success in a deployment rolled back meanwhile is rolled back at
    /// once (`Some(true)`): the deployment's row is locked first, as every status change locks
    /// it, so a rollback either sees this success or is seen by it.
    pub async fn record_ota_report(
        &self,
        d: &Deployment,
        r: &ReportUpdate,
    ) -> Result<Option<bool>> {
        let now = Timestamp::now();
        let mut tx = self.begin_write().await?;
        let status: String = sqlx::query(
            "UPDATE ota_deployments SET updated_at = updated_at WHERE id = $1 RETURNING status",
        )
        .bind(&r.deployment_id)
        .fetch_one(&mut *tx)
        .await?
        .try_get("status")?;
        let rolled_back = status == DeploymentStatus::RolledBack.as_str();
        let done = sqlx::query(
            "UPDATE ota_deployment_devices SET state = $1, message = $2, progress_percent = $3, updated_at = $4 \
             WHERE deployment_id = $5 AND device_id = $6 AND state = $7",
        )
        .bind(r.to.as_str())
        .bind(r.message.as_deref())
        .bind(r.progress_percent.map(i64::from))
        .bind(now.millis())
        .bind(&r.deployment_id)
        .bind(&r.device_id)
        .bind(r.from.as_str())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        if r.to.is_final() {
            complete_command(
                &mut tx,
                &r.deployment_id,
                &r.device_id,
                r.to == DeviceState::Succeeded || r.to == DeviceState::RolledBack,
                r.message.as_deref(),
                now,
            )
            .await?;
        }
        let rolled = r.to == DeviceState::Succeeded && rolled_back && r.rollback.is_some();
        if let (true, Some(c)) = (rolled, &r.rollback) {
            roll_back_one(&mut tx, d, &r.device_id, c, now).await?;
        }
        tx.commit().await?;
        Ok(Some(rolled))
    }

    /// Fails every device whose deadline passed without a final report; returns how many.
    /// The engine asks every second: a read finds whether any deadline passed, and only then
    /// is there a write transaction (on SQLite, a synced commit a second for nothing otherwise).
    pub async fn time_out_ota_devices(&self, now: Timestamp) -> Result<u64> {
        let open: Vec<String> = DeviceState::OPEN
            .iter()
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        let due = format!("deadline_at < $1 AND state IN ({})", open.join(", "));
        let any = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT 1 AS one FROM ota_deployment_devices WHERE {due} LIMIT 1"
        )))
        .bind(now.millis())
        .fetch_optional(self.pool())
        .await?;
        if any.is_none() {
            return Ok(0);
        }
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "UPDATE ota_deployment_devices SET message = CASE WHEN state = 'rolling_back' \
             THEN 'the rollback was not confirmed in time' ELSE 'no answer in time (device_timeout_seconds)' END, \
             state = 'failed', updated_at = $1 WHERE {due}"
        );
        let done = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(now.millis())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }
}
