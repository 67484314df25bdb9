//! Login sessions and single-use account tokens (invitations, password resets). Tokens are
//! kept as their SHA-256 only; using one is an atomic `UPDATE ... WHERE used_at IS NULL`, so a
//! token works once even when two requests race on PostgreSQL.

use plantd_model::identity::SessionRecord;
use plantd_model::org::Role;
use plantd_model::{Tier, Timestamp, new_id};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::rows::touched;
use crate::{Result, Store, StoreError};

pub struct NewSession<'a> {
    pub token_hash: &'a str,
    pub user_id: &'a str,
    pub org_id: &'a str,
    pub expires_at: Timestamp,
    pub client_ip: Option<&'a str>,
    pub user_agent: Option<&'a str>,
}

/// What kind of account token: an invitation to an organization or a password reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccountTokenKind {
    Invitation,
    PasswordReset,
}

impl AccountTokenKind {
    fn as_str(self) -> &'static str {
        match self {
            AccountTokenKind::Invitation => "invitation",
            AccountTokenKind::PasswordReset => "password_reset",
        }
    }
}

pub struct NewAccountToken<'a> {
    pub token_hash: &'a str,
    pub kind: AccountTokenKind,
    pub email: &'a str,
    pub user_id: Option<&'a str>,
    pub org_id: Option<&'a str>,
    pub role: Option<Role>,
    pub created_by: Option<&'a str>,
    pub expires_at: Timestamp,
}

/// An account token that was just used (it cannot be used again).
#[derive(Clone, Debug)]
pub struct UsedAccountToken {
    pub email: String,
    pub user_id: Option<String>,
    pub org_id: Option<String>,
    pub role: Option<Role>,
}

fn session_from_row(row: &AnyRow) -> Result<SessionRecord> {
    Ok(SessionRecord {
        id: row.try_get("id")?,
        user_id: row.try_get("user_id")?,
        org_id: row.try_get("org_id")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        last_seen_at: Timestamp::from_millis(row.try_get("last_seen_at")?),
        expires_at: Timestamp::from_millis(row.try_get("expires_at")?),
        client_ip: row.try_get("client_ip")?,
        user_agent: row.try_get("user_agent")?,
    })
}

fn token_from_row(row: &AnyRow) -> Result<UsedAccountToken> {
    let role: Option<String> = row.try_get("role")?;
    Ok(UsedAccountToken {
        email: row.try_get("email")?,
        user_id: row.try_get("user_id")?,
        org_id: row.try_get("org_id")?,
        role: role
            .map(|r| r.parse())
            .transpose()
            .map_err(StoreError::Corrupt)?,
    })
}

const SESSION_COLUMNS: &str =
    "id, user_id, org_id, created_at, last_seen_at, expires_at, client_ip, user_agent";

impl Store {
    pub async fn create_session(&self, new: NewSession<'_>) -> Result<SessionRecord> {
        let _gate = self.write_guard().await;
        let now = Timestamp::now();
        let id = new_id();
        sqlx::query(
            "INSERT INTO sessions (id, token_hash, user_id, org_id, created_at, last_seen_at, expires_at, client_ip, user_agent) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&id)
        .bind(new.token_hash)
        .bind(new.user_id)
        .bind(new.org_id)
        .bind(now.millis())
        .bind(now.millis())
        .bind(new.expires_at.millis())
        .bind(new.client_ip.map(str::to_string))
        .bind(new.user_agent.map(str::to_string))
        .execute(self.pool())
        .await?;
        Ok(SessionRecord {
            id,
            user_id: new.user_id.to_string(),
            org_id: new.org_id.to_string(),
            created_at: now,
            last_seen_at: now,
            expires_at: new.expires_at,
            client_ip: new.client_ip.map(str::to_string),
            user_agent: new.user_agent.map(str::to_string),
        })
    }

    /// A session with its member's current role and its organization's tier, in one read; a
    /// session whose user has left the organization is not found.
    pub async fn session_principal(
        &self,
        token_hash: &str,
    ) -> Result<Option<(SessionRecord, Role, Tier)>> {
        let row = sqlx::query(
            "SELECT s.id, s.user_id, s.org_id, s.created_at, s.last_seen_at, s.expires_at, s.client_ip, s.user_agent, m.role, o.tier \
             FROM sessions s JOIN memberships m ON m.org_id = s.org_id AND m.user_id = s.user_id \
             JOIN organizations o ON o.id = s.org_id WHERE s.token_hash = $1",
        )
        .bind(token_hash)
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let role: String = row.try_get("role")?;
        let tier: String = row.try_get("tier")?;
        Ok(Some((
            session_from_row(&row)?,
            role.parse().map_err(StoreError::Corrupt)?,
            tier.parse().map_err(StoreError::Corrupt)?,
        )))
    }

    /// Marks a session used now (its idle expiry moves on).
    pub async fn touch_session(&self, id: &str, now: Timestamp) -> Result<()> {
        let _gate = self.write_guard().await;
        sqlx::query("UPDATE sessions SET last_seen_at = $1 WHERE id = $2")
            .bind(now.millis())
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// A user's sessions (all organizations), newest first.
    pub async fn user_sessions(&self, user_id: &str) -> Result<Vec<SessionRecord>> {
        let sql = format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE user_id = $1 ORDER BY created_at DESC, id DESC"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(user_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(session_from_row).collect()
    }

    /// Ends one of a user's sessions; another user's session is not found.
    pub async fn delete_session(&self, user_id: &str, id: &str) -> Result<()> {
        let _gate = self.write_guard().await;
        touched(
            sqlx::query("DELETE FROM sessions WHERE id = $1 AND user_id = $2")
                .bind(id)
                .bind(user_id)
                .execute(self.pool())
                .await?,
        )?;
        Ok(())
    }

    /// Ends every session of a user but `keep` (after a password change or reset).
    pub async fn delete_user_sessions(&self, user_id: &str, keep: Option<&str>) -> Result<u64> {
        let _gate = self.write_guard().await;
        let done = sqlx::query("DELETE FROM sessions WHERE user_id = $1 AND id <> $2")
            .bind(user_id)
            .bind(keep.unwrap_or_default())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }

    /// Drops sessions and account tokens that ended before `now`.
    pub async fn delete_expired_identity(&self, now: Timestamp, idle_ms: i64) -> Result<()> {
        let _gate = self.write_guard().await;
        sqlx::query("DELETE FROM sessions WHERE expires_at <= $1 OR last_seen_at <= $2")
            .bind(now.millis())
            .bind(now.millis() - idle_ms)
            .execute(self.pool())
            .await?;
        sqlx::query("DELETE FROM account_tokens WHERE expires_at <= $1")
            .bind(now.millis())
            .execute(self.pool())
            .await?;
        Ok(())
    }

    pub async fn create_account_token(&self, new: NewAccountToken<'_>) -> Result<()> {
        let _gate = self.write_guard().await;
        sqlx::query(
            "INSERT INTO account_tokens (token_hash, kind, email, user_id, org_id, role, created_by, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(new.token_hash)
        .bind(new.kind.as_str())
        .bind(new.email)
        .bind(new.user_id.map(str::to_string))
        .bind(new.org_id.map(str::to_string))
        .bind(new.role.map(|r| r.as_str().to_string()))
        .bind(new.created_by.map(str::to_string))
        .bind(Timestamp::now().millis())
        .bind(new.expires_at.millis())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Uses an unexpired, unused token of `kind` once; `None` when there is no such token.
    pub async fn use_account_token(
        &self,
        kind: AccountTokenKind,
        token_hash: &str,
        now: Timestamp,
    ) -> Result<Option<UsedAccountToken>> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "UPDATE account_tokens SET used_at = $1 \
             WHERE token_hash = $2 AND kind = $3 AND used_at IS NULL AND expires_at > $4",
        )
        .bind(now.millis())
        .bind(token_hash)
        .bind(kind.as_str())
        .bind(now.millis())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        let row = sqlx::query(
            "SELECT email, user_id, org_id, role FROM account_tokens WHERE token_hash = $1",
        )
        .bind(token_hash)
        .fetch_one(&mut *tx)
        .await?;
        let used = token_from_row(&row)?;
        tx.commit().await?;
        Ok(Some(used))
    }

    /// An unexpired, unused token of `kind`, without using it.
    pub async fn peek_account_token(
        &self,
        kind: AccountTokenKind,
        token_hash: &str,
        now: Timestamp,
    ) -> Result<Option<UsedAccountToken>> {
        let row = sqlx::query(
            "SELECT email, user_id, org_id, role FROM account_tokens \
             WHERE token_hash = $1 AND kind = $2 AND used_at IS NULL AND expires_at > $3",
        )
        .bind(token_hash)
        .bind(kind.as_str())
        .bind(now.millis())
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(token_from_row).transpose()
    }

    /// Voids the unused tokens of `kind` for an email (a new reset link replaces older ones).
    pub async fn void_account_tokens(&self, kind: AccountTokenKind, email: &str) -> Result<()> {
        let _gate = self.write_guard().await;
        sqlx::query(
            "UPDATE account_tokens SET used_at = $1 WHERE email = $2 AND kind = $3 AND used_at IS NULL",
        )
        .bind(Timestamp::now().millis())
        .bind(email)
        .bind(kind.as_str())
        .execute(self.pool())
        .await?;
        Ok(())
    }
}
