//! The rows and labels of ML datasets as stored (docs/api.md, "Storage"): chunks staged by an
//! upload and made the working copy in one transaction; spans and label records that hold in a
//! range of generations, so a version is a number and copies nothing; labels changed, versions
//! made and rollbacks done each in one transaction that locks the dataset's row first.

use plantd_model::Timestamp;
use plantd_model::ml::{Column, DatasetVersion, RowLabel, next_version};
use sqlx::{AnyConnection, Row};

use crate::{Result, Store, StoreError};

/// A chunk's rows in a generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    pub chunk_id: String,
    pub first_row_id: u64,
    pub row_count: u64,
}

/// What holds in generation `gen`, or in the working copy (`None`), as SQL over a table with
/// `from_gen` and `to_gen`.
fn visible(alias: &str, generation: Option<i64>) -> String {
    match generation {
        None => format!("{alias}.to_gen IS NULL"),
        Some(g) => {
            format!("{alias}.from_gen <= {g} AND ({alias}.to_gen IS NULL OR {alias}.to_gen > {g})")
        }
    }
}

/// A change of a row's label state.
#[derive(Clone, Debug)]
pub enum LabelChange {
    Set(String),
    Clear,
    Skip,
    Flag(bool),
}

/// Locks the dataset's row for the transaction and reads its working generation.
async fn lock(conn: &mut AnyConnection, dataset_id: &str, now: Timestamp) -> Result<i64> {
    let row =
        sqlx::query("UPDATE ml_datasets SET updated_at = $1 WHERE id = $2 RETURNING generation")
            .bind(now.millis())
            .bind(dataset_id)
            .fetch_optional(&mut *conn)
            .await?
            .ok_or(StoreError::NotFound)?;
    Ok(row.try_get("generation")?)
}

/// Ends what holds in the working copy of `table` where `cond`: records that began in it are
/// deleted, older ones end at it.
async fn close(
    conn: &mut AnyConnection,
    table: &str,
    dataset_id: &str,
    generation: i64,
    cond: &str,
) -> Result<()> {
    let del = format!(
        "DELETE FROM {table} WHERE dataset_id = $1 AND to_gen IS NULL AND from_gen = $2 {cond}"
    );
    sqlx::query(sqlx::AssertSqlSafe(del))
        .bind(dataset_id)
        .bind(generation)
        .execute(&mut *conn)
        .await?;
    let end =
        format!("UPDATE {table} SET to_gen = $2 WHERE dataset_id = $1 AND to_gen IS NULL {cond}");
    sqlx::query(sqlx::AssertSqlSafe(end))
        .bind(dataset_id)
        .bind(generation)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Removes chunks no generation holds any more.
async fn drop_unheld_chunks(conn: &mut AnyConnection, dataset_id: &str) -> Result<()> {
    sqlx::query(
        "DELETE FROM ml_dataset_chunks WHERE dataset_id = $1 AND upload_id IS NULL AND NOT EXISTS \
         (SELECT 1 FROM ml_dataset_spans s WHERE s.chunk_id = ml_dataset_chunks.id)",
    )
    .bind(dataset_id)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

async fn working_rows(conn: &mut AnyConnection, dataset_id: &str) -> Result<(u64, u64)> {
    let row = sqlx::query(
        "SELECT CAST(COALESCE(SUM(c.row_count), 0) AS BIGINT) AS n, CAST(COALESCE(SUM(c.source_bytes), 0) AS BIGINT) AS b \
         FROM ml_dataset_spans s JOIN ml_dataset_chunks c ON c.id = s.chunk_id \
         WHERE s.dataset_id = $1 AND s.to_gen IS NULL",
    )
    .bind(dataset_id)
    .fetch_one(&mut *conn)
    .await?;
    Ok((
        row.try_get::<i64, _>("n")? as u64,
        row.try_get::<i64, _>("b")? as u64,
    ))
}

fn label_from_row(row: &sqlx::any::AnyRow) -> Result<RowLabel> {
    Ok(RowLabel {
        row_id: row.try_get::<i64, _>("row_id")? as u64,
        label_class_id: row.try_get("label_class_id")?,
        skipped: row.try_get::<i32, _>("skipped")? != 0,
        flagged: row.try_get::<i32, _>("flagged")? != 0,
    })
}

impl Store {
    /// Stores a chunk of an upload under way: no generation holds it yet. A crash loses at
    /// most staged chunks, which no answer counted on.
    pub async fn stage_chunk(
        &self,
        dataset_id: &str,
        upload_id: &str,
        seq: i64,
        rows: u32,
        source_bytes: u64,
        data: &[u8],
    ) -> Result<()> {
        let mut tx = self.begin_write_unsynced().await?;
        sqlx::query(
            "INSERT INTO ml_dataset_chunks (id, dataset_id, upload_id, seq, row_count, source_bytes, \
             size_bytes, created_at, data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(plantd_model::new_id())
        .bind(dataset_id)
        .bind(upload_id)
        .bind(seq)
        .bind(i64::from(rows))
        .bind(source_bytes as i64)
        .bind(data.len() as i64)
        .bind(Timestamp::now().millis())
        .bind(data)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes the chunks of a refused or broken upload.
    pub async fn discard_upload(&self, upload_id: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM ml_dataset_chunks WHERE upload_id = $1")
            .bind(upload_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes chunks of uploads that never finished (a crash), staged before `before`.
    pub async fn discard_stale_uploads(&self, before: Timestamp) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "DELETE FROM ml_dataset_chunks WHERE upload_id IS NOT NULL AND created_at < $1",
        )
        .bind(before.millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }

    /// Makes an upload's chunks the working copy's rows (after the last row, or instead of
    /// every row with `replace`), in one transaction; `columns` become the dataset's when it
    /// had none, and must equal them otherwise (`Conflict`).
    pub async fn commit_upload(
        &self,
        dataset_id: &str,
        upload_id: &str,
        replace: bool,
        columns: &[Column],
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let generation = lock(&mut tx, dataset_id, Timestamp::now()).await?;
        let stored: String = sqlx::query("SELECT columns FROM ml_datasets WHERE id = $1")
            .bind(dataset_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("columns")?;
        let stored: Vec<Column> = serde_json::from_str(&stored)?;
        if !stored.is_empty() && stored != columns {
            return Err(StoreError::Conflict(
                "the dataset's columns changed during the upload".into(),
            ));
        }
        if replace {
            close(&mut tx, "ml_dataset_spans", dataset_id, generation, "").await?;
            close(&mut tx, "ml_dataset_labels", dataset_id, generation, "").await?;
            drop_unheld_chunks(&mut tx, dataset_id).await?;
        }
        let (rows, _) = working_rows(&mut tx, dataset_id).await?;
        let chunks = sqlx::query(
            "SELECT id, row_count FROM ml_dataset_chunks WHERE upload_id = $1 ORDER BY seq",
        )
        .bind(upload_id)
        .fetch_all(&mut *tx)
        .await?;
        let mut next = rows + 1;
        for c in &chunks {
            let id: String = c.try_get("id")?;
            let n: i64 = c.try_get("row_count")?;
            sqlx::query(
                "INSERT INTO ml_dataset_spans (dataset_id, chunk_id, first_row_id, from_gen) \
                 VALUES ($1, $2, $3, $4)",
            )
            .bind(dataset_id)
            .bind(&id)
            .bind(next as i64)
            .bind(generation)
            .execute(&mut *tx)
            .await?;
            next += n as u64;
        }
        sqlx::query("UPDATE ml_dataset_chunks SET upload_id = NULL WHERE upload_id = $1")
            .bind(upload_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE ml_datasets SET columns = $1, rows_changed = 1 WHERE id = $2")
            .bind(serde_json::to_string(columns)?)
            .bind(dataset_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The spans of the working copy (`None`) or of a generation whose rows meet `[from, to]`,
    /// by row id.
    pub async fn dataset_spans(
        &self,
        dataset_id: &str,
        generation: Option<i64>,
        (from, to): (u64, u64),
    ) -> Result<Vec<Span>> {
        let sql = format!(
            "SELECT s.chunk_id, s.first_row_id, c.row_count FROM ml_dataset_spans s \
             JOIN ml_dataset_chunks c ON c.id = s.chunk_id WHERE s.dataset_id = $1 AND {} \
             AND s.first_row_id <= $2 AND s.first_row_id + c.row_count > $3 ORDER BY s.first_row_id",
            visible("s", generation)
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(dataset_id)
            .bind(to.min(i64::MAX as u64) as i64)
            .bind(from as i64)
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Span {
                    chunk_id: r.try_get("chunk_id")?,
                    first_row_id: r.try_get::<i64, _>("first_row_id")? as u64,
                    row_count: r.try_get::<i64, _>("row_count")? as u64,
                })
            })
            .collect()
    }

    pub async fn chunk_data(&self, chunk_id: &str) -> Result<Vec<u8>> {
        Ok(
            sqlx::query("SELECT data FROM ml_dataset_chunks WHERE id = $1")
                .bind(chunk_id)
                .fetch_optional(self.pool())
                .await?
                .ok_or(StoreError::NotFound)?
                .try_get("data")?,
        )
    }

    /// Label states of rows `[from, to]` in the working copy or a generation, by row id (rows
    /// without a record are unlabelled).
    pub async fn row_labels(
        &self,
        dataset_id: &str,
        generation: Option<i64>,
        (from, to): (u64, u64),
    ) -> Result<Vec<RowLabel>> {
        let sql = format!(
            "SELECT l.row_id, l.label_class_id, l.skipped, l.flagged FROM ml_dataset_labels l \
             WHERE l.dataset_id = $1 AND {} AND l.row_id >= $2 AND l.row_id <= $3 ORDER BY l.row_id",
            visible("l", generation)
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(dataset_id)
            .bind(from as i64)
            .bind(to.min(i64::MAX as u64) as i64)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(label_from_row).collect()
    }

    /// Changes rows' label states in one transaction; each change names its row. Rows must be
    /// rows of the working copy (checked by the caller under the same rule).
    pub async fn change_labels(
        &self,
        dataset_id: &str,
        changes: &[(u64, LabelChange)],
    ) -> Result<Vec<RowLabel>> {
        let mut tx = self.begin_write().await?;
        let generation = lock(&mut tx, dataset_id, Timestamp::now()).await?;
        let mut out = Vec::with_capacity(changes.len());
        for (row_id, change) in changes {
            let old = sqlx::query(
                "SELECT row_id, label_class_id, skipped, flagged FROM ml_dataset_labels \
                 WHERE dataset_id = $1 AND row_id = $2 AND to_gen IS NULL",
            )
            .bind(dataset_id)
            .bind(*row_id as i64)
            .fetch_optional(&mut *tx)
            .await?
            .map(|r| label_from_row(&r))
            .transpose()?
            .unwrap_or(RowLabel {
                row_id: *row_id,
                ..Default::default()
            });
            let mut new = old.clone();
            match change {
                LabelChange::Set(class) => {
                    new.label_class_id = Some(class.clone());
                    new.skipped = false;
                }
                LabelChange::Clear => {
                    new.label_class_id = None;
                    new.skipped = false;
                }
                LabelChange::Skip => {
                    new.label_class_id = None;
                    new.skipped = true;
                }
                LabelChange::Flag(f) => new.flagged = *f,
            }
            if new != old {
                let cond = format!("AND row_id = {row_id}");
                close(&mut tx, "ml_dataset_labels", dataset_id, generation, &cond).await?;
                if new.label_class_id.is_some() || new.skipped || new.flagged {
                    sqlx::query(
                        "INSERT INTO ml_dataset_labels (dataset_id, row_id, from_gen, label_class_id, \
                         skipped, flagged) VALUES ($1, $2, $3, $4, $5, $6)",
                    )
                    .bind(dataset_id)
                    .bind(*row_id as i64)
                    .bind(generation)
                    .bind(new.label_class_id.clone())
                    .bind(i32::from(new.skipped))
                    .bind(i32::from(new.flagged))
                    .execute(&mut *tx)
                    .await?;
                }
            }
            out.push(new);
        }
        tx.commit().await?;
        Ok(out)
    }

    /// The labelled rows of the working copy, by row id: `(row id, class id)`.
    pub async fn labelled_rows(&self, dataset_id: &str) -> Result<Vec<(u64, String)>> {
        let rows = sqlx::query(
            "SELECT row_id, label_class_id FROM ml_dataset_labels WHERE dataset_id = $1 \
             AND to_gen IS NULL AND label_class_id IS NOT NULL ORDER BY row_id",
        )
        .bind(dataset_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get::<i64, _>("row_id")? as u64,
                    r.try_get("label_class_id")?,
                ))
            })
            .collect()
    }

    /// Every label record that holds in generation `a` or `b` (`None`: the working copy), with
    /// the generations it holds in, for a comparison.
    pub async fn label_records(
        &self,
        dataset_id: &str,
        a: Option<i64>,
        b: Option<i64>,
    ) -> Result<Vec<(RowLabel, i64, Option<i64>)>> {
        let sql = format!(
            "SELECT l.row_id, l.label_class_id, l.skipped, l.flagged, l.from_gen, l.to_gen \
             FROM ml_dataset_labels l WHERE l.dataset_id = $1 AND (({}) OR ({}))",
            visible("l", a),
            visible("l", b)
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(dataset_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    label_from_row(r)?,
                    r.try_get("from_gen")?,
                    r.try_get("to_gen")?,
                ))
            })
            .collect()
    }

    /// Freezes the working copy as the next version (a new generation begins), in one
    /// transaction.
    pub async fn create_dataset_version(
        &self,
        dataset_id: &str,
        notes: &str,
        created_by: &str,
        now: Timestamp,
    ) -> Result<DatasetVersion> {
        let mut tx = self.begin_write().await?;
        let generation = lock(&mut tx, dataset_id, now).await?;
        let row = sqlx::query(
            "SELECT current_version, rows_changed, columns FROM ml_datasets WHERE id = $1",
        )
        .bind(dataset_id)
        .fetch_one(&mut *tx)
        .await?;
        let current: Option<String> = row.try_get("current_version")?;
        let rows_changed = row.try_get::<i32, _>("rows_changed")? != 0;
        let version = next_version(current.as_deref(), rows_changed);
        let columns: Vec<Column> = serde_json::from_str(&row.try_get::<String, _>("columns")?)?;
        let (row_count, mut bytes) = working_rows(&mut tx, dataset_id).await?;
        if row_count > 0 {
            bytes += plantd_model::ml::header_bytes(&columns);
        }
        let labels: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM ml_dataset_labels WHERE dataset_id = $1 AND to_gen IS NULL \
             AND label_class_id IS NOT NULL",
        )
        .bind(dataset_id)
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
        let v = DatasetVersion {
            version,
            generation,
            created_at: now,
            created_by: created_by.to_string(),
            row_count,
            file_size_bytes: bytes,
            label_count: labels as u64,
            notes: notes.to_string(),
        };
        sqlx::query(
            "INSERT INTO ml_dataset_versions (dataset_id, version, generation, notes, row_count, \
             file_size_bytes, label_count, created_at, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(dataset_id)
        .bind(&v.version)
        .bind(generation)
        .bind(notes)
        .bind(row_count as i64)
        .bind(bytes as i64)
        .bind(labels)
        .bind(now.millis())
        .bind(created_by)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE ml_datasets SET generation = $1, current_version = $2, rows_changed = 0 WHERE id = $3",
        )
        .bind(generation + 1)
        .bind(&v.version)
        .bind(dataset_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(v)
    }

    /// Makes the working copy what generation `target` held: what began after it ends, what
    /// it held and has ended holds again; in one transaction.
    pub async fn rollback_dataset(&self, dataset_id: &str, target: i64) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let generation = lock(&mut tx, dataset_id, Timestamp::now()).await?;
        let newer = format!("AND from_gen > {target}");
        for (table, key) in [
            ("ml_dataset_spans", "chunk_id, first_row_id"),
            (
                "ml_dataset_labels",
                "row_id, label_class_id, skipped, flagged",
            ),
        ] {
            close(&mut tx, table, dataset_id, generation, &newer).await?;
            let again = format!(
                "INSERT INTO {table} (dataset_id, {key}, from_gen) SELECT dataset_id, {key}, $2 \
                 FROM {table} WHERE dataset_id = $1 AND from_gen <= {target} AND to_gen IS NOT NULL \
                 AND to_gen > {target}"
            );
            sqlx::query(sqlx::AssertSqlSafe(again))
                .bind(dataset_id)
                .bind(generation)
                .execute(&mut *tx)
                .await?;
        }
        drop_unheld_chunks(&mut tx, dataset_id).await?;
        sqlx::query("UPDATE ml_datasets SET rows_changed = 1 WHERE id = $1")
            .bind(dataset_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}
