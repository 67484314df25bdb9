//! What the tags of an organization's assets measure: unit, description and engineering
//! range, read from the device or set by a person (`tag_metadata`).

use plantd_model::Timestamp;
use plantd_model::tag::{EuRange, TagDescription, TagSource};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::{Result, Store, StoreError};

/// A stored description: the tag, what it measures, who said so and when.
pub type StoredTag = (String, TagDescription, TagSource, Timestamp);

fn from_row(row: &AnyRow) -> Result<StoredTag> {
    let source: String = row.try_get("source")?;
    let low: Option<f64> = row.try_get("eu_low")?;
    let high: Option<f64> = row.try_get("eu_high")?;
    Ok((
        row.try_get("tag_name")?,
        TagDescription {
            unit: row.try_get("unit")?,
            description: row.try_get("description")?,
            eu_range: low.zip(high).map(|(low, high)| EuRange { low, high }),
        },
        TagSource::parse(&source).ok_or(StoreError::Corrupt(source))?,
        Timestamp::from_millis(row.try_get("updated_at")?),
    ))
}

/// The range's bounds as SQL: bound numbers, or literal NULLs (sqlx's `Any` driver cannot bind
/// an absent double on PostgreSQL, `docs/STYLE.md`).
fn range_sql(range: Option<EuRange>, first: usize) -> String {
    match range {
        Some(_) => format!("${first}, ${}", first + 1),
        None => "NULL, NULL".into(),
    }
}

impl Store {
    /// The stored descriptions of an asset's tags, by tag name.
    pub async fn tag_descriptions(&self, org_id: &str, asset_id: &str) -> Result<Vec<StoredTag>> {
        let rows = sqlx::query(
            "SELECT * FROM tag_metadata WHERE org_id = $1 AND asset_id = $2 ORDER BY tag_name",
        )
        .bind(org_id)
        .bind(asset_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// Every stored description of an organization (at most `limit`), by asset and tag: what an
    /// edge agent tells its cloud.
    pub async fn org_tag_descriptions(
        &self,
        org_id: &str,
        limit: i64,
    ) -> Result<Vec<(String, StoredTag)>> {
        let rows = sqlx::query(
            "SELECT * FROM tag_metadata WHERE org_id = $1 ORDER BY asset_id, tag_name LIMIT $2",
        )
        .bind(org_id)
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("asset_id")?, from_row(r)?)))
            .collect()
    }

    /// How many tags of an organization are described and when one last changed (ms): what
    /// tells an edge agent that its cloud should hear them again.
    pub async fn tag_descriptions_mark(&self, org_id: &str) -> Result<(i64, i64)> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n, COALESCE(MAX(updated_at), 0) AS at FROM tag_metadata WHERE org_id = $1",
        )
        .bind(org_id)
        .fetch_one(self.pool())
        .await?;
        Ok((row.try_get("n")?, row.try_get("at")?))
    }

    /// The units of every described tag of an organization: (asset, tag, unit).
    pub async fn tag_units(&self, org_id: &str) -> Result<Vec<(String, String, String)>> {
        let rows = sqlx::query(
            "SELECT asset_id, tag_name, unit FROM tag_metadata WHERE org_id = $1 AND unit IS NOT NULL",
        )
        .bind(org_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("asset_id")?,
                    r.try_get("tag_name")?,
                    r.try_get("unit")?,
                ))
            })
            .collect()
    }

    /// One tag's stored description.
    pub async fn tag_description(
        &self,
        org_id: &str,
        asset_id: &str,
        tag_name: &str,
    ) -> Result<Option<StoredTag>> {
        let row = sqlx::query(
            "SELECT * FROM tag_metadata WHERE org_id = $1 AND asset_id = $2 AND tag_name = $3",
        )
        .bind(org_id)
        .bind(asset_id)
        .bind(tag_name)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// A person's description of a tag (whatever the device said is replaced, and kept
    /// replaced).
    pub async fn set_tag_description(
        &self,
        org_id: &str,
        asset_id: &str,
        tag_name: &str,
        d: &TagDescription,
    ) -> Result<()> {
        self.upsert_descriptions(org_id, &[(asset_id, tag_name, d)], TagSource::User)
            .await
    }

    /// What a device says its tags measure; a tag a person described keeps their words.
    pub async fn record_device_descriptions(
        &self,
        org_id: &str,
        items: &[(&str, &str, &TagDescription)],
    ) -> Result<()> {
        self.upsert_descriptions(org_id, items, TagSource::Device)
            .await
    }

    async fn upsert_descriptions(
        &self,
        org_id: &str,
        items: &[(&str, &str, &TagDescription)],
        source: TagSource,
    ) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let keep_people = match source {
            TagSource::User => "",
            TagSource::Device => " WHERE tag_metadata.source <> 'user'",
        };
        let now = Timestamp::now().millis();
        let mut tx = self.begin_write().await?;
        for (asset_id, tag_name, d) in items {
            let sql = format!(
                "INSERT INTO tag_metadata (org_id, asset_id, tag_name, unit, description, source, updated_at, eu_low, eu_high) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, {}) \
                 ON CONFLICT (org_id, asset_id, tag_name) DO UPDATE SET unit = excluded.unit, \
                 description = excluded.description, eu_low = excluded.eu_low, eu_high = excluded.eu_high, \
                 source = excluded.source, updated_at = excluded.updated_at{keep_people}",
                range_sql(d.eu_range, 8)
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(org_id)
                .bind(*asset_id)
                .bind(*tag_name)
                .bind(d.unit.as_deref())
                .bind(d.description.as_deref())
                .bind(source.as_str())
                .bind(now);
            if let Some(r) = d.eu_range {
                q = q.bind(r.low).bind(r.high);
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
