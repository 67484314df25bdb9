//! OTA as stored: packages (the row; the file is the application's, content-addressed on
//! disk), deployments, and each target device's state. Every change of a deployment's status
//! queues its `ota.deployment.*` webhook deliveries in its own transaction, and the commands
//! that tell devices to update or roll back are written in the transaction that moves them, so
//! a deployment advanced on one node is never advanced again on another (each transition is
//! conditional on the status it read).

use plantd_model::Timestamp;
use plantd_model::event::EventType;
use plantd_model::ota::{
    Deployment, DeploymentDevice, DeploymentStatus, DeviceState, PhaseProgress, Strategy,
};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use std::collections::BTreeMap;

use crate::devices::placeholders;
use crate::rows::touched;
use crate::webhooks::queue_deliveries;
use crate::{Result, Store, StoreError};

pub(crate) const DEPLOYMENT_COLUMNS: &str = "id, org_id, name, package_id, targets, strategy, phases, \
     rollback_enabled, include_new_devices, device_timeout_seconds, status, current_phase, \
     resume_at, reason, created_at, updated_at, started_at, finished_at";

pub(crate) const ACTIVE: &str = "('scheduled', 'in_progress', 'paused')";

/// A deployment as created.
#[derive(Clone, Debug)]
pub struct NewDeployment {
    pub deployment: Deployment,
    /// Each target device with its phase (1-based).
    pub devices: Vec<(String, u32)>,
}

/// What tells a device to update or roll back: the command, its parameters and its time to
/// live.
#[derive(Clone, Debug)]
pub struct OtaCommand {
    pub command: &'static str,
    pub params: serde_json::Value,
    pub expires_at: Timestamp,
}

/// A device's report, as the application decided it.
#[derive(Clone, Debug)]
pub struct ReportUpdate {
    pub deployment_id: String,
    pub device_id: String,
    /// The state it was in when read (the write happens only if it still is).
    pub from: DeviceState,
    pub to: DeviceState,
    pub message: Option<String>,
    pub progress_percent: Option<u8>,
    /// For a success: the rollback command, sent at once if the deployment is rolled back
    /// when the report is written.
    pub rollback: Option<OtaCommand>,
}

pub(crate) fn deployment_from_row(row: &AnyRow) -> Result<Deployment> {
    let status: String = row.try_get("status")?;
    let strategy: String = row.try_get("strategy")?;
    let targets: String = row.try_get("targets")?;
    let phases: String = row.try_get("phases")?;
    let ts = |c: &str| -> Result<Option<Timestamp>> {
        Ok(row
            .try_get::<Option<i64>, _>(c)?
            .map(Timestamp::from_millis))
    };
    Ok(Deployment {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        name: row.try_get("name")?,
        package_id: row.try_get("package_id")?,
        targets: serde_json::from_str(&targets)?,
        strategy: Strategy::parse(&strategy)
            .ok_or_else(|| StoreError::Corrupt(format!("deployment strategy {strategy}")))?,
        phases: serde_json::from_str(&phases)?,
        rollback_enabled: row.try_get::<i64, _>("rollback_enabled")? != 0,
        include_new_devices: row.try_get::<i64, _>("include_new_devices")? != 0,
        device_timeout_seconds: row.try_get::<i64, _>("device_timeout_seconds")? as u64,
        status: DeploymentStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("deployment status {status}")))?,
        current_phase: row.try_get::<i64, _>("current_phase")? as u32,
        resume_at: ts("resume_at")?,
        reason: row.try_get("reason")?,
        device_counts: BTreeMap::new(),
        phase_progress: Vec::new(),
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
        started_at: ts("started_at")?,
        finished_at: ts("finished_at")?,
    })
}

/// Fills in the device counts and phase progress of `deployments` (one query for all).
async fn with_counts(
    conn: &mut AnyConnection,
    mut deployments: Vec<Deployment>,
) -> Result<Vec<Deployment>> {
    if deployments.is_empty() {
        return Ok(deployments);
    }
    let sql = format!(
        "SELECT deployment_id, phase, state, COUNT(*) AS n FROM ota_deployment_devices \
         WHERE deployment_id IN {} GROUP BY deployment_id, phase, state",
        placeholders(1, deployments.len())
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    for d in &deployments {
        q = q.bind(d.id.clone());
    }
    let rows = q.fetch_all(&mut *conn).await?;
    for d in &mut deployments {
        d.device_counts = DeviceState::ALL.into_iter().map(|s| (s, 0)).collect();
        d.phase_progress = (1..=d.phases.len() as u32)
            .map(|phase| PhaseProgress {
                phase,
                devices: 0,
                succeeded: 0,
                failed: 0,
                open: 0,
            })
            .collect();
    }
    for row in rows {
        let id: String = row.try_get("deployment_id")?;
        let phase = row.try_get::<i64, _>("phase")? as usize;
        let state: String = row.try_get("state")?;
        let state = DeviceState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("device state {state}")))?;
        let n = row.try_get::<i64, _>("n")? as u64;
        let Some(d) = deployments.iter_mut().find(|d| d.id == id) else {
            continue;
        };
        *d.device_counts.entry(state).or_default() += n;
        if let Some(p) = d.phase_progress.get_mut(phase.saturating_sub(1)) {
            p.devices += n;
            match state {
                DeviceState::Succeeded => p.succeeded += n,
                DeviceState::Failed => p.failed += n,
                s if !s.is_final() => p.open += n,
                _ => {}
            }
        }
    }
    Ok(deployments)
}

/// The deployment `id` (of any organization) within a transaction, with its counts.
async fn deployment_in(conn: &mut AnyConnection, id: &str) -> Result<Deployment> {
    let sql = format!("SELECT {DEPLOYMENT_COLUMNS} FROM ota_deployments WHERE id = $1");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(StoreError::NotFound)?;
    let d = deployment_from_row(&row)?;
    Ok(with_counts(conn, vec![d]).await?.remove(0))
}

/// Queues the webhook deliveries of `event` for the deployment as it now is, and returns it.
pub(crate) async fn announce(
    conn: &mut AnyConnection,
    id: &str,
    event: EventType,
) -> Result<Deployment> {
    let d = deployment_in(conn, id).await?;
    let now = Timestamp::now();
    let data = serde_json::to_value(&d)?;
    queue_deliveries(conn, &d.org_id, event, |delivery| {
        serde_json::json!({"id": delivery, "event": event, "created_at": now, "data": data})
            .to_string()
    })
    .await?;
    Ok(d)
}

fn binds<'q>(
    mut q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    ids: &'q [String],
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    for id in ids {
        q = q.bind(id.as_str());
    }
    q
}

impl Store {
    /// Which of `ids` are the organization's devices.
    pub async fn org_device_ids(&self, org_id: &str, ids: &[String]) -> Result<Vec<String>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT id FROM devices WHERE org_id = $1 AND id IN {} ORDER BY id",
            placeholders(2, ids.len())
        );
        let rows = binds(sqlx::query(sqlx::AssertSqlSafe(sql)).bind(org_id), ids)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// Which of `ids` take part in an active deployment (other than `except`).
    pub async fn devices_in_active_deployments(
        &self,
        ids: &[String],
        except: Option<&str>,
    ) -> Result<Vec<String>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT DISTINCT dd.device_id FROM ota_deployment_devices dd JOIN ota_deployments d \
             ON d.id = dd.deployment_id WHERE d.status IN {ACTIVE} AND d.id <> $1 AND dd.device_id IN {}",
            placeholders(2, ids.len())
        );
        let rows = binds(
            sqlx::query(sqlx::AssertSqlSafe(sql)).bind(except.unwrap_or("")),
            ids,
        )
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(|r| Ok(r.try_get("device_id")?)).collect()
    }

    /// Creates a deployment with its target devices (all pending) and announces it.
    pub async fn create_deployment(&self, new: &NewDeployment) -> Result<Deployment> {
        let d = &new.deployment;
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO ota_deployments (id, org_id, name, package_id, targets, strategy, phases, \
             rollback_enabled, include_new_devices, device_timeout_seconds, status, current_phase, \
             resume_at, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'scheduled', 0, $11, $12, $12)",
        )
        .bind(&d.id)
        .bind(&d.org_id)
        .bind(&d.name)
        .bind(&d.package_id)
        .bind(serde_json::to_string(&d.targets)?)
        .bind(d.strategy.as_str())
        .bind(serde_json::to_string(&d.phases)?)
        .bind(d.rollback_enabled as i64)
        .bind(d.include_new_devices as i64)
        .bind(d.device_timeout_seconds as i64)
        .bind(d.resume_at.map(|t| t.millis()))
        .bind(d.created_at.millis())
        .execute(&mut *tx)
        .await?;
        add_devices(&mut tx, &d.id, &d.org_id, &new.devices, d.created_at).await?;
        let d = announce(&mut tx, &d.id, EventType::OtaDeploymentCreated).await?;
        tx.commit().await?;
        Ok(d)
    }

    /// Device ids already in the deployment.
    pub async fn deployment_device_ids(&self, deployment_id: &str) -> Result<Vec<String>> {
        let rows =
            sqlx::query("SELECT device_id FROM ota_deployment_devices WHERE deployment_id = $1")
                .bind(deployment_id)
                .fetch_all(self.pool())
                .await?;
        rows.iter().map(|r| Ok(r.try_get("device_id")?)).collect()
    }

    pub async fn deployments(
        &self,
        org_id: &str,
        status: Option<DeploymentStatus>,
        (limit, offset): (i64, i64),
    ) -> Result<(Vec<Deployment>, u64)> {
        // Without a status, `$2 = $2` keeps the placeholders' numbering.
        let filter = if status.is_some() {
            "org_id = $1 AND status = $2"
        } else {
            "org_id = $1 AND $2 = $2"
        };
        let status = status.map_or("", DeploymentStatus::as_str);
        let total: i64 = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) AS n FROM ota_deployments WHERE {filter}"
        )))
        .bind(org_id)
        .bind(status)
        .fetch_one(self.pool())
        .await?
        .try_get("n")?;
        let list = self
            .deployments_where(
                &format!("{filter} ORDER BY created_at DESC, id LIMIT $3 OFFSET $4"),
                &[org_id, status],
                &[limit, offset],
            )
            .await?;
        Ok((list, total as u64))
    }

    /// The deployments `clause` (a `WHERE` of this file's, with its order) selects, with their
    /// counts: text arguments first, then numbers.
    async fn deployments_where(
        &self,
        clause: &str,
        texts: &[&str],
        numbers: &[i64],
    ) -> Result<Vec<Deployment>> {
        let mut conn = self.pool().acquire().await?;
        let sql = format!("SELECT {DEPLOYMENT_COLUMNS} FROM ota_deployments WHERE {clause}");
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for t in texts {
            q = q.bind(*t);
        }
        for n in numbers {
            q = q.bind(*n);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        let list = rows
            .iter()
            .map(deployment_from_row)
            .collect::<Result<Vec<_>>>()?;
        with_counts(&mut conn, list).await
    }

    pub async fn deployment(&self, org_id: &str, id: &str) -> Result<Deployment> {
        let mut conn = self.pool().acquire().await?;
        let d = deployment_in(&mut conn, id).await?;
        if d.org_id != org_id {
            return Err(StoreError::NotFound);
        }
        Ok(d)
    }

    /// Every active deployment (of every organization), oldest first: the engine's work.
    pub async fn active_deployments(&self) -> Result<Vec<Deployment>> {
        self.deployments_where(
            &format!("status IN {ACTIVE} ORDER BY created_at, id"),
            &[],
            &[],
        )
        .await
    }

    /// A page of the deployment's devices (by phase, then id), filtered by state.
    pub async fn deployment_devices(
        &self,
        org_id: &str,
        id: &str,
        state: Option<DeviceState>,
        (limit, offset): (i64, i64),
    ) -> Result<(Vec<DeploymentDevice>, u64)> {
        let filter = if state.is_some() {
            " AND dd.state = $3"
        } else {
            " AND $3 = $3"
        };
        let state = state.map_or("", DeviceState::as_str);
        let total: i64 = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) AS n FROM ota_deployment_devices dd WHERE dd.org_id = $1 AND dd.deployment_id = $2{filter}"
        )))
        .bind(org_id)
        .bind(id)
        .bind(state)
        .fetch_one(self.pool())
        .await?
        .try_get("n")?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT dd.*, dv.name AS device_name FROM ota_deployment_devices dd \
             JOIN devices dv ON dv.id = dd.device_id \
             WHERE dd.org_id = $1 AND dd.deployment_id = $2{filter} \
             ORDER BY dd.phase, dd.device_id LIMIT $4 OFFSET $5"
        )))
        .bind(org_id)
        .bind(id)
        .bind(state)
        .bind(limit)
        .bind(offset)
        .fetch_all(self.pool())
        .await?;
        let list = rows
            .iter()
            .map(|row| {
                let state: String = row.try_get("state")?;
                Ok(DeploymentDevice {
                    device_id: row.try_get("device_id")?,
                    device_name: row.try_get("device_name")?,
                    phase: row.try_get::<i64, _>("phase")? as u32,
                    state: DeviceState::parse(&state)
                        .ok_or_else(|| StoreError::Corrupt(format!("device state {state}")))?,
                    message: row.try_get("message")?,
                    progress_percent: row
                        .try_get::<Option<i64>, _>("progress_percent")?
                        .map(|p| p.clamp(0, 100) as u8),
                    notified_at: row
                        .try_get::<Option<i64>, _>("notified_at")?
                        .map(Timestamp::from_millis),
                    updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((list, total as u64))
    }
}

pub(crate) async fn add_devices(
    conn: &mut AnyConnection,
    deployment_id: &str,
    org_id: &str,
    devices: &[(String, u32)],
    now: Timestamp,
) -> Result<()> {
    for (device, phase) in devices {
        touched(
            sqlx::query(
                "INSERT INTO ota_deployment_devices (deployment_id, device_id, org_id, phase, state, updated_at) \
                 VALUES ($1, $2, $3, $4, 'pending', $5)",
            )
            .bind(deployment_id)
            .bind(device)
            .bind(org_id)
            .bind(*phase as i64)
            .bind(now.millis())
            .execute(&mut *conn)
            .await?,
        )?;
    }
    Ok(())
}
