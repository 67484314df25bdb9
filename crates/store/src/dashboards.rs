//! Dashboards: a row per dashboard, its layout kept as the JSON the API validated (the
//! console and the API read it whole; nothing queries inside it).

use plantd_model::dashboard::Layout;
use plantd_model::{Timestamp, new_id};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::rows::OrgTable;
use crate::{Result, Store};

/// Dashboards, by name.
const DASHBOARDS: OrgTable = OrgTable {
    name: "dashboards",
    columns: "*",
    order: "name, id",
};

#[derive(Clone, Debug, PartialEq)]
pub struct Dashboard {
    pub id: String,
    pub org_id: String,
    pub name: String,
    pub description: String,
    pub layout: Layout,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

fn dashboard_from_row(row: &AnyRow) -> Result<Dashboard> {
    let layout: String = row.try_get("layout")?;
    Ok(Dashboard {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        layout: serde_json::from_str(&layout)?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

impl Store {
    pub async fn create_dashboard(
        &self,
        org_id: &str,
        name: &str,
        description: &str,
        layout: &Layout,
    ) -> Result<Dashboard> {
        let now = Timestamp::now();
        let d = Dashboard {
            id: new_id(),
            org_id: org_id.to_string(),
            name: name.to_string(),
            description: description.to_string(),
            layout: layout.clone(),
            created_at: now,
            updated_at: now,
        };
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO dashboards (id, org_id, name, description, layout, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&d.id)
        .bind(&d.org_id)
        .bind(&d.name)
        .bind(&d.description)
        .bind(serde_json::to_string(&d.layout)?)
        .bind(now.millis())
        .bind(now.millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(d)
    }

    pub async fn dashboard(&self, org_id: &str, id: &str) -> Result<Dashboard> {
        self.org_row(&DASHBOARDS, org_id, id, dashboard_from_row)
            .await
    }

    /// A page of an organization's dashboards by name, and how many there are.
    pub async fn dashboards(
        &self,
        org_id: &str,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<Dashboard>, u64)> {
        self.org_page(&DASHBOARDS, org_id, (limit, offset), dashboard_from_row)
            .await
    }

    pub async fn update_dashboard(
        &self,
        org_id: &str,
        id: &str,
        name: &str,
        description: &str,
        layout: &Layout,
    ) -> Result<Dashboard> {
        let update = sqlx::query(
            "UPDATE dashboards SET name = $1, description = $2, layout = $3, updated_at = $4 \
             WHERE org_id = $5 AND id = $6",
        )
        .bind(name)
        .bind(description)
        .bind(serde_json::to_string(layout)?)
        .bind(Timestamp::now().millis());
        self.write_one(update.bind(org_id).bind(id)).await?;
        self.dashboard(org_id, id).await
    }

    pub async fn delete_dashboard(&self, org_id: &str, id: &str) -> Result<()> {
        self.delete_org_row(&DASHBOARDS, org_id, id).await
    }

    /// The names of an organization's dashboards (for `plantd up`: create each once).
    pub async fn dashboard_names(&self, org_id: &str) -> Result<Vec<String>> {
        let rows = sqlx::query("SELECT name FROM dashboards WHERE org_id = $1")
            .bind(org_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|r| Ok(r.try_get::<String, _>("name")?))
            .collect()
    }
}
