//! Organizations, users and memberships.

use plantd_model::org::{Member, MemberStatus, Organization, Role, User};
use plantd_model::page::{Page, Paged};
use plantd_model::{Tier, Timestamp, new_id};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::rows::touched;
use crate::{Result, Store, StoreError, conflict_on_unique};

pub struct NewUser<'a> {
    pub email: &'a str,
    pub name: &'a str,
    /// Argon2id PHC string; `None` for an invited user who has not set a password yet.
    pub password_hash: Option<&'a str>,
}

fn org_from_row(row: &AnyRow) -> Result<Organization> {
    let tier: String = row.try_get("tier")?;
    Ok(Organization {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        tier: tier.parse().map_err(StoreError::Corrupt)?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

fn user_from_row(row: &AnyRow) -> Result<User> {
    Ok(User {
        id: row.try_get("id")?,
        email: row.try_get("email")?,
        name: row.try_get("name")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

fn member_from_row(row: &AnyRow) -> Result<Member> {
    let role: String = row.try_get("role")?;
    let status: String = row.try_get("status")?;
    Ok(Member {
        id: row.try_get("id")?,
        email: row.try_get("email")?,
        name: row.try_get("name")?,
        role: role.parse().map_err(StoreError::Corrupt)?,
        status: MemberStatus::parse(&status),
        joined_at: Timestamp::from_millis(row.try_get("joined_at")?),
    })
}

const MEMBER_COLUMNS: &str = "u.id, u.email, u.name, m.role, m.status, m.joined_at";

impl Store {
    pub async fn create_org(&self, name: &str, tier: Tier) -> Result<Organization> {
        let _gate = self.write_guard().await;
        let now = Timestamp::now();
        let org = Organization {
            id: new_id(),
            name: name.to_string(),
            tier,
            created_at: now,
            updated_at: now,
        };
        sqlx::query("INSERT INTO organizations (id, name, tier, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(&org.id)
            .bind(&org.name)
            .bind(tier.as_str())
            .bind(now.millis())
            .bind(now.millis())
            .execute(self.pool())
            .await?;
        Ok(org)
    }

    pub async fn org(&self, id: &str) -> Result<Organization> {
        let row = sqlx::query(
            "SELECT id, name, tier, created_at, updated_at FROM organizations WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(self.pool())
        .await?
        .ok_or(StoreError::NotFound)?;
        org_from_row(&row)
    }

    /// The oldest organization: what operator commands act on without `--org`.
    pub async fn first_org(&self) -> Result<Option<Organization>> {
        let row = sqlx::query("SELECT id, name, tier, created_at, updated_at FROM organizations ORDER BY created_at, id LIMIT 1")
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(org_from_row).transpose()
    }

    pub async fn update_org_name(&self, id: &str, name: &str) -> Result<Organization> {
        let _gate = self.write_guard().await;
        touched(
            sqlx::query("UPDATE organizations SET name = $1, updated_at = $2 WHERE id = $3")
                .bind(name)
                .bind(Timestamp::now().millis())
                .bind(id)
                .execute(self.pool())
                .await?,
        )?;
        self.org(id).await
    }

    pub async fn create_user(&self, new: NewUser<'_>) -> Result<User> {
        let _gate = self.write_guard().await;
        let now = Timestamp::now();
        let user = User {
            id: new_id(),
            email: new.email.trim().to_lowercase(),
            name: new.name.to_string(),
            created_at: now,
            updated_at: now,
        };
        sqlx::query(
            "INSERT INTO users (id, email, name, password_hash, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&user.id)
        .bind(&user.email)
        .bind(&user.name)
        .bind(new.password_hash.map(str::to_string))
        .bind(now.millis())
        .bind(now.millis())
        .execute(self.pool())
        .await
        .map_err(|e| conflict_on_unique(e, "a user with this email already exists"))?;
        Ok(user)
    }

    pub async fn user(&self, id: &str) -> Result<User> {
        let row = sqlx::query("SELECT * FROM users WHERE id = $1")
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .ok_or(StoreError::NotFound)?;
        user_from_row(&row)
    }

    pub async fn user_by_email(&self, email: &str) -> Result<Option<User>> {
        let row = sqlx::query("SELECT * FROM users WHERE email = $1")
            .bind(email.trim().to_lowercase())
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(user_from_row).transpose()
    }

    pub async fn password_hash(&self, user_id: &str) -> Result<Option<String>> {
        let row = sqlx::query("SELECT password_hash FROM users WHERE id = $1")
            .bind(user_id)
            .fetch_optional(self.pool())
            .await?
            .ok_or(StoreError::NotFound)?;
        Ok(row.try_get("password_hash")?)
    }

    /// Sets a user's password.
    pub async fn set_password(&self, user_id: &str, password_hash: &str) -> Result<()> {
        let _gate = self.write_guard().await;
        let done =
            sqlx::query("UPDATE users SET password_hash = $1, updated_at = $2 WHERE id = $3")
                .bind(password_hash)
                .bind(Timestamp::now().millis())
                .bind(user_id)
                .execute(self.pool())
                .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// Makes an invited member active (accepting an invitation); not found when the
    /// membership was withdrawn meanwhile.
    pub async fn activate_member(&self, org_id: &str, user_id: &str) -> Result<Member> {
        {
            let _gate = self.write_guard().await;
            touched(
                sqlx::query(
                    "UPDATE memberships SET status = 'active' WHERE org_id = $1 AND user_id = $2",
                )
                .bind(org_id)
                .bind(user_id)
                .execute(self.pool())
                .await?,
            )?;
        }
        self.member(org_id, user_id).await
    }

    pub async fn update_user_name(&self, user_id: &str, name: &str) -> Result<User> {
        let _gate = self.write_guard().await;
        touched(
            sqlx::query("UPDATE users SET name = $1, updated_at = $2 WHERE id = $3")
                .bind(name)
                .bind(Timestamp::now().millis())
                .bind(user_id)
                .execute(self.pool())
                .await?,
        )?;
        self.user(user_id).await
    }

    /// Adds `user_id` to `org_id`; a second membership of the same user is a conflict.
    pub async fn add_member(
        &self,
        org_id: &str,
        user_id: &str,
        role: Role,
        status: MemberStatus,
    ) -> Result<Member> {
        let _gate = self.write_guard().await;
        sqlx::query("INSERT INTO memberships (org_id, user_id, role, status, joined_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(org_id)
            .bind(user_id)
            .bind(role.as_str())
            .bind(status.as_str())
            .bind(Timestamp::now().millis())
            .execute(self.pool())
            .await
            .map_err(|e| conflict_on_unique(e, "this user is already a member of the organization"))?;
        self.member(org_id, user_id).await
    }

    pub async fn member(&self, org_id: &str, user_id: &str) -> Result<Member> {
        let sql = format!(
            "SELECT {MEMBER_COLUMNS} FROM memberships m JOIN users u ON u.id = m.user_id \
             WHERE m.org_id = $1 AND m.user_id = $2"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(org_id)
            .bind(user_id)
            .fetch_optional(self.pool())
            .await?
            .ok_or(StoreError::NotFound)?;
        member_from_row(&row)
    }

    pub async fn members(&self, org_id: &str, page: Page) -> Result<Paged<Member>> {
        let total: i64 = sqlx::query("SELECT COUNT(*) AS n FROM memberships WHERE org_id = $1")
            .bind(org_id)
            .fetch_one(self.pool())
            .await?
            .try_get("n")?;
        let sql = format!(
            "SELECT {MEMBER_COLUMNS} FROM memberships m JOIN users u ON u.id = m.user_id \
             WHERE m.org_id = $1 ORDER BY m.joined_at, u.id LIMIT $2 OFFSET $3"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(org_id)
            .bind(page.limit())
            .bind(page.offset())
            .fetch_all(self.pool())
            .await?;
        Ok(Paged {
            items: rows.iter().map(member_from_row).collect::<Result<_>>()?,
            total: total as u64,
        })
    }

    /// Removes a member. The last owner cannot be removed: an organization always has one.
    /// Removes a member and revokes the API keys they created in the organization (they acted
    /// for them); returns the ids of the keys revoked.
    pub async fn remove_member(&self, org_id: &str, user_id: &str) -> Result<Vec<String>> {
        let mut tx = self.begin_write().await?;
        let row = sqlx::query("SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2")
            .bind(org_id)
            .bind(user_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
        let role: String = row.try_get("role")?;
        if role == "owner" {
            let owners: i64 = sqlx::query(
                "SELECT COUNT(*) AS n FROM memberships WHERE org_id = $1 AND role = 'owner'",
            )
            .bind(org_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
            if owners <= 1 {
                return Err(StoreError::Conflict(
                    "the last owner of an organization cannot be removed".into(),
                ));
            }
        }
        sqlx::query("DELETE FROM memberships WHERE org_id = $1 AND user_id = $2")
            .bind(org_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        let keys: Vec<String> = sqlx::query(
            "SELECT id FROM api_keys WHERE org_id = $1 AND user_id = $2 AND revoked_at IS NULL",
        )
        .bind(org_id)
        .bind(user_id)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|r| r.try_get("id"))
        .collect::<std::result::Result<_, _>>()?;
        sqlx::query(
            "UPDATE api_keys SET revoked_at = $1 WHERE org_id = $2 AND user_id = $3 AND revoked_at IS NULL",
        )
        .bind(Timestamp::now().millis())
        .bind(org_id)
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(keys)
    }

    /// The organizations a user is an active member of, oldest membership first.
    pub async fn active_memberships(&self, user_id: &str) -> Result<Vec<(String, Role)>> {
        let rows = sqlx::query(
            "SELECT org_id, role FROM memberships WHERE user_id = $1 AND status = 'active' ORDER BY joined_at, org_id",
        )
        .bind(user_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                let role: String = r.try_get("role")?;
                Ok((
                    r.try_get("org_id")?,
                    role.parse().map_err(StoreError::Corrupt)?,
                ))
            })
            .collect()
    }

    /// The oldest owner of an organization, the user operator-created keys act for.
    pub async fn first_owner(&self, org_id: &str) -> Result<Option<String>> {
        let row = sqlx::query(
            "SELECT user_id FROM memberships WHERE org_id = $1 AND role = 'owner' ORDER BY joined_at, user_id LIMIT 1",
        )
        .bind(org_id)
        .fetch_optional(self.pool())
        .await?;
        Ok(row.map(|r| r.try_get("user_id")).transpose()?)
    }

    pub async fn org_count(&self) -> Result<i64> {
        Ok(sqlx::query("SELECT COUNT(*) AS n FROM organizations")
            .fetch_one(self.pool())
            .await?
            .try_get("n")?)
    }
}
