//! API keys (hash only) and their per-day, per-endpoint usage counters.

use plantd_model::api_key::{ApiKey, ApiKeyUsageRow};
use plantd_model::org::Role;
use plantd_model::page::{Page, Paged};
use plantd_model::{Scope, Timestamp, new_id, scope};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::rows::OrgTable;
use crate::{Result, Store, StoreError};

/// API keys (without their hash), oldest first.
const KEYS: OrgTable = OrgTable {
    name: "api_keys",
    columns: KEY_COLUMNS,
    order: "created_at, id",
};

pub struct NewApiKey<'a> {
    pub org_id: &'a str,
    pub user_id: Option<&'a str>,
    pub name: &'a str,
    pub scopes: &'a [Scope],
    pub expires_at: Option<Timestamp>,
    pub prefix: &'a str,
    pub key_hash: &'a str,
}

fn key_from_row(row: &AnyRow) -> Result<ApiKey> {
    let scopes: String = row.try_get("scopes")?;
    let ts = |col: &str| -> Result<Option<Timestamp>> {
        Ok(row
            .try_get::<Option<i64>, _>(col)?
            .map(Timestamp::from_millis))
    };
    Ok(ApiKey {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        user_id: row.try_get("user_id")?,
        name: row.try_get("name")?,
        prefix: row.try_get("prefix")?,
        scopes: scope::parse_list(&scopes).map_err(StoreError::Corrupt)?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        expires_at: ts("expires_at")?,
        last_used_at: ts("last_used_at")?,
        revoked_at: ts("revoked_at")?,
    })
}

const KEY_COLUMNS: &str =
    "id, org_id, user_id, name, prefix, scopes, created_at, expires_at, last_used_at, revoked_at";

impl Store {
    pub async fn create_api_key(&self, new: NewApiKey<'_>) -> Result<ApiKey> {
        let _gate = self.write_guard().await;
        let key = ApiKey {
            id: new_id(),
            org_id: new.org_id.to_string(),
            user_id: new.user_id.map(str::to_string),
            name: new.name.to_string(),
            prefix: new.prefix.to_string(),
            scopes: new.scopes.to_vec(),
            created_at: Timestamp::now(),
            expires_at: new.expires_at,
            last_used_at: None,
            revoked_at: None,
        };
        sqlx::query(
            "INSERT INTO api_keys (id, org_id, user_id, name, prefix, key_hash, scopes, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&key.id)
        .bind(&key.org_id)
        .bind(key.user_id.clone())
        .bind(&key.name)
        .bind(&key.prefix)
        .bind(new.key_hash)
        .bind(scope::join_list(&key.scopes))
        .bind(key.created_at.millis())
        .bind(key.expires_at.map(Timestamp::millis))
        .execute(self.pool())
        .await?;
        Ok(key)
    }

    /// The key whose secret hashes to `key_hash`, whatever its state.
    pub async fn api_key_by_hash(&self, key_hash: &str) -> Result<Option<ApiKey>> {
        Ok(self.key_holder(key_hash).await?.map(|(k, _)| k))
    }

    /// The key whose secret hashes to `key_hash` and, for a key created by a person, that
    /// person's role in the key's organization while they are an active member (`None` once
    /// they are not: the key then acts for nobody).
    pub async fn key_holder(&self, key_hash: &str) -> Result<Option<(ApiKey, Option<Role>)>> {
        let columns = KEY_COLUMNS
            .split(", ")
            .map(|c| format!("k.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT {columns}, m.role AS member_role FROM api_keys k \
             LEFT JOIN memberships m ON m.org_id = k.org_id AND m.user_id = k.user_id \
             AND m.status = 'active' WHERE k.key_hash = $1"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(key_hash)
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let role = match row.try_get::<Option<String>, _>("member_role")? {
            Some(r) => Some(
                r.parse::<Role>()
                    .map_err(|_| StoreError::Corrupt(r.clone()))?,
            ),
            None => None,
        };
        Ok(Some((key_from_row(&row)?, role)))
    }

    pub async fn api_key(&self, org_id: &str, id: &str) -> Result<ApiKey> {
        self.org_row(&KEYS, org_id, id, key_from_row).await
    }

    pub async fn api_keys(&self, org_id: &str, page: Page) -> Result<Paged<ApiKey>> {
        let (items, total) = self
            .org_page(&KEYS, org_id, (page.limit(), page.offset()), key_from_row)
            .await?;
        Ok(Paged { items, total })
    }

    /// Revokes a key (idempotent: a revoked key keeps its first revocation time).
    pub async fn revoke_api_key(&self, org_id: &str, id: &str) -> Result<ApiKey> {
        let _gate = self.write_guard().await;
        sqlx::query("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE org_id = $2 AND id = $3")
            .bind(Timestamp::now().millis())
            .bind(org_id)
            .bind(id)
            .execute(self.pool())
            .await?;
        self.api_key(org_id, id).await
    }

    /// Replaces a key's secret: the old one stops working at once. Revoked keys cannot rotate.
    pub async fn rotate_api_key(
        &self,
        org_id: &str,
        id: &str,
        prefix: &str,
        key_hash: &str,
    ) -> Result<ApiKey> {
        let _gate = self.write_guard().await;
        let done = sqlx::query(
            "UPDATE api_keys SET prefix = $1, key_hash = $2 WHERE org_id = $3 AND id = $4 AND revoked_at IS NULL",
        )
        .bind(prefix)
        .bind(key_hash)
        .bind(org_id)
        .bind(id)
        .execute(self.pool())
        .await?;
        let key = self.api_key(org_id, id).await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Conflict(
                "a revoked key cannot be rotated".into(),
            ));
        }
        Ok(key)
    }

    /// Adds request counts (`(key_id, org_id, day, endpoint, requests)`) and marks keys used.
    pub async fn record_key_usage(
        &self,
        rows: &[(String, String, String, String, u64)],
        last_used: &[(String, Timestamp)],
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        for (key_id, org_id, day, endpoint, n) in rows {
            sqlx::query(
                "INSERT INTO api_key_usage (key_id, org_id, day, endpoint, requests) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (key_id, day, endpoint) DO UPDATE SET requests = api_key_usage.requests + excluded.requests",
            )
            .bind(key_id)
            .bind(org_id)
            .bind(day)
            .bind(endpoint)
            .bind(*n as i64)
            .execute(&mut *tx)
            .await?;
        }
        for (key_id, at) in last_used {
            sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $1)")
                .bind(at.millis())
                .bind(key_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Usage of one key, newest day first, then by endpoint.
    pub async fn api_key_usage(
        &self,
        org_id: &str,
        key_id: &str,
        page: Page,
    ) -> Result<Paged<ApiKeyUsageRow>> {
        let total: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM api_key_usage WHERE org_id = $1 AND key_id = $2",
        )
        .bind(org_id)
        .bind(key_id)
        .fetch_one(self.pool())
        .await?
        .try_get("n")?;
        let rows = sqlx::query(
            "SELECT day, endpoint, requests FROM api_key_usage WHERE org_id = $1 AND key_id = $2 \
             ORDER BY day DESC, endpoint LIMIT $3 OFFSET $4",
        )
        .bind(org_id)
        .bind(key_id)
        .bind(page.limit())
        .bind(page.offset())
        .fetch_all(self.pool())
        .await?;
        let items = rows
            .iter()
            .map(|r| {
                Ok(ApiKeyUsageRow {
                    day: r.try_get("day")?,
                    endpoint: r.try_get("endpoint")?,
                    requests: r.try_get::<i64, _>("requests")? as u64,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Paged {
            items,
            total: total as u64,
        })
    }

    /// Requests an organization made on a UTC day (`YYYY-MM-DD`); with `key_id`, those of that
    /// key only.
    pub async fn requests_on(&self, org_id: &str, key_id: Option<&str>, day: &str) -> Result<u64> {
        let sql = if key_id.is_some() {
            "SELECT CAST(SUM(requests) AS BIGINT) AS n FROM api_key_usage WHERE org_id = $1 AND day = $2 AND key_id = $3"
        } else {
            "SELECT CAST(SUM(requests) AS BIGINT) AS n FROM api_key_usage WHERE org_id = $1 AND day = $2"
        };
        let mut q = sqlx::query(sql).bind(org_id).bind(day);
        if let Some(k) = key_id {
            q = q.bind(k);
        }
        let n: Option<i64> = q.fetch_one(self.pool()).await?.try_get("n")?;
        Ok(n.unwrap_or(0) as u64)
    }
}
