//! The shapes every aggregate's SQL repeats, written once: the organization's row of a table
//! by id, a page or all of an organization's rows, a delete by id, and a write that must touch
//! a row (else the row is not there: `NotFound`). Tables and orders are the callers' constants, never
//! input.

use sqlx::any::{AnyArguments, AnyQueryResult, AnyRow};
use sqlx::query::Query;
use sqlx::{Any, AnyConnection, Row};

use crate::error::{Result, StoreError};
use crate::store::Store;

/// A table of organizations' rows as its aggregate reads it: the columns it selects (never a
/// secret column a record does not carry) and the order of its lists.
pub(crate) struct OrgTable {
    pub(crate) name: &'static str,
    pub(crate) columns: &'static str,
    pub(crate) order: &'static str,
}

/// Maps a row to its record (each aggregate's `x_from_row`).
pub(crate) type FromRow<T> = fn(&AnyRow) -> Result<T>;

/// `NotFound` when a write touched no row (the row is not there, or is another
/// organization's).
pub(crate) fn touched(done: AnyQueryResult) -> Result<()> {
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound);
    }
    Ok(())
}

impl Store {
    /// The row of `table` with `id` in the organization; `NotFound` when there is none (another
    /// organization's id included).
    pub(crate) async fn org_row<T>(
        &self,
        table: &OrgTable,
        org_id: &str,
        id: &str,
        map: FromRow<T>,
    ) -> Result<T> {
        let OrgTable { name, columns, .. } = table;
        let sql = format!("SELECT {columns} FROM {name} WHERE org_id = $1 AND id = $2");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(org_id)
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .ok_or(StoreError::NotFound)?;
        map(&row)
    }

    /// A page of the organization's rows of `table` in its order, and how many there are.
    pub(crate) async fn org_page<T>(
        &self,
        table: &OrgTable,
        org_id: &str,
        (limit, offset): (i64, i64),
        map: FromRow<T>,
    ) -> Result<(Vec<T>, u64)> {
        let OrgTable {
            name,
            columns,
            order,
        } = table;
        let count = format!("SELECT COUNT(*) AS n FROM {name} WHERE org_id = $1");
        let total: i64 = sqlx::query(sqlx::AssertSqlSafe(count))
            .bind(org_id)
            .fetch_one(self.pool())
            .await?
            .try_get("n")?;
        let sql = format!(
            "SELECT {columns} FROM {name} WHERE org_id = $1 ORDER BY {order} LIMIT $2 OFFSET $3"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(org_id)
            .bind(limit)
            .bind(offset)
            .fetch_all(self.pool())
            .await?;
        Ok((rows.iter().map(map).collect::<Result<_>>()?, total as u64))
    }

    /// Every row of `table` of the organization, in its order.
    pub(crate) async fn org_rows<T>(
        &self,
        table: &OrgTable,
        org_id: &str,
        map: FromRow<T>,
    ) -> Result<Vec<T>> {
        let OrgTable {
            name,
            columns,
            order,
        } = table;
        let sql = format!("SELECT {columns} FROM {name} WHERE org_id = $1 ORDER BY {order}");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(org_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(map).collect()
    }

    /// Runs one statement in a write transaction of its own; `NotFound` when it touched no row.
    pub(crate) async fn write_one(&self, query: Query<'_, Any, AnyArguments>) -> Result<()> {
        let mut tx = self.begin_write().await?;
        touched(query.execute(&mut *tx).await?)?;
        tx.commit().await?;
        Ok(())
    }

    /// Deletes the organization's row of `table` with `id` in a write transaction of its own;
    /// `NotFound` when there is none.
    pub(crate) async fn delete_org_row(
        &self,
        table: &OrgTable,
        org_id: &str,
        id: &str,
    ) -> Result<()> {
        let sql = format!("DELETE FROM {} WHERE org_id = $1 AND id = $2", table.name);
        self.write_one(sqlx::query(sqlx::AssertSqlSafe(sql)).bind(org_id).bind(id))
            .await
    }
}

/// Deletes the organization's row of `table` with `id` within a transaction; `NotFound` when
/// there is none.
pub(crate) async fn delete_in(
    conn: &mut AnyConnection,
    table: &OrgTable,
    org_id: &str,
    id: &str,
) -> Result<()> {
    let sql = format!("DELETE FROM {} WHERE org_id = $1 AND id = $2", table.name);
    let done = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(org_id)
        .bind(id)
        .execute(conn)
        .await?;
    touched(done)
}
