//! Replicated records between regions (issue 33): the outbox the triggers of migration 0023 fill
//! in the transaction of every change, a record's snapshot as published, changes from other
//! regions applied idempotently with last-writer-wins versions, and each organization's primary
//! region.

use plantd_model::region::ReplicatedKind;
use serde_json::{Map, Value};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::{Result, Store, StoreError};

/// A column of a replicated table.
#[derive(Clone, Copy)]
enum Col {
    Text(&'static str),
    Int(&'static str),
}

impl Col {
    fn name(self) -> &'static str {
        match self {
            Col::Text(n) | Col::Int(n) => n,
        }
    }
}

/// The table, key columns and replicated columns of a kind. `api_keys.last_used_at` is not
/// replicated: using a key in one region is not a change of its metadata.
fn shape(kind: ReplicatedKind) -> (&'static str, &'static [&'static str], &'static [Col]) {
    use Col::{Int, Text};
    match kind {
        ReplicatedKind::Organization => (
            "organizations",
            &["id"],
            &[
                Text("id"),
                Text("name"),
                Text("tier"),
                Int("created_at"),
                Int("updated_at"),
                Text("primary_region"),
                Int("data_residency_enabled"),
            ],
        ),
        ReplicatedKind::User => (
            "users",
            &["id"],
            &[
                Text("id"),
                Text("email"),
                Text("name"),
                Text("password_hash"),
                Int("created_at"),
                Int("updated_at"),
            ],
        ),
        ReplicatedKind::Membership => (
            "memberships",
            &["org_id", "user_id"],
            &[
                Text("org_id"),
                Text("user_id"),
                Text("role"),
                Text("status"),
                Int("joined_at"),
            ],
        ),
        ReplicatedKind::ApiKey => (
            "api_keys",
            &["id"],
            &[
                Text("id"),
                Text("org_id"),
                Text("user_id"),
                Text("name"),
                Text("prefix"),
                Text("key_hash"),
                Text("scopes"),
                Int("created_at"),
                Int("expires_at"),
                Int("revoked_at"),
            ],
        ),
    }
}

/// A record's key as the outbox holds it: its id, or `org_id/user_id` for a membership.
fn key_parts(kind: ReplicatedKind, key: &str) -> Result<Vec<String>> {
    let (_, keys, _) = shape(kind);
    let parts: Vec<String> = if keys.len() == 1 {
        vec![key.to_string()]
    } else {
        key.splitn(2, '/').map(str::to_string).collect()
    };
    if parts.len() != keys.len() {
        return Err(StoreError::Corrupt(format!(
            "replicated {} key '{key}'",
            kind.as_str()
        )));
    }
    Ok(parts)
}

/// One queued change: the outbox's sequence, the kind and the record's key.
#[derive(Clone, Debug)]
pub struct OutboxEntry {
    pub seq: i64,
    pub kind: ReplicatedKind,
    pub key: String,
}

/// A change as published: the record's state (`None`: deleted), its version and the region
/// that published it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Change {
    pub kind: String,
    pub key: String,
    /// Publication time in ms (strictly increasing per publisher).
    pub version: i64,
    pub region: String,
    /// The record's columns, or `None` when it was deleted.
    pub record: Option<Map<String, Value>>,
}

fn where_keys(keys: &[&str], first: usize) -> String {
    keys.iter()
        .enumerate()
        .map(|(i, k)| format!("{k} = ${}", i + first))
        .collect::<Vec<_>>()
        .join(" AND ")
}

fn read_record(row: &AnyRow, cols: &[Col]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    for c in cols {
        let v = match c {
            Col::Text(n) => row
                .try_get::<Option<String>, _>(*n)?
                .map_or(Value::Null, Value::String),
            Col::Int(n) => row
                .try_get::<Option<i64>, _>(*n)?
                .map_or(Value::Null, Value::from),
        };
        out.insert(c.name().to_string(), v);
    }
    Ok(out)
}

/// Records `c`'s version as the one this database holds of its record.
async fn hold_version(tx: &mut crate::WriteTx, c: &Change) -> Result<()> {
    sqlx::query(
        "INSERT INTO replication_versions (kind, record_key, version, region) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (kind, record_key) DO UPDATE SET version = excluded.version, region = excluded.region",
    )
    .bind(&c.kind)
    .bind(&c.key)
    .bind(c.version)
    .bind(&c.region)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

impl Store {
    /// Turns the outbox on (a deployment with NATS) or off. Turning it on queues every record
    /// this database holds, so regions that join later, or missed changes made while it was
    /// off, receive them; turning it off empties it.
    pub async fn set_replication_publish(&self, on: bool) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let (was,): (i64,) = sqlx::query_as("SELECT publish FROM replication_config WHERE id = 1")
            .fetch_one(&mut *tx)
            .await?;
        if on && was == 0 {
            for (kind, sql) in [
                (
                    "organization",
                    "SELECT id AS k FROM organizations ORDER BY created_at, id",
                ),
                ("user", "SELECT id AS k FROM users ORDER BY created_at, id"),
                (
                    "membership",
                    "SELECT org_id || '/' || user_id AS k FROM memberships ORDER BY joined_at",
                ),
                (
                    "api_key",
                    "SELECT id AS k FROM api_keys ORDER BY created_at, id",
                ),
            ] {
                let keys: Vec<(String,)> = sqlx::query_as(sql).fetch_all(&mut *tx).await?;
                for (k,) in keys {
                    sqlx::query(
                        "INSERT INTO replication_outbox (kind, record_key) VALUES ($1, $2)",
                    )
                    .bind(kind)
                    .bind(k)
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        if !on {
            sqlx::query("DELETE FROM replication_outbox")
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query("UPDATE replication_config SET publish = $1 WHERE id = 1")
            .bind(i64::from(on))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Gives the organizations created before regions existed (or by a version without them)
    /// this instance's region as their primary region.
    pub async fn claim_unplaced_orgs(&self, region: &str) -> Result<u64> {
        let _gate = self.write_guard().await;
        let done = sqlx::query(
            "UPDATE organizations SET primary_region = $1 WHERE primary_region IS NULL",
        )
        .bind(region)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// An organization's primary region (`None` before it has one) and strict residency.
    pub async fn org_region(&self, org_id: &str) -> Result<(Option<String>, bool)> {
        let row = sqlx::query(
            "SELECT primary_region, data_residency_enabled FROM organizations WHERE id = $1",
        )
        .bind(org_id)
        .fetch_optional(self.pool())
        .await?
        .ok_or(StoreError::NotFound)?;
        Ok((
            row.try_get("primary_region")?,
            row.try_get::<i64, _>("data_residency_enabled")? != 0,
        ))
    }

    /// The oldest queued changes, at most `limit`.
    pub async fn replication_outbox(&self, limit: i64) -> Result<Vec<OutboxEntry>> {
        let rows: Vec<(i64, String, String)> = sqlx::query_as(
            "SELECT seq, kind, record_key FROM replication_outbox ORDER BY seq LIMIT $1",
        )
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.into_iter()
            .map(|(seq, kind, key)| {
                let kind = ReplicatedKind::parse(&kind)
                    .ok_or_else(|| StoreError::Corrupt(format!("replicated kind '{kind}'")))?;
                Ok(OutboxEntry { seq, kind, key })
            })
            .collect()
    }

    /// The record's replicated columns as they are now (`None`: it no longer exists).
    pub async fn replicated_record(
        &self,
        kind: ReplicatedKind,
        key: &str,
    ) -> Result<Option<Map<String, Value>>> {
        let (table, keys, cols) = shape(kind);
        let names: Vec<&str> = cols.iter().map(|c| c.name()).collect();
        let sql = format!(
            "SELECT {} FROM {table} WHERE {}",
            names.join(", "),
            where_keys(keys, 1)
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for p in key_parts(kind, key)? {
            q = q.bind(p);
        }
        let row = q.fetch_optional(self.pool()).await?;
        row.map(|r| read_record(&r, cols)).transpose()
    }

    /// Records that the changes up to `seq` were published with their versions, and removes
    /// them from the outbox, in one transaction.
    pub async fn replication_published(&self, seq: i64, published: &[Change]) -> Result<()> {
        let mut tx = self.begin_write().await?;
        for c in published {
            hold_version(&mut tx, c).await?;
        }
        sqlx::query("DELETE FROM replication_outbox WHERE seq <= $1")
            .bind(seq)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Applies changes that came from other regions, in one transaction: each is written
    /// unless this database holds a newer version of the record (or a local change of it is
    /// still queued, which will be published with a newer version). Nothing applied here is
    /// queued again. A change that cannot be written (a unique email taken by another user, a
    /// membership whose user is missing) fails the whole call; apply such a batch one change at
    /// a time to find it.
    pub async fn apply_replicated(&self, changes: &[Change]) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query("INSERT INTO replication_applying (id) VALUES (1)")
            .execute(&mut *tx)
            .await?;
        for c in changes {
            let kind = ReplicatedKind::parse(&c.kind)
                .ok_or_else(|| StoreError::Corrupt(format!("replicated kind '{}'", c.kind)))?;
            let held: Option<(i64, String)> = sqlx::query_as(
                "SELECT version, region FROM replication_versions WHERE kind = $1 AND record_key = $2",
            )
            .bind(&c.kind)
            .bind(&c.key)
            .fetch_optional(&mut *tx)
            .await?;
            let (queued,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM replication_outbox WHERE kind = $1 AND record_key = $2",
            )
            .bind(&c.kind)
            .bind(&c.key)
            .fetch_one(&mut *tx)
            .await?;
            let newer = held
                .as_ref()
                .is_none_or(|(v, r)| (c.version, c.region.as_str()) > (*v, r.as_str()));
            if !newer || queued > 0 {
                continue;
            }
            let (table, keys, cols) = shape(kind);
            match &c.record {
                None => {
                    let sql = format!("DELETE FROM {table} WHERE {}", where_keys(keys, 1));
                    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                    for p in key_parts(kind, &c.key)? {
                        q = q.bind(p);
                    }
                    q.execute(&mut *tx).await?;
                }
                Some(record) => {
                    let names: Vec<&str> = cols.iter().map(|c| c.name()).collect();
                    let params: Vec<String> = (1..=cols.len()).map(|i| format!("${i}")).collect();
                    let updates: Vec<String> = names
                        .iter()
                        .filter(|n| !keys.contains(n))
                        .map(|n| format!("{n} = excluded.{n}"))
                        .collect();
                    let sql = format!(
                        "INSERT INTO {table} ({}) VALUES ({}) ON CONFLICT ({}) DO UPDATE SET {}",
                        names.join(", "),
                        params.join(", "),
                        keys.join(", "),
                        updates.join(", ")
                    );
                    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                    for col in cols {
                        let v = record.get(col.name()).unwrap_or(&Value::Null);
                        q = match col {
                            Col::Text(_) => q.bind(v.as_str().map(str::to_string)),
                            Col::Int(_) => q.bind(v.as_i64()),
                        };
                    }
                    q.execute(&mut *tx).await?;
                }
            }
            hold_version(&mut tx, c).await?;
        }
        sqlx::query("DELETE FROM replication_applying")
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
