//! Products, licenses, their activations and each organization's license signing key. A
//! license's activation count is counted from its activations, never stored beside them; a
//! change of a license and its webhook deliveries commit together (`webhooks::queue_deliveries`).

use plantd_model::event::EventType;
use plantd_model::license::{Activation, License, LicenseStatus, LicenseType, Product};
use plantd_model::{Timestamp, new_id};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::rows::touched;
use crate::rows::{OrgTable, delete_in};
use crate::webhooks::queue_deliveries;
use crate::{Arg, Result, Store, StoreError, Where, conflict_on_unique};

/// Products, by name.
const PRODUCTS: OrgTable = OrgTable {
    name: "products",
    columns: "*",
    order: "name, id",
};

/// What a product is made of (create, and the whole of an update).
#[derive(Clone, Debug)]
pub struct ProductFields {
    pub name: String,
    pub sku: String,
    pub description: String,
    pub price: f64,
    pub license_type: LicenseType,
    pub features: Vec<String>,
}

/// A license to insert: its id and key are made by the caller, which signs the key.
#[derive(Clone, Debug)]
pub struct NewLicense {
    pub id: String,
    pub product_id: String,
    pub license_key: String,
    pub license_type: LicenseType,
    pub max_activations: i64,
    pub validity_days: Option<i64>,
    pub features: Vec<String>,
    pub customer_email: String,
    pub expires_at: Option<Timestamp>,
}

/// Filters of the license list; `status` is the status clients see (expiry included).
#[derive(Clone, Debug, Default)]
pub struct LicenseFilter {
    pub product_id: Option<String>,
    pub status: Option<LicenseStatus>,
    pub customer_email: Option<String>,
}

/// What an activation came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Activated {
    New(Activation),
    /// The device was already activated with this fingerprint.
    Existing(Activation),
    /// The device is activated with another fingerprint.
    FingerprintMismatch,
    /// Every slot is taken.
    Full,
    /// The license is expired, suspended or revoked (its status is the license's).
    NotInForce,
}

const LICENSE_COLUMNS: &str = "l.*, (SELECT COUNT(*) FROM license_activations a WHERE a.license_id = l.id) AS current_activations";

fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::Corrupt(format!("{what} {value}"))
}

fn license_type(row: &AnyRow) -> Result<LicenseType> {
    let t: String = row.try_get("license_type")?;
    LicenseType::parse(&t).ok_or_else(|| corrupt("license type", &t))
}

fn product_from_row(row: &AnyRow) -> Result<Product> {
    let features: String = row.try_get("features")?;
    Ok(Product {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        name: row.try_get("name")?,
        sku: row.try_get("sku")?,
        description: row.try_get("description")?,
        price: row.try_get("price")?,
        license_type: license_type(row)?,
        features: serde_json::from_str(&features)?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

/// A license row (with `current_activations`) as seen at `now`.
fn license_from_row(row: &AnyRow, now: Timestamp) -> Result<License> {
    let status: String = row.try_get("status")?;
    let features: String = row.try_get("features")?;
    let expires_at = row
        .try_get::<Option<i64>, _>("expires_at")?
        .map(Timestamp::from_millis);
    Ok(License {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        license_key: row.try_get("license_key")?,
        product_id: row.try_get("product_id")?,
        license_type: license_type(row)?,
        status: LicenseStatus::parse(&status)
            .ok_or_else(|| corrupt("license status", &status))?
            .effective(expires_at, now),
        max_activations: row.try_get("max_activations")?,
        current_activations: row.try_get("current_activations")?,
        validity_days: row.try_get("validity_days")?,
        features: serde_json::from_str(&features)?,
        customer_email: row.try_get("customer_email")?,
        expires_at,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

fn activation_from_row(row: &AnyRow) -> Result<Activation> {
    Ok(Activation {
        id: row.try_get("id")?,
        license_id: row.try_get("license_id")?,
        device_id: row.try_get("device_id")?,
        hardware_fingerprint: row.try_get("hardware_fingerprint")?,
        activated_at: Timestamp::from_millis(row.try_get("activated_at")?),
    })
}

/// The activation of `device_id` on a license, if any.
async fn activation_of_device(
    conn: &mut sqlx::AnyConnection,
    license_id: &str,
    device_id: &str,
) -> Result<Option<Activation>> {
    let row =
        sqlx::query("SELECT * FROM license_activations WHERE license_id = $1 AND device_id = $2")
            .bind(license_id)
            .bind(device_id)
            .fetch_optional(conn)
            .await?;
    row.as_ref().map(activation_from_row).transpose()
}

async fn license_in(
    conn: &mut sqlx::AnyConnection,
    org_id: &str,
    id: &str,
    now: Timestamp,
) -> Result<License> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {LICENSE_COLUMNS} FROM licenses l WHERE l.org_id = $1 AND l.id = $2"
    )))
    .bind(org_id)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(StoreError::NotFound)?;
    license_from_row(&row, now)
}

/// Reads the license after its change and queues `event` for the webhooks subscribed to it,
/// in the changing transaction.
async fn announce(
    conn: &mut sqlx::AnyConnection,
    org_id: &str,
    id: &str,
    event: EventType,
    activation: Option<&Activation>,
) -> Result<License> {
    let now = Timestamp::now();
    let license = license_in(&mut *conn, org_id, id, now).await?;
    let data = serde_json::to_value(&license)?;
    let activation = activation.map(serde_json::to_value).transpose()?;
    queue_deliveries(conn, org_id, event, |delivery| {
        let mut body =
            serde_json::json!({"id": delivery, "event": event, "created_at": now, "data": data});
        if let Some(a) = &activation {
            body["activation"] = a.clone();
        }
        body.to_string()
    })
    .await?;
    Ok(license)
}

impl Store {
    pub async fn create_product(&self, org_id: &str, p: &ProductFields) -> Result<Product> {
        let now = Timestamp::now().millis();
        let id = new_id();
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO products (id, org_id, name, sku, description, price, license_type, features, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&id)
        .bind(org_id)
        .bind(&p.name)
        .bind(&p.sku)
        .bind(&p.description)
        .bind(p.price)
        .bind(p.license_type.as_str())
        .bind(serde_json::to_string(&p.features)?)
        .bind(now)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|e| conflict_on_unique(e, &sku_taken(&p.sku)))?;
        tx.commit().await?;
        self.product(org_id, &id).await
    }

    pub async fn product(&self, org_id: &str, id: &str) -> Result<Product> {
        self.org_row(&PRODUCTS, org_id, id, product_from_row).await
    }

    /// A page of an organization's products by name, and how many there are.
    pub async fn products(
        &self,
        org_id: &str,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<Product>, u64)> {
        self.org_page(&PRODUCTS, org_id, (limit, offset), product_from_row)
            .await
    }

    pub async fn update_product(
        &self,
        org_id: &str,
        id: &str,
        p: &ProductFields,
    ) -> Result<Product> {
        let mut tx = self.begin_write().await?;
        touched(sqlx::query(
            "UPDATE products SET name = $1, sku = $2, description = $3, price = $4, license_type = $5, \
             features = $6, updated_at = $7 WHERE org_id = $8 AND id = $9",
        )
        .bind(&p.name)
        .bind(&p.sku)
        .bind(&p.description)
        .bind(p.price)
        .bind(p.license_type.as_str())
        .bind(serde_json::to_string(&p.features)?)
        .bind(Timestamp::now().millis())
        .bind(org_id)
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(|e| conflict_on_unique(e, &sku_taken(&p.sku)))?)?;
        tx.commit().await?;
        self.product(org_id, id).await
    }

    /// Deletes a product that no license was issued for; one with licenses is a conflict
    /// (they keep naming it).
    pub async fn delete_product(&self, org_id: &str, id: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let licenses: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM licenses WHERE org_id = $1 AND product_id = $2")
                .bind(org_id)
                .bind(id)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
        if licenses > 0 {
            return Err(StoreError::Conflict(format!(
                "the product has {licenses} license(s); a product that licenses were issued for is kept with them"
            )));
        }
        delete_in(&mut tx, &PRODUCTS, org_id, id).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The organization's license signing key (hex seed, hex public key), if it has one.
    pub async fn license_signing_key(&self, org_id: &str) -> Result<Option<(String, String)>> {
        let row =
            sqlx::query("SELECT seed, public_key FROM license_signing_keys WHERE org_id = $1")
                .bind(org_id)
                .fetch_optional(self.pool())
                .await?;
        row.map(|r| Ok((r.try_get("seed")?, r.try_get("public_key")?)))
            .transpose()
    }

    /// Stores the organization's first signing key; if another request stored one first, that
    /// one stays and is returned.
    pub async fn add_license_signing_key(
        &self,
        org_id: &str,
        seed: &str,
        public_key: &str,
    ) -> Result<(String, String)> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO license_signing_keys (org_id, seed, public_key, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (org_id) DO NOTHING",
        )
        .bind(org_id)
        .bind(seed)
        .bind(public_key)
        .bind(Timestamp::now().millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.license_signing_key(org_id)
            .await?
            .ok_or(StoreError::NotFound)
    }

    pub async fn create_license(&self, org_id: &str, l: &NewLicense) -> Result<License> {
        let now = Timestamp::now().millis();
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO licenses (id, org_id, product_id, license_key, license_type, status, max_activations, \
             validity_days, features, customer_email, expires_at, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, 'active', $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&l.id)
        .bind(org_id)
        .bind(&l.product_id)
        .bind(&l.license_key)
        .bind(l.license_type.as_str())
        .bind(l.max_activations)
        .bind(l.validity_days)
        .bind(serde_json::to_string(&l.features)?)
        .bind(&l.customer_email)
        .bind(l.expires_at.map(Timestamp::millis))
        .bind(now)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let license = announce(&mut tx, org_id, &l.id, EventType::LicenseCreated, None).await?;
        tx.commit().await?;
        Ok(license)
    }

    pub async fn license(&self, org_id: &str, id: &str) -> Result<License> {
        let mut conn = self.pool().acquire().await?;
        license_in(&mut conn, org_id, id, Timestamp::now()).await
    }

    /// A license of any organization by id, with its organization's public key (hex): what a
    /// device's key names, before its signature is checked.
    pub async fn license_for_key(&self, id: &str) -> Result<Option<(License, String)>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {LICENSE_COLUMNS}, k.public_key AS signing_public_key FROM licenses l \
             JOIN license_signing_keys k ON k.org_id = l.org_id WHERE l.id = $1"
        )))
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| {
            Ok((
                license_from_row(&r, Timestamp::now())?,
                r.try_get("signing_public_key")?,
            ))
        })
        .transpose()
    }

    /// A page of an organization's licenses, newest first, and how many match.
    pub async fn licenses(
        &self,
        org_id: &str,
        f: &LicenseFilter,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<License>, u64)> {
        let now = Timestamp::now();
        let mut w = Where::new();
        w.push("l.org_id = ?", [Arg::Text(org_id.into())]);
        if let Some(p) = &f.product_id {
            w.push("l.product_id = ?", [Arg::Text(p.clone())]);
        }
        if let Some(e) = &f.customer_email {
            w.push("LOWER(l.customer_email) = ?", [Arg::Text(e.to_lowercase())]);
        }
        let at = Arg::Int(now.millis());
        match f.status {
            None => {}
            Some(LicenseStatus::Active) => w.push(
                "l.status = 'active' AND (l.expires_at IS NULL OR l.expires_at > ?)",
                [at],
            ),
            Some(LicenseStatus::Expired) => {
                w.push("l.status = 'active' AND l.expires_at <= ?", [at])
            }
            Some(s) => w.push("l.status = ?", [Arg::Text(s.as_str().into())]),
        }
        let total: i64 = w
            .bind(sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT COUNT(*) AS n FROM licenses l{}",
                w.sql()
            ))))
            .fetch_one(self.pool())
            .await?
            .try_get("n")?;
        let rows = w
            .bind(sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {LICENSE_COLUMNS} FROM licenses l{} ORDER BY l.created_at DESC, l.id DESC LIMIT {} OFFSET {}",
                w.sql(),
                w.next_placeholder(1),
                w.next_placeholder(2)
            ))))
            .bind(limit)
            .bind(offset)
            .fetch_all(self.pool())
            .await?;
        let licenses = rows
            .iter()
            .map(|r| license_from_row(r, now))
            .collect::<Result<_>>()?;
        Ok((licenses, total as u64))
    }

    /// Moves a license from one of the stored states `from` to `to` and announces `event`;
    /// `Conflict` naming its status when it is in none of them.
    pub async fn set_license_status(
        &self,
        org_id: &str,
        id: &str,
        from: &[LicenseStatus],
        to: LicenseStatus,
        event: EventType,
    ) -> Result<License> {
        let mut tx = self.begin_write().await?;
        let mut w = Where::new();
        w.push("org_id = ?", [Arg::Text(org_id.into())]);
        w.push("id = ?", [Arg::Text(id.into())]);
        let states = from
            .iter()
            .map(|s| format!("'{}'", s.as_str()))
            .collect::<Vec<_>>();
        w.push(&format!("status IN ({})", states.join(", ")), []);
        let done = w
            .bind(sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE licenses SET status = '{}', updated_at = {}{}",
                to.as_str(),
                Timestamp::now().millis(),
                w.sql()
            ))))
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            // Missing (NotFound), or in another state.
            let current = license_in(&mut tx, org_id, id, Timestamp::now()).await?;
            return Err(StoreError::Conflict(format!(
                "the license is {}",
                current.status.as_str()
            )));
        }
        let license = announce(&mut tx, org_id, id, event, None).await?;
        tx.commit().await?;
        Ok(license)
    }

    /// Sets a renewed license's expiry and re-signed key, if its expiry is still `was` (else
    /// `Conflict`: renewed concurrently).
    pub async fn renew_license(
        &self,
        org_id: &str,
        id: &str,
        was: Timestamp,
        expires_at: Timestamp,
        license_key: &str,
    ) -> Result<License> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "UPDATE licenses SET expires_at = $1, license_key = $2, updated_at = $3 \
             WHERE org_id = $4 AND id = $5 AND expires_at = $6 AND status <> 'revoked'",
        )
        .bind(expires_at.millis())
        .bind(license_key)
        .bind(Timestamp::now().millis())
        .bind(org_id)
        .bind(id)
        .bind(was.millis())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Conflict(
                "the license changed meanwhile; read it and renew again".into(),
            ));
        }
        let license = announce(&mut tx, org_id, id, EventType::LicenseRenewed, None).await?;
        tx.commit().await?;
        Ok(license)
    }

    /// Activates `device_id` on a license: the license row is locked first, so that concurrent
    /// activations are counted one after another and never take more than `max_activations`.
    pub async fn activate_license(
        &self,
        org_id: &str,
        id: &str,
        device_id: &str,
        fingerprint: &str,
    ) -> Result<(Activated, License)> {
        let mut tx = self.begin_write().await?;
        let now = Timestamp::now();
        // The lock (SQLite's writer is already alone; PostgreSQL takes the row lock).
        sqlx::query("UPDATE licenses SET updated_at = updated_at WHERE org_id = $1 AND id = $2")
            .bind(org_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let license = license_in(&mut tx, org_id, id, now).await?;
        // Read under the lock: a suspension committed a moment ago counts.
        if license.status != LicenseStatus::Active {
            return Ok((Activated::NotInForce, license));
        }
        if let Some(activation) = activation_of_device(&mut tx, id, device_id).await? {
            let outcome = if activation.hardware_fingerprint == fingerprint {
                Activated::Existing(activation)
            } else {
                Activated::FingerprintMismatch
            };
            return Ok((outcome, license));
        }
        if license.current_activations >= license.max_activations {
            return Ok((Activated::Full, license));
        }
        let activation = Activation {
            id: new_id(),
            license_id: id.to_string(),
            device_id: device_id.to_string(),
            hardware_fingerprint: fingerprint.to_string(),
            activated_at: now,
        };
        sqlx::query(
            "INSERT INTO license_activations (id, org_id, license_id, device_id, hardware_fingerprint, activated_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&activation.id)
        .bind(org_id)
        .bind(id)
        .bind(device_id)
        .bind(fingerprint)
        .bind(now.millis())
        .execute(&mut *tx)
        .await?;
        let license = announce(
            &mut tx,
            org_id,
            id,
            EventType::LicenseActivated,
            Some(&activation),
        )
        .await?;
        tx.commit().await?;
        Ok((Activated::New(activation), license))
    }

    /// The activation of `device_id` on a license, if any.
    pub async fn device_activation(
        &self,
        license_id: &str,
        device_id: &str,
    ) -> Result<Option<Activation>> {
        let mut conn = self.pool().acquire().await?;
        activation_of_device(&mut conn, license_id, device_id).await
    }

    /// A license's activations, oldest first.
    pub async fn license_activations(&self, org_id: &str, id: &str) -> Result<Vec<Activation>> {
        let rows = sqlx::query(
            "SELECT * FROM license_activations WHERE org_id = $1 AND license_id = $2 ORDER BY activated_at, id",
        )
        .bind(org_id)
        .bind(id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(activation_from_row).collect()
    }

    /// Frees an activation's slot.
    pub async fn deactivate_license(
        &self,
        org_id: &str,
        id: &str,
        activation_id: &str,
    ) -> Result<License> {
        let mut tx = self.begin_write().await?;
        let row = sqlx::query(
            "SELECT * FROM license_activations WHERE org_id = $1 AND license_id = $2 AND id = $3",
        )
        .bind(org_id)
        .bind(id)
        .bind(activation_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StoreError::NotFound)?;
        let activation = activation_from_row(&row)?;
        sqlx::query("DELETE FROM license_activations WHERE id = $1")
            .bind(activation_id)
            .execute(&mut *tx)
            .await?;
        let license = announce(
            &mut tx,
            org_id,
            id,
            EventType::LicenseDeactivated,
            Some(&activation),
        )
        .await?;
        tx.commit().await?;
        Ok(license)
    }
}

fn sku_taken(sku: &str) -> String {
    format!("a product with sku '{sku}' already exists")
}
