//! OAuth 2.0: applications (client secrets as SHA-256), authorization codes, grants (the family
//! of tokens one authorization or client-credentials issue produced), rotating refresh tokens,
//! revoked access tokens, and the RS256 signing keys. Single use is an atomic
//! `UPDATE ... WHERE used_at IS NULL` (codes) or `rotated_at IS NULL` (refresh tokens).

use plantd_model::identity::{ApplicationType, OAuthApplication};
use plantd_model::page::{Page, Paged};
use plantd_model::{Scope, Timestamp, new_id, scope};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::rows::OrgTable;
use crate::rows::touched;
use crate::{Result, Store, StoreError};

/// OAuth applications (with their secret's hash, for client authentication), oldest first.
const APPLICATIONS: OrgTable = OrgTable {
    name: "oauth_applications",
    columns: APP_COLUMNS,
    order: "created_at, id",
};

pub struct NewApplication<'a> {
    pub org_id: &'a str,
    pub name: &'a str,
    pub application_type: ApplicationType,
    pub redirect_uris: &'a [String],
    pub scopes: &'a [Scope],
    pub client_id: &'a str,
    pub secret_hash: Option<&'a str>,
    pub created_by: Option<&'a str>,
}

/// An application with what authenticating it needs.
#[derive(Clone, Debug)]
pub struct ClientRecord {
    pub app: OAuthApplication,
    pub secret_hash: Option<String>,
}

pub struct NewCode<'a> {
    pub code_hash: &'a str,
    pub client_id: &'a str,
    pub org_id: &'a str,
    pub user_id: &'a str,
    pub redirect_uri: &'a str,
    pub scope: &'a str,
    pub code_challenge: Option<&'a str>,
    pub expires_at: Timestamp,
}

/// An authorization code as stored.
#[derive(Clone, Debug)]
pub struct CodeRecord {
    pub client_id: String,
    pub org_id: String,
    pub user_id: String,
    pub redirect_uri: String,
    pub scope: String,
    pub code_challenge: Option<String>,
    pub expires_at: Timestamp,
    pub used_at: Option<Timestamp>,
    /// The grant the code's exchange created.
    pub grant_id: Option<String>,
}

/// A grant: whom tokens act for, with what scope, and whether it was revoked.
#[derive(Clone, Debug)]
pub struct GrantRecord {
    pub id: String,
    pub client_id: String,
    pub org_id: String,
    pub user_id: Option<String>,
    pub scope: String,
    pub revoked_at: Option<Timestamp>,
}

/// The outcome of presenting a refresh token.
#[derive(Debug)]
pub enum RefreshUse {
    /// It was current; it is now rotated and its grant is returned.
    Rotated(GrantRecord),
    /// It had been rotated already (a replay): its grant is now revoked.
    Replayed { grant_id: String },
    /// Unknown or expired.
    Invalid,
}

fn app_from_row(row: &AnyRow) -> Result<ClientRecord> {
    let kind: String = row.try_get("application_type")?;
    let uris: String = row.try_get("redirect_uris")?;
    let scopes: String = row.try_get("scopes")?;
    Ok(ClientRecord {
        app: OAuthApplication {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            client_id: row.try_get("client_id")?,
            application_type: kind.parse().map_err(StoreError::Corrupt)?,
            redirect_uris: serde_json::from_str(&uris)?,
            scopes: scope::parse_list(&scopes).map_err(StoreError::Corrupt)?,
            organization_id: row.try_get("org_id")?,
            created_at: Timestamp::from_millis(row.try_get("created_at")?),
            updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
        },
        secret_hash: row.try_get("secret_hash")?,
    })
}

fn grant_from_row(row: &AnyRow) -> Result<GrantRecord> {
    Ok(GrantRecord {
        id: row.try_get("id")?,
        client_id: row.try_get("client_id")?,
        org_id: row.try_get("org_id")?,
        user_id: row.try_get("user_id")?,
        scope: row.try_get("scope")?,
        revoked_at: row
            .try_get::<Option<i64>, _>("revoked_at")?
            .map(Timestamp::from_millis),
    })
}

const APP_COLUMNS: &str = "id, org_id, client_id, secret_hash, name, application_type, redirect_uris, scopes, created_at, updated_at";

impl Store {
    pub async fn create_application(&self, new: NewApplication<'_>) -> Result<OAuthApplication> {
        let _gate = self.write_guard().await;
        let now = Timestamp::now();
        let id = new_id();
        sqlx::query(
            "INSERT INTO oauth_applications (id, org_id, client_id, secret_hash, name, application_type, redirect_uris, scopes, created_by, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(&id)
        .bind(new.org_id)
        .bind(new.client_id)
        .bind(new.secret_hash.map(str::to_string))
        .bind(new.name)
        .bind(new.application_type.as_str())
        .bind(serde_json::to_string(new.redirect_uris)?)
        .bind(scope::join_list(new.scopes))
        .bind(new.created_by.map(str::to_string))
        .bind(now.millis())
        .bind(now.millis())
        .execute(self.pool())
        .await?;
        Ok(self.application(new.org_id, &id).await?.app)
    }

    pub async fn application(&self, org_id: &str, id: &str) -> Result<ClientRecord> {
        self.org_row(&APPLICATIONS, org_id, id, app_from_row).await
    }

    /// The application with a client id, in any organization (the OAuth endpoints).
    pub async fn client(&self, client_id: &str) -> Result<Option<ClientRecord>> {
        let sql = format!("SELECT {APP_COLUMNS} FROM oauth_applications WHERE client_id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(client_id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(app_from_row).transpose()
    }

    pub async fn applications(&self, org_id: &str, page: Page) -> Result<Paged<OAuthApplication>> {
        let (items, total) = self
            .org_page(&APPLICATIONS, org_id, (page.limit(), page.offset()), |r| {
                app_from_row(r).map(|c| c.app)
            })
            .await?;
        Ok(Paged { items, total })
    }

    pub async fn update_application(
        &self,
        org_id: &str,
        id: &str,
        name: &str,
        redirect_uris: &[String],
        scopes: &[Scope],
    ) -> Result<OAuthApplication> {
        {
            let _gate = self.write_guard().await;
            touched(sqlx::query(
                "UPDATE oauth_applications SET name = $1, redirect_uris = $2, scopes = $3, updated_at = $4 \
                 WHERE org_id = $5 AND id = $6",
            )
            .bind(name)
            .bind(serde_json::to_string(redirect_uris)?)
            .bind(scope::join_list(scopes))
            .bind(Timestamp::now().millis())
            .bind(org_id)
            .bind(id)
            .execute(self.pool())
            .await?)?;
        }
        Ok(self.application(org_id, id).await?.app)
    }

    /// Replaces an application's client secret; the application as stored now.
    pub async fn set_client_secret(
        &self,
        org_id: &str,
        id: &str,
        secret_hash: &str,
    ) -> Result<OAuthApplication> {
        {
            let _gate = self.write_guard().await;
            touched(sqlx::query(
            "UPDATE oauth_applications SET secret_hash = $1, updated_at = $2 WHERE org_id = $3 AND id = $4",
        )
        .bind(secret_hash)
        .bind(Timestamp::now().millis())
        .bind(org_id)
        .bind(id)
        .execute(self.pool())
        .await?)?;
        }
        Ok(self.application(org_id, id).await?.app)
    }

    /// Deletes an application with its codes, grants and refresh tokens.
    pub async fn delete_application(&self, org_id: &str, id: &str) -> Result<String> {
        let mut tx = self.begin_write().await?;
        let row =
            sqlx::query("SELECT client_id FROM oauth_applications WHERE org_id = $1 AND id = $2")
                .bind(org_id)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StoreError::NotFound)?;
        let client_id: String = row.try_get("client_id")?;
        for sql in [
            "DELETE FROM oauth_refresh_tokens WHERE grant_id IN (SELECT id FROM oauth_grants WHERE client_id = $1)",
            "DELETE FROM oauth_grants WHERE client_id = $1",
            "DELETE FROM oauth_codes WHERE client_id = $1",
            "DELETE FROM oauth_applications WHERE client_id = $1",
        ] {
            sqlx::query(sql).bind(&client_id).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(client_id)
    }

    pub async fn create_code(&self, new: NewCode<'_>) -> Result<()> {
        let _gate = self.write_guard().await;
        sqlx::query(
            "INSERT INTO oauth_codes (code_hash, client_id, org_id, user_id, redirect_uri, scope, code_challenge, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(new.code_hash)
        .bind(new.client_id)
        .bind(new.org_id)
        .bind(new.user_id)
        .bind(new.redirect_uri)
        .bind(new.scope)
        .bind(new.code_challenge.map(str::to_string))
        .bind(Timestamp::now().millis())
        .bind(new.expires_at.millis())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Marks a code used and returns it as it was before (`used_at` tells whether it had been
    /// used already: then nothing changed).
    pub async fn use_code(&self, code_hash: &str, now: Timestamp) -> Result<Option<CodeRecord>> {
        let mut tx = self.begin_write().await?;
        let Some(row) = sqlx::query("SELECT * FROM oauth_codes WHERE code_hash = $1")
            .bind(code_hash)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(None);
        };
        let ts = |c: &str| -> Result<Option<Timestamp>> {
            Ok(row
                .try_get::<Option<i64>, _>(c)?
                .map(Timestamp::from_millis))
        };
        let mut code = CodeRecord {
            client_id: row.try_get("client_id")?,
            org_id: row.try_get("org_id")?,
            user_id: row.try_get("user_id")?,
            redirect_uri: row.try_get("redirect_uri")?,
            scope: row.try_get("scope")?,
            code_challenge: row.try_get("code_challenge")?,
            expires_at: Timestamp::from_millis(row.try_get("expires_at")?),
            used_at: ts("used_at")?,
            grant_id: row.try_get("grant_id")?,
        };
        if code.used_at.is_none() {
            let done = sqlx::query(
                "UPDATE oauth_codes SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL",
            )
            .bind(now.millis())
            .bind(code_hash)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                // Another exchange won the race: this one is a second use.
                code.used_at = Some(now);
            }
        }
        tx.commit().await?;
        Ok(Some(code))
    }

    /// Records which grant a code's exchange created (so a replay can revoke it).
    pub async fn set_code_grant(&self, code_hash: &str, grant_id: &str) -> Result<()> {
        let _gate = self.write_guard().await;
        sqlx::query("UPDATE oauth_codes SET grant_id = $1 WHERE code_hash = $2")
            .bind(grant_id)
            .bind(code_hash)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    pub async fn create_grant(
        &self,
        client_id: &str,
        org_id: &str,
        user_id: Option<&str>,
        scope: &str,
    ) -> Result<GrantRecord> {
        let _gate = self.write_guard().await;
        let id = new_id();
        sqlx::query(
            "INSERT INTO oauth_grants (id, client_id, org_id, user_id, scope, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&id)
        .bind(client_id)
        .bind(org_id)
        .bind(user_id.map(str::to_string))
        .bind(scope)
        .bind(Timestamp::now().millis())
        .execute(self.pool())
        .await?;
        Ok(GrantRecord {
            id,
            client_id: client_id.to_string(),
            org_id: org_id.to_string(),
            user_id: user_id.map(str::to_string),
            scope: scope.to_string(),
            revoked_at: None,
        })
    }

    /// Revokes a grant: its access tokens stop working and its refresh tokens too.
    pub async fn revoke_grant(&self, id: &str) -> Result<()> {
        let _gate = self.write_guard().await;
        let now = Timestamp::now().millis();
        sqlx::query("UPDATE oauth_grants SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
            .bind(now)
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Revokes every grant of a user (a password change): their applications' access and
    /// refresh tokens stop working.
    pub async fn revoke_user_grants(&self, user_id: &str) -> Result<()> {
        let _gate = self.write_guard().await;
        sqlx::query(
            "UPDATE oauth_grants SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL",
        )
        .bind(Timestamp::now().millis())
        .bind(user_id)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    pub async fn create_refresh_token(
        &self,
        token_hash: &str,
        grant_id: &str,
        expires_at: Timestamp,
    ) -> Result<()> {
        let _gate = self.write_guard().await;
        sqlx::query(
            "INSERT INTO oauth_refresh_tokens (token_hash, grant_id, created_at, expires_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(token_hash)
        .bind(grant_id)
        .bind(Timestamp::now().millis())
        .bind(expires_at.millis())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Presents a refresh token: rotates it when current, revokes its family when replayed.
    pub async fn use_refresh_token(&self, token_hash: &str, now: Timestamp) -> Result<RefreshUse> {
        let mut tx = self.begin_write().await?;
        let Some(row) = sqlx::query(
            "SELECT r.grant_id, r.expires_at, r.rotated_at, g.revoked_at FROM oauth_refresh_tokens r \
             JOIN oauth_grants g ON g.id = r.grant_id WHERE r.token_hash = $1",
        )
        .bind(token_hash)
        .fetch_optional(&mut *tx)
        .await?
        else {
            return Ok(RefreshUse::Invalid);
        };
        let grant_id: String = row.try_get("grant_id")?;
        let expires_at: i64 = row.try_get("expires_at")?;
        let rotated = row.try_get::<Option<i64>, _>("rotated_at")?.is_some();
        let revoked = row.try_get::<Option<i64>, _>("revoked_at")?.is_some();
        if revoked || expires_at <= now.millis() {
            return Ok(RefreshUse::Invalid);
        }
        let done = sqlx::query(
            "UPDATE oauth_refresh_tokens SET rotated_at = $1 WHERE token_hash = $2 AND rotated_at IS NULL",
        )
        .bind(now.millis())
        .bind(token_hash)
        .execute(&mut *tx)
        .await?;
        if rotated || done.rows_affected() == 0 {
            sqlx::query(
                "UPDATE oauth_grants SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL",
            )
            .bind(now.millis())
            .bind(&grant_id)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            return Ok(RefreshUse::Replayed { grant_id });
        }
        let grant = sqlx::query("SELECT * FROM oauth_grants WHERE id = $1")
            .bind(&grant_id)
            .fetch_one(&mut *tx)
            .await?;
        let grant = grant_from_row(&grant)?;
        tx.commit().await?;
        Ok(RefreshUse::Rotated(grant))
    }

    /// The grant of a refresh token (for revocation and introspection), if it is current.
    pub async fn refresh_token_grant(
        &self,
        token_hash: &str,
        now: Timestamp,
    ) -> Result<Option<GrantRecord>> {
        let row = sqlx::query(
            "SELECT g.* FROM oauth_refresh_tokens r JOIN oauth_grants g ON g.id = r.grant_id \
             WHERE r.token_hash = $1 AND r.rotated_at IS NULL AND r.expires_at > $2",
        )
        .bind(token_hash)
        .bind(now.millis())
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(grant_from_row).transpose()
    }

    /// Revokes one access token by its `jti` until it would have expired anyway.
    pub async fn revoke_access_token(&self, jti: &str, expires_at: Timestamp) -> Result<()> {
        let _gate = self.write_guard().await;
        sqlx::query(
            "INSERT INTO oauth_revoked_tokens (jti, expires_at) VALUES ($1, $2) ON CONFLICT (jti) DO NOTHING",
        )
        .bind(jti)
        .bind(expires_at.millis())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Whether an access token still stands: its grant exists and is not revoked, its
    /// application exists, and the token itself was not revoked.
    pub async fn access_token_stands(&self, grant_id: &str, jti: &str) -> Result<bool> {
        let row = sqlx::query(
            "SELECT g.revoked_at, (SELECT COUNT(*) FROM oauth_revoked_tokens t WHERE t.jti = $2) AS revoked_tokens \
             FROM oauth_grants g JOIN oauth_applications a ON a.client_id = g.client_id WHERE g.id = $1",
        )
        .bind(grant_id)
        .bind(jti)
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(false) };
        let revoked_at: Option<i64> = row.try_get("revoked_at")?;
        let revoked_tokens: i64 = row.try_get("revoked_tokens")?;
        Ok(revoked_at.is_none() && revoked_tokens == 0)
    }

    /// Drops codes, refresh tokens and revoked-token entries that have expired.
    pub async fn delete_expired_oauth(&self, now: Timestamp) -> Result<()> {
        let _gate = self.write_guard().await;
        for sql in [
            "DELETE FROM oauth_codes WHERE expires_at <= $1",
            "DELETE FROM oauth_refresh_tokens WHERE expires_at <= $1",
            "DELETE FROM oauth_revoked_tokens WHERE expires_at <= $1",
        ] {
            sqlx::query(sql)
                .bind(now.millis())
                .execute(self.pool())
                .await?;
        }
        Ok(())
    }

    /// The signing keys not retired before `since`, newest first: (kid, private PEM, created).
    pub async fn signing_keys(&self, since: Timestamp) -> Result<Vec<(String, String, Timestamp)>> {
        let rows = sqlx::query(
            "SELECT kid, private_pem, created_at FROM signing_keys \
             WHERE retired_at IS NULL OR retired_at > $1 ORDER BY created_at DESC, kid DESC",
        )
        .bind(since.millis())
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("kid")?,
                    r.try_get("private_pem")?,
                    Timestamp::from_millis(r.try_get("created_at")?),
                ))
            })
            .collect()
    }

    /// Adds the first signing key unless one exists (another node may have won at start).
    pub async fn add_first_signing_key(&self, kid: &str, private_pem: &str) -> Result<()> {
        let _gate = self.write_guard().await;
        sqlx::query(
            "INSERT INTO signing_keys (kid, private_pem, created_at) \
             SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM signing_keys WHERE retired_at IS NULL)",
        )
        .bind(kid)
        .bind(private_pem)
        .bind(Timestamp::now().millis())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Adds a signing key, which becomes the one that signs; the others are retired now (they
    /// stay published until their last token expires).
    pub async fn add_signing_key(&self, kid: &str, private_pem: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let now = Timestamp::now().millis();
        sqlx::query("UPDATE signing_keys SET retired_at = $1 WHERE retired_at IS NULL")
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO signing_keys (kid, private_pem, created_at) VALUES ($1, $2, $3)")
            .bind(kid)
            .bind(private_pem)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
