//! The edge agent's outbox (`telemetry_outbox`): while forwarding is on, ingest appends each
//! acknowledged batch's record here too, in the transaction that appends it to the telemetry log
//! (so a point acknowledged on the agent is a point still to forward, and nothing between the two
//! can be lost). The uplink reads records oldest first, publishes them to the cloud and deletes
//! each once the cloud has acknowledged it. Records keep their series ids; a read gives the
//! points back with their asset and tag names.

use plantd_model::Timestamp;
use plantd_model::telemetry::{Point, Quality};
use sqlx::{AnyConnection, Row};
use std::collections::HashMap;

use crate::error::Result;
use crate::log::{IDS_PER_STATEMENT, RawPoint, bind_ids, decode, placeholders};

/// A batch waiting to be forwarded.
#[derive(Clone, Debug)]
pub struct OutboxRecord {
    pub id: i64,
    pub org_id: String,
    /// When the agent acknowledged it.
    pub created_at: Timestamp,
    pub points: Vec<Point>,
}

/// What the outbox holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutboxCount {
    pub records: u64,
    pub points: u64,
    /// The newest record's id (0 when empty).
    pub newest_id: i64,
}

/// Appends the records `(org, points, record)` in the writer's transaction.
pub(crate) async fn append(
    conn: &mut AnyConnection,
    records: &[(&str, usize, Vec<u8>)],
    now: i64,
) -> Result<()> {
    for (org, points, data) in records {
        if *points == 0 {
            continue;
        }
        sqlx::query(
            "INSERT INTO telemetry_outbox (org_id, points, created_at, data) VALUES ($1, $2, $3, $4)",
        )
        .bind(*org)
        .bind(*points as i64)
        .bind(now)
        .bind(data.as_slice())
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// The oldest records with an id in `(after, up_to]` (`up_to` None: no upper end), skipping
/// `skip`, up to about `max_points` points (at least one record).
pub(crate) async fn oldest(
    pool: &sqlx::AnyPool,
    sqlite: bool,
    after: i64,
    up_to: Option<i64>,
    skip: &[i64],
    max_points: usize,
) -> Result<Vec<OutboxRecord>> {
    let heads = sqlx::query(
        "SELECT id, points FROM telemetry_outbox WHERE id > $1 AND id <= $2 ORDER BY id LIMIT 1000",
    )
    .bind(after)
    .bind(up_to.unwrap_or(i64::MAX))
    .fetch_all(pool)
    .await?;
    let mut wanted = Vec::new();
    let mut total = 0usize;
    for h in &heads {
        let id: i64 = h.try_get("id")?;
        if skip.contains(&id) {
            continue;
        }
        let n = h.try_get::<i64, _>("points")? as usize;
        if !wanted.is_empty() && total + n > max_points {
            break;
        }
        total += n;
        wanted.push(id);
    }
    let mut raw: Vec<(i64, String, i64, Vec<RawPoint>)> = Vec::with_capacity(wanted.len());
    for chunk in wanted.chunks(IDS_PER_STATEMENT) {
        let sql = format!(
            "SELECT id, org_id, created_at, data FROM telemetry_outbox WHERE id IN ({}) ORDER BY id",
            placeholders(sqlite, chunk.len())
        );
        for r in bind_ids(sqlx::query(sqlx::AssertSqlSafe(sql)), chunk)
            .fetch_all(pool)
            .await?
        {
            let mut rows = Vec::new();
            decode(&r.try_get::<Vec<u8>, _>("data")?, &mut rows)?;
            raw.push((
                r.try_get("id")?,
                r.try_get("org_id")?,
                r.try_get("created_at")?,
                rows,
            ));
        }
    }
    let mut series: Vec<i64> = raw
        .iter()
        .flat_map(|(_, _, _, rows)| rows.iter().map(|((s, _), _)| *s))
        .collect();
    series.sort_unstable();
    series.dedup();
    let names = series_names(pool, sqlite, &series).await?;
    Ok(raw
        .into_iter()
        .map(|(id, org_id, created_at, rows)| OutboxRecord {
            id,
            org_id,
            created_at: Timestamp::from_millis(created_at),
            points: rows
                .into_iter()
                .filter_map(|((s, ts), (value, quality))| {
                    let (asset, tag) = names.get(&s)?;
                    Some(Point {
                        asset_id: asset.clone(),
                        tag_name: tag.clone(),
                        value,
                        timestamp: Timestamp::from_millis(ts),
                        quality: Quality::from_code(quality.into()),
                        data_source_id: None,
                    })
                })
                .collect(),
        })
        .collect())
}

/// The asset and tag of each series id.
async fn series_names(
    pool: &sqlx::AnyPool,
    sqlite: bool,
    ids: &[i64],
) -> Result<HashMap<i64, (String, String)>> {
    let mut out = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(IDS_PER_STATEMENT) {
        let sql = format!(
            "SELECT id, asset_id, tag_name FROM telemetry_series WHERE id IN ({})",
            placeholders(sqlite, chunk.len())
        );
        for r in bind_ids(sqlx::query(sqlx::AssertSqlSafe(sql)), chunk)
            .fetch_all(pool)
            .await?
        {
            out.insert(
                r.try_get("id")?,
                (r.try_get("asset_id")?, r.try_get("tag_name")?),
            );
        }
    }
    Ok(out)
}

/// Deletes the records `ids` (forwarded). Not synced to disk at once: a record whose deletion a
/// machine crash loses is forwarded again, and the cloud stores a point again in its place.
pub(crate) async fn delete(conn: &mut AnyConnection, sqlite: bool, ids: &[i64]) -> Result<()> {
    for chunk in ids.chunks(IDS_PER_STATEMENT) {
        let sql = format!(
            "DELETE FROM telemetry_outbox WHERE id IN ({})",
            placeholders(sqlite, chunk.len())
        );
        bind_ids(sqlx::query(sqlx::AssertSqlSafe(sql)), chunk)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Deletes the records acknowledged before `before` (ms): what the raw retention would have
/// deleted on the agent too. Returns (records, points) deleted.
pub(crate) async fn expire(conn: &mut AnyConnection, before: i64) -> Result<(u64, u64)> {
    let row = sqlx::query(
        "SELECT CAST(COUNT(*) AS BIGINT) AS n, CAST(COALESCE(SUM(points), 0) AS BIGINT) AS p \
         FROM telemetry_outbox WHERE created_at < $1",
    )
    .bind(before)
    .fetch_one(&mut *conn)
    .await?;
    let (n, p): (i64, i64) = (row.try_get("n")?, row.try_get("p")?);
    if n > 0 {
        sqlx::query("DELETE FROM telemetry_outbox WHERE created_at < $1")
            .bind(before)
            .execute(&mut *conn)
            .await?;
    }
    Ok((n as u64, p as u64))
}

/// What the outbox holds.
pub(crate) async fn count(pool: &sqlx::AnyPool) -> Result<OutboxCount> {
    let row = sqlx::query(
        "SELECT CAST(COUNT(*) AS BIGINT) AS n, CAST(COALESCE(SUM(points), 0) AS BIGINT) AS p, \
         CAST(COALESCE(MAX(id), 0) AS BIGINT) AS last FROM telemetry_outbox",
    )
    .fetch_one(pool)
    .await?;
    Ok(OutboxCount {
        records: row.try_get::<i64, _>("n")? as u64,
        points: row.try_get::<i64, _>("p")? as u64,
        newest_id: row.try_get("last")?,
    })
}
