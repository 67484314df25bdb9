//! Fleet records: devices (with their tags, groups and hashed MQTT password), device groups and
//! enrollment tokens. A registration through a token counts its use in the transaction that
//! creates the device, so a token limited to N uses enrolls N devices however many try at once.

use plantd_model::Timestamp;
use plantd_model::device::{Device, DeviceGroup, DeviceStatus, EnrollmentToken};
use plantd_model::new_id;
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use crate::rows::{OrgTable, delete_in, touched};
use crate::sql::{json_column, opt_ts};
use crate::{Arg, Result, Store, StoreError, Where, conflict_on_unique};

/// Devices, oldest first.
const DEVICES: OrgTable = OrgTable {
    name: "devices",
    columns: DEVICE_COLUMNS,
    order: "created_at, id",
};
const DEVICE_COLUMNS: &str = "id, org_id, name, serial_number, status, last_seen_at, firmware_version, tags, metadata, asset_id, created_at, updated_at";

/// Groups by name, with their device count.
const GROUPS: OrgTable = OrgTable {
    name: "device_groups g",
    columns: "g.*, (SELECT COUNT(*) FROM device_group_members m WHERE m.group_id = g.id) AS device_count",
    order: "name, id",
};

/// Enrollment tokens, newest first (never the secret's hash).
const TOKENS: OrgTable = OrgTable {
    name: "enrollment_tokens",
    columns: "id, org_id, prefix, group_id, tags, expires_at, max_uses, uses, revoked_at, created_at",
    order: "created_at DESC, id",
};

/// What a device is registered with (its password already hashed).
pub struct NewDevice {
    pub name: String,
    pub serial_number: String,
    pub tags: Vec<String>,
    pub metadata: serde_json::Value,
    pub asset_id: Option<String>,
    pub group_ids: Vec<String>,
    pub mqtt_password_hash: String,
}

/// A device's changeable fields, all given (the use case merges a partial update).
pub struct DeviceFields {
    pub name: String,
    pub tags: Vec<String>,
    pub metadata: serde_json::Value,
    pub asset_id: String,
    pub group_ids: Vec<String>,
}

/// The device list's filters.
#[derive(Clone, Debug, Default)]
pub struct DeviceFilter {
    pub status: Option<DeviceStatus>,
    pub group_id: Option<String>,
    /// The device must carry every one.
    pub tags: Vec<String>,
}

/// A new enrollment token (its secret already hashed).
pub struct NewEnrollmentToken {
    pub token_hash: String,
    pub prefix: String,
    pub group_id: Option<String>,
    pub tags: Vec<String>,
    pub expires_at: Option<Timestamp>,
    pub max_uses: Option<u64>,
}

/// What the MQTT door checks a login against.
#[derive(Clone, Debug)]
pub struct DeviceLogin {
    pub id: String,
    pub org_id: String,
    pub asset_id: String,
    pub mqtt_password_hash: String,
}

/// A device row, its groups still to be filled in.
pub(crate) fn device_from_row(row: &AnyRow) -> Result<Device> {
    let status: String = row.try_get("status")?;
    Ok(Device {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        name: row.try_get("name")?,
        serial_number: row.try_get("serial_number")?,
        status: DeviceStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("device status {status}")))?,
        last_seen_at: opt_ts(row, "last_seen_at")?,
        firmware_version: row.try_get("firmware_version")?,
        group_ids: Vec::new(),
        tags: json_column(row, "tags")?,
        metadata: json_column(row, "metadata")?,
        asset_id: row.try_get("asset_id")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

fn group_from_row(row: &AnyRow) -> Result<DeviceGroup> {
    Ok(DeviceGroup {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        device_count: row.try_get::<i64, _>("device_count")? as u64,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

fn token_from_row(row: &AnyRow) -> Result<EnrollmentToken> {
    Ok(EnrollmentToken {
        id: row.try_get("id")?,
        prefix: row.try_get("prefix")?,
        group_id: row.try_get("group_id")?,
        tags: json_column(row, "tags")?,
        expires_at: opt_ts(row, "expires_at")?,
        max_uses: row.try_get::<Option<i64>, _>("max_uses")?.map(|m| m as u64),
        uses: row.try_get::<i64, _>("uses")? as u64,
        revoked_at: opt_ts(row, "revoked_at")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
    })
}

/// `($1, $2, ...)` from `first` for `n` values.
pub(crate) fn placeholders(first: usize, n: usize) -> String {
    let list: Vec<String> = (first..first + n).map(|i| format!("${i}")).collect();
    format!("({})", list.join(", "))
}

/// The `WHERE` of the organization's devices that `filter` selects (status, group, all of the
/// tags).
fn device_where(org_id: &str, filter: &DeviceFilter) -> Where {
    let mut w = Where::new();
    w.push("org_id = ?", [Arg::Text(org_id.into())]);
    if let Some(s) = filter.status {
        w.push("status = ?", [Arg::Text(s.as_str().into())]);
    }
    if let Some(g) = &filter.group_id {
        w.push(
            "id IN (SELECT device_id FROM device_group_members WHERE group_id = ?)",
            [Arg::Text(g.clone())],
        );
    }
    if !filter.tags.is_empty() {
        let marks = vec!["?"; filter.tags.len()].join(", ");
        let mut args: Vec<Arg> = vec![Arg::Text(org_id.into())];
        args.extend(filter.tags.iter().map(|t| Arg::Text(t.clone())));
        args.push(Arg::Int(filter.tags.len() as i64));
        w.push(
            &format!(
                "id IN (SELECT device_id FROM device_tags WHERE org_id = ? AND tag IN ({marks}) \
                 GROUP BY device_id HAVING COUNT(*) = ?)"
            ),
            args,
        );
    }
    w
}

/// Fills in the groups of `devices` (one query for all).
async fn with_groups(conn: &mut AnyConnection, mut devices: Vec<Device>) -> Result<Vec<Device>> {
    if devices.is_empty() {
        return Ok(devices);
    }
    let sql = format!(
        "SELECT device_id, group_id FROM device_group_members WHERE device_id IN {} ORDER BY group_id",
        placeholders(1, devices.len())
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    for d in &devices {
        q = q.bind(d.id.clone());
    }
    let rows = q.fetch_all(&mut *conn).await?;
    for row in rows {
        let device: String = row.try_get("device_id")?;
        let group: String = row.try_get("group_id")?;
        if let Some(d) = devices.iter_mut().find(|d| d.id == device) {
            d.group_ids.push(group);
        }
    }
    Ok(devices)
}

/// The organization's device `id` within a transaction, with its groups.
pub(crate) async fn device_in(conn: &mut AnyConnection, org_id: &str, id: &str) -> Result<Device> {
    let sql = format!("SELECT {DEVICE_COLUMNS} FROM devices WHERE org_id = $1 AND id = $2");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(org_id)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(StoreError::NotFound)?;
    let device = device_from_row(&row)?;
    Ok(with_groups(conn, vec![device]).await?.remove(0))
}

/// `NotFound` unless `group_id` is one of the organization's groups.
async fn group_in(conn: &mut AnyConnection, org_id: &str, group_id: &str) -> Result<()> {
    sqlx::query("SELECT 1 AS one FROM device_groups WHERE org_id = $1 AND id = $2")
        .bind(org_id)
        .bind(group_id)
        .fetch_optional(conn)
        .await?
        .map(|_| ())
        .ok_or(StoreError::NotFound)
}

/// Sets the device's groups and tags (rows of `device_group_members` and `device_tags`); a group
/// id that is not the organization's is `NotFound`.
async fn set_memberships(
    conn: &mut AnyConnection,
    org_id: &str,
    device_id: &str,
    group_ids: &[String],
    tags: &[String],
) -> Result<()> {
    sqlx::query("DELETE FROM device_group_members WHERE device_id = $1")
        .bind(device_id)
        .execute(&mut *conn)
        .await?;
    for g in group_ids {
        group_in(conn, org_id, g).await?;
        sqlx::query(
            "INSERT INTO device_group_members (org_id, device_id, group_id) VALUES ($1, $2, $3)",
        )
        .bind(org_id)
        .bind(device_id)
        .bind(g)
        .execute(&mut *conn)
        .await?;
    }
    sqlx::query("DELETE FROM device_tags WHERE device_id = $1")
        .bind(device_id)
        .execute(&mut *conn)
        .await?;
    for t in tags {
        sqlx::query("INSERT INTO device_tags (org_id, device_id, tag) VALUES ($1, $2, $3)")
            .bind(org_id)
            .bind(device_id)
            .bind(t)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

const SERIAL_TAKEN: &str = "a device with this serial number is already registered";

impl Store {
    /// Registers a device. With `token_id`, the token's use is counted in the same transaction
    /// and must still be allowed then (`Refused` with the reason otherwise).
    pub async fn register_device(
        &self,
        org_id: &str,
        new: &NewDevice,
        token_id: Option<&str>,
    ) -> std::result::Result<Device, RegisterError> {
        let now = Timestamp::now().millis();
        let id = new_id();
        let mut tx = self.begin_write().await?;
        if let Some(token) = token_id {
            let done = sqlx::query(
                "UPDATE enrollment_tokens SET uses = uses + 1 WHERE id = $1 AND revoked_at IS NULL \
                 AND (expires_at IS NULL OR expires_at > $2) AND (max_uses IS NULL OR uses < max_uses)",
            )
            .bind(token)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from)?;
            if done.rows_affected() == 0 {
                return Err(RegisterError::TokenUsedUp);
            }
        }
        sqlx::query(
            "INSERT INTO devices (id, org_id, name, serial_number, status, tags, metadata, asset_id, \
             mqtt_password_hash, enrollment_token_id, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, 'unknown', $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(&id)
        .bind(org_id)
        .bind(&new.name)
        .bind(&new.serial_number)
        .bind(serde_json::to_string(&new.tags).map_err(StoreError::from)?)
        .bind(new.metadata.to_string())
        .bind(new.asset_id.clone().unwrap_or_else(|| id.clone()))
        .bind(&new.mqtt_password_hash)
        .bind(token_id)
        .bind(now)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|e| conflict_on_unique(e, SERIAL_TAKEN))?;
        set_memberships(&mut tx, org_id, &id, &new.group_ids, &new.tags).await?;
        let device = device_in(&mut tx, org_id, &id).await?;
        tx.commit().await.map_err(StoreError::from)?;
        Ok(device)
    }

    pub async fn device(&self, org_id: &str, id: &str) -> Result<Device> {
        let device = self.org_row(&DEVICES, org_id, id, device_from_row).await?;
        let mut conn = self.pool().acquire().await?;
        Ok(with_groups(&mut conn, vec![device]).await?.remove(0))
    }

    /// A page of the organization's devices matching `filter`, oldest first, and how many match.
    pub async fn devices(
        &self,
        org_id: &str,
        filter: &DeviceFilter,
        (limit, offset): (i64, i64),
    ) -> Result<(Vec<Device>, u64)> {
        let w = device_where(org_id, filter);
        let count = format!("SELECT COUNT(*) AS n FROM devices{}", w.sql());
        let total: i64 = w
            .bind(sqlx::query(sqlx::AssertSqlSafe(count)))
            .fetch_one(self.pool())
            .await?
            .try_get("n")?;
        let sql = format!(
            "SELECT {DEVICE_COLUMNS} FROM devices{} ORDER BY created_at, id LIMIT {} OFFSET {}",
            w.sql(),
            w.next_placeholder(1),
            w.next_placeholder(2)
        );
        let rows = w
            .bind(sqlx::query(sqlx::AssertSqlSafe(sql)))
            .bind(limit)
            .bind(offset)
            .fetch_all(self.pool())
            .await?;
        let devices = rows.iter().map(device_from_row).collect::<Result<_>>()?;
        let mut conn = self.pool().acquire().await?;
        Ok((with_groups(&mut conn, devices).await?, total as u64))
    }

    /// The ids of every device of the organization `filter` selects, in id order (UUID v7:
    /// registration order).
    pub async fn device_ids(&self, org_id: &str, filter: &DeviceFilter) -> Result<Vec<String>> {
        let w = device_where(org_id, filter);
        let sql = format!("SELECT id FROM devices{} ORDER BY id", w.sql());
        let rows = w
            .bind(sqlx::query(sqlx::AssertSqlSafe(sql)))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// Changes a device's fields, groups and tags together.
    pub async fn update_device(&self, org_id: &str, id: &str, f: &DeviceFields) -> Result<Device> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "UPDATE devices SET name = $1, tags = $2, metadata = $3, asset_id = $4, updated_at = $5 \
             WHERE org_id = $6 AND id = $7",
        )
        .bind(&f.name)
        .bind(serde_json::to_string(&f.tags)?)
        .bind(f.metadata.to_string())
        .bind(&f.asset_id)
        .bind(Timestamp::now().millis())
        .bind(org_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        touched(done)?;
        set_memberships(&mut tx, org_id, id, &f.group_ids, &f.tags).await?;
        let device = device_in(&mut tx, org_id, id).await?;
        tx.commit().await?;
        Ok(device)
    }

    /// Deletes a device with its commands and history; its credentials stop working at once.
    pub async fn delete_device(&self, org_id: &str, id: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        delete_in(&mut tx, &DEVICES, org_id, id).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The device an MQTT login names (its id is the username), in any organization.
    pub async fn device_login(&self, id: &str) -> Result<DeviceLogin> {
        self.login_where("id", id).await
    }

    /// The device whose password hashes to `hash`, in any organization (a device presenting
    /// its password as a bearer token: an OTA download).
    pub async fn device_by_password_hash(&self, hash: &str) -> Result<DeviceLogin> {
        self.login_where("mqtt_password_hash", hash).await
    }

    /// The login facts of the device whose `column` (a constant of this file) is `value`.
    async fn login_where(&self, column: &'static str, value: &str) -> Result<DeviceLogin> {
        let sql = format!(
            "SELECT id, org_id, asset_id, mqtt_password_hash FROM devices WHERE {column} = $1"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(value)
            .fetch_optional(self.pool())
            .await?
            .ok_or(StoreError::NotFound)?;
        Ok(DeviceLogin {
            id: row.try_get("id")?,
            org_id: row.try_get("org_id")?,
            asset_id: row.try_get("asset_id")?,
            mqtt_password_hash: row.try_get("mqtt_password_hash")?,
        })
    }

    /// Which of `ids` are registered devices (of any organization).
    pub async fn existing_devices(&self, ids: &[String]) -> Result<Vec<String>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT id FROM devices WHERE id IN {}",
            placeholders(1, ids.len())
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for id in ids {
            q = q.bind(id.clone());
        }
        let rows = q.fetch_all(self.pool()).await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// The member devices of those of `ids` that are device groups of the organization, as
    /// (group id, device id) pairs.
    pub async fn group_members(
        &self,
        org_id: &str,
        ids: &[String],
    ) -> Result<Vec<(String, String)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT group_id, device_id FROM device_group_members WHERE org_id = $1 AND group_id IN {}",
            placeholders(2, ids.len())
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(org_id);
        for id in ids {
            q = q.bind(id.clone());
        }
        let rows = q.fetch_all(self.pool()).await?;
        rows.iter()
            .map(|r| Ok((r.try_get("group_id")?, r.try_get("device_id")?)))
            .collect()
    }

    pub async fn create_group(
        &self,
        org_id: &str,
        name: &str,
        description: &str,
    ) -> Result<DeviceGroup> {
        let now = Timestamp::now().millis();
        let id = new_id();
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO device_groups (id, org_id, name, description, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&id)
        .bind(org_id)
        .bind(name)
        .bind(description)
        .bind(now)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|e| conflict_on_unique(e, "a group with this name exists"))?;
        tx.commit().await?;
        self.group(org_id, &id).await
    }

    pub async fn group(&self, org_id: &str, id: &str) -> Result<DeviceGroup> {
        self.org_row(&GROUPS, org_id, id, group_from_row).await
    }

    pub async fn groups(&self, org_id: &str, page: (i64, i64)) -> Result<(Vec<DeviceGroup>, u64)> {
        self.org_page(&GROUPS, org_id, page, group_from_row).await
    }

    pub async fn update_group(
        &self,
        org_id: &str,
        id: &str,
        name: &str,
        description: &str,
    ) -> Result<DeviceGroup> {
        let q = sqlx::query(
            "UPDATE device_groups SET name = $1, description = $2, updated_at = $3 WHERE org_id = $4 AND id = $5",
        )
        .bind(name)
        .bind(description)
        .bind(Timestamp::now().millis())
        .bind(org_id)
        .bind(id);
        let mut tx = self.begin_write().await?;
        let done = q
            .execute(&mut *tx)
            .await
            .map_err(|e| conflict_on_unique(e, "a group with this name exists"))?;
        touched(done)?;
        tx.commit().await?;
        self.group(org_id, id).await
    }

    /// Deletes a group; its devices stay, without it, and tokens for it enroll into no group.
    pub async fn delete_group(&self, org_id: &str, id: &str) -> Result<()> {
        let sql = "DELETE FROM device_groups WHERE org_id = $1 AND id = $2";
        self.write_one(sqlx::query(sql).bind(org_id).bind(id)).await
    }

    /// Creates an enrollment token; a group that is not the organization's is `NotFound`.
    pub async fn create_enrollment_token(
        &self,
        org_id: &str,
        t: &NewEnrollmentToken,
    ) -> Result<EnrollmentToken> {
        let id = new_id();
        let mut tx = self.begin_write().await?;
        if let Some(g) = &t.group_id {
            group_in(&mut tx, org_id, g).await?;
        }
        sqlx::query(
            "INSERT INTO enrollment_tokens (id, org_id, token_hash, prefix, group_id, tags, expires_at, max_uses, uses, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9)",
        )
        .bind(&id)
        .bind(org_id)
        .bind(&t.token_hash)
        .bind(&t.prefix)
        .bind(t.group_id.clone())
        .bind(serde_json::to_string(&t.tags)?)
        .bind(t.expires_at.map(Timestamp::millis))
        .bind(t.max_uses.map(|m| m as i64))
        .bind(Timestamp::now().millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.org_row(&TOKENS, org_id, &id, token_from_row).await
    }

    pub async fn enrollment_tokens(
        &self,
        org_id: &str,
        page: (i64, i64),
    ) -> Result<(Vec<EnrollmentToken>, u64)> {
        self.org_page(&TOKENS, org_id, page, token_from_row).await
    }

    /// Revokes a token (kept, listed as revoked); revoking it again changes nothing.
    pub async fn revoke_enrollment_token(&self, org_id: &str, id: &str) -> Result<EnrollmentToken> {
        let q = sqlx::query(
            "UPDATE enrollment_tokens SET revoked_at = COALESCE(revoked_at, $1) WHERE org_id = $2 AND id = $3",
        )
        .bind(Timestamp::now().millis())
        .bind(org_id)
        .bind(id);
        self.write_one(q).await?;
        self.org_row(&TOKENS, org_id, id, token_from_row).await
    }

    /// The token whose secret hashes to `hash`, with its organization.
    pub async fn enrollment_token_by_hash(&self, hash: &str) -> Result<(String, EnrollmentToken)> {
        let sql = format!(
            "SELECT {} FROM enrollment_tokens WHERE token_hash = $1",
            TOKENS.columns
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(hash)
            .fetch_optional(self.pool())
            .await?
            .ok_or(StoreError::NotFound)?;
        Ok((row.try_get("org_id")?, token_from_row(&row)?))
    }
}

/// Why a registration was not stored.
#[derive(Debug)]
pub enum RegisterError {
    /// The token was used up, revoked or expired between its check and the registration.
    TokenUsedUp,
    Store(StoreError),
}

impl From<StoreError> for RegisterError {
    fn from(e: StoreError) -> Self {
        RegisterError::Store(e)
    }
}
