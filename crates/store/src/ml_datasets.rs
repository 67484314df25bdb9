//! ML datasets as stored (docs/api.md, "ML datasets"): the dataset rows with their counts
//! read from the working copy (chunk spans and labels, `ml_rows.rs`), label classes with
//! their exact counts, versions and validation rules.

use plantd_model::Timestamp;
use plantd_model::ml::{
    Column, Dataset, DatasetSource, DatasetVersion, LabelClass, LabelCounts, MAX_LABEL_CLASSES,
    MAX_RULES, RuleType, ValidationResult, ValidationRule,
};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::error::conflict_on_unique;
use crate::rows::OrgTable;
use crate::sql::json_column;
use crate::{Result, Store, StoreError};

const DATASETS: OrgTable = OrgTable {
    name: "ml_datasets",
    columns: "*",
    order: "created_at DESC, id",
};

/// A dataset as created.
pub struct NewDataset<'a> {
    pub id: &'a str,
    pub org_id: &'a str,
    pub name: &'a str,
    pub description: &'a str,
    pub columns: &'a [Column],
    pub source: &'a DatasetSource,
    pub created_by: &'a str,
    pub now: Timestamp,
}

fn dataset_from_row(row: &AnyRow) -> Result<Dataset> {
    Ok(Dataset {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        columns: json_column(row, "columns")?,
        row_count: 0,
        size_bytes: 0,
        file_size_bytes: 0,
        current_version: row.try_get("current_version")?,
        source: json_column(row, "source")?,
        labels: LabelCounts::default(),
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        created_by: row.try_get("created_by")?,
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

fn version_from_row(row: &AnyRow) -> Result<DatasetVersion> {
    Ok(DatasetVersion {
        version: row.try_get("version")?,
        generation: row.try_get("generation")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        created_by: row.try_get("created_by")?,
        row_count: row.try_get::<i64, _>("row_count")? as u64,
        file_size_bytes: row.try_get::<i64, _>("file_size_bytes")? as u64,
        label_count: row.try_get::<i64, _>("label_count")? as u64,
        notes: row.try_get("notes")?,
    })
}

fn rule_from_row(row: &AnyRow) -> Result<ValidationRule> {
    let t: String = row.try_get("rule_type")?;
    Ok(ValidationRule {
        id: row.try_get("id")?,
        dataset_id: row.try_get("dataset_id")?,
        name: row.try_get("name")?,
        rule_type: RuleType::parse(&t)
            .ok_or_else(|| StoreError::Corrupt(format!("validation rule type {t}")))?,
        column: row.try_get("column_name")?,
        config: json_column(row, "config")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
    })
}

impl Store {
    pub async fn insert_dataset(&self, d: &NewDataset<'_>) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO ml_datasets (id, org_id, name, description, columns, source, generation, \
             rows_changed, created_at, created_by, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 1, 0, $7, $8, $7)",
        )
        .bind(d.id)
        .bind(d.org_id)
        .bind(d.name)
        .bind(d.description)
        .bind(serde_json::to_string(d.columns)?)
        .bind(serde_json::to_string(d.source)?)
        .bind(d.now.millis())
        .bind(d.created_by)
        .execute(&mut *tx)
        .await
        .map_err(|e| conflict_on_unique(e, &format!("a dataset named '{}' exists", d.name)))?;
        tx.commit().await?;
        Ok(())
    }

    /// The dataset with the counts of its working copy.
    pub async fn dataset(&self, org_id: &str, id: &str) -> Result<Dataset> {
        let d = self
            .org_row(&DATASETS, org_id, id, dataset_from_row)
            .await?;
        self.with_counts(d).await
    }

    pub async fn datasets(&self, org_id: &str, page: (i64, i64)) -> Result<(Vec<Dataset>, u64)> {
        let (items, total) = self
            .org_page(&DATASETS, org_id, page, dataset_from_row)
            .await?;
        let mut out = Vec::with_capacity(items.len());
        for d in items {
            out.push(self.with_counts(d).await?);
        }
        Ok((out, total))
    }

    async fn with_counts(&self, mut d: Dataset) -> Result<Dataset> {
        let row = sqlx::query(
            "SELECT CAST(COALESCE(SUM(c.row_count), 0) AS BIGINT) AS rows, CAST(COALESCE(SUM(c.size_bytes), 0) AS BIGINT) AS size, \
             CAST(COALESCE(SUM(c.source_bytes), 0) AS BIGINT) AS source FROM ml_dataset_spans s \
             JOIN ml_dataset_chunks c ON c.id = s.chunk_id WHERE s.dataset_id = $1 AND s.to_gen IS NULL",
        )
        .bind(&d.id)
        .fetch_one(self.pool())
        .await?;
        d.row_count = row.try_get::<i64, _>("rows")? as u64;
        d.size_bytes = row.try_get::<i64, _>("size")? as u64;
        d.file_size_bytes = row.try_get::<i64, _>("source")? as u64;
        if d.row_count > 0 {
            d.file_size_bytes += plantd_model::ml::header_bytes(&d.columns);
        }
        let row = sqlx::query(
            "SELECT COUNT(label_class_id) AS labeled, CAST(COALESCE(SUM(skipped), 0) AS BIGINT) AS skipped, \
             CAST(COALESCE(SUM(flagged), 0) AS BIGINT) AS flagged FROM ml_dataset_labels \
             WHERE dataset_id = $1 AND to_gen IS NULL",
        )
        .bind(&d.id)
        .fetch_one(self.pool())
        .await?;
        d.labels = LabelCounts {
            labeled: row.try_get::<i64, _>("labeled")? as u64,
            skipped: row.try_get::<i64, _>("skipped")? as u64,
            flagged: row.try_get::<i64, _>("flagged")? as u64,
        };
        Ok(d)
    }

    /// Adds a class; a name the dataset has is a conflict, a 51st class `Ok(false)`.
    pub async fn insert_label_class(&self, c: &LabelClass) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let n: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM ml_label_classes WHERE dataset_id = $1")
                .bind(&c.dataset_id)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
        if n as u64 >= MAX_LABEL_CLASSES {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO ml_label_classes (id, dataset_id, name, color, description, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&c.id)
        .bind(&c.dataset_id)
        .bind(&c.name)
        .bind(&c.color)
        .bind(&c.description)
        .bind(c.created_at.millis())
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            conflict_on_unique(e, &format!("the dataset has a class named '{}'", c.name))
        })?;
        tx.commit().await?;
        Ok(true)
    }

    /// The dataset's classes in the order they were made, each with the rows of the working
    /// copy labelled with it.
    pub async fn label_classes(&self, dataset_id: &str) -> Result<Vec<LabelClass>> {
        let rows = sqlx::query(
            "SELECT c.*, (SELECT COUNT(*) FROM ml_dataset_labels l WHERE l.dataset_id = c.dataset_id \
             AND l.to_gen IS NULL AND l.label_class_id = c.id) AS n \
             FROM ml_label_classes c WHERE c.dataset_id = $1 ORDER BY c.created_at, c.id",
        )
        .bind(dataset_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                Ok(LabelClass {
                    id: row.try_get("id")?,
                    dataset_id: row.try_get("dataset_id")?,
                    name: row.try_get("name")?,
                    color: row.try_get("color")?,
                    description: row.try_get("description")?,
                    count: row.try_get::<i64, _>("n")? as u64,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            })
            .collect()
    }

    /// Whether `class_id` is a class of the dataset.
    pub async fn label_class_exists(&self, dataset_id: &str, class_id: &str) -> Result<bool> {
        Ok(
            sqlx::query("SELECT 1 AS one FROM ml_label_classes WHERE dataset_id = $1 AND id = $2")
                .bind(dataset_id)
                .bind(class_id)
                .fetch_optional(self.pool())
                .await?
                .is_some(),
        )
    }

    /// Adds a rule; a 101st is `Ok(false)`.
    pub async fn insert_rule(&self, r: &ValidationRule) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let n: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM ml_validation_rules WHERE dataset_id = $1")
                .bind(&r.dataset_id)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
        if n as u64 >= MAX_RULES {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO ml_validation_rules (id, dataset_id, name, rule_type, column_name, config, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&r.id)
        .bind(&r.dataset_id)
        .bind(&r.name)
        .bind(r.rule_type.as_str())
        .bind(&r.column)
        .bind(serde_json::to_string(&r.config)?)
        .bind(r.created_at.millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    pub async fn validation_rules(&self, dataset_id: &str) -> Result<Vec<ValidationRule>> {
        let rows = sqlx::query(
            "SELECT * FROM ml_validation_rules WHERE dataset_id = $1 ORDER BY created_at, id",
        )
        .bind(dataset_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(rule_from_row).collect()
    }

    pub async fn set_last_validation(&self, dataset_id: &str, r: &ValidationResult) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query("UPDATE ml_datasets SET last_validation = $1 WHERE id = $2")
            .bind(serde_json::to_string(r)?)
            .bind(dataset_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn last_validation(&self, dataset_id: &str) -> Result<Option<ValidationResult>> {
        let text: Option<String> =
            sqlx::query("SELECT last_validation FROM ml_datasets WHERE id = $1")
                .bind(dataset_id)
                .fetch_optional(self.pool())
                .await?
                .map(|r| r.try_get("last_validation"))
                .transpose()?
                .flatten();
        Ok(text.map(|t| serde_json::from_str(&t)).transpose()?)
    }

    /// Versions, newest first.
    pub async fn dataset_versions(
        &self,
        dataset_id: &str,
        (limit, offset): (i64, i64),
    ) -> Result<(Vec<DatasetVersion>, u64)> {
        let total: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM ml_dataset_versions WHERE dataset_id = $1")
                .bind(dataset_id)
                .fetch_one(self.pool())
                .await?
                .try_get("n")?;
        let rows = sqlx::query(
            "SELECT * FROM ml_dataset_versions WHERE dataset_id = $1 ORDER BY generation DESC \
             LIMIT $2 OFFSET $3",
        )
        .bind(dataset_id)
        .bind(limit)
        .bind(offset)
        .fetch_all(self.pool())
        .await?;
        Ok((
            rows.iter().map(version_from_row).collect::<Result<_>>()?,
            total as u64,
        ))
    }

    pub async fn dataset_version(&self, dataset_id: &str, version: &str) -> Result<DatasetVersion> {
        let row =
            sqlx::query("SELECT * FROM ml_dataset_versions WHERE dataset_id = $1 AND version = $2")
                .bind(dataset_id)
                .bind(version)
                .fetch_optional(self.pool())
                .await?
                .ok_or(StoreError::NotFound)?;
        version_from_row(&row)
    }
}

impl Store {
    /// Removes a dataset with its chunks, labels, versions and rules.
    pub async fn delete_dataset(&self, org_id: &str, id: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        for table in [
            "ml_dataset_spans",
            "ml_dataset_chunks",
            "ml_dataset_labels",
            "ml_label_classes",
            "ml_dataset_versions",
            "ml_validation_rules",
        ] {
            let sql = format!(
                "DELETE FROM {table} WHERE dataset_id IN (SELECT id FROM ml_datasets WHERE org_id = $1 AND id = $2)"
            );
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(org_id)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query("DELETE FROM ml_datasets WHERE org_id = $1 AND id = $2")
            .bind(org_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
