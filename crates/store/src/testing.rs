//! Test fixtures of the storage crates (feature `testing`): a fresh, empty database per test,
//! a SQLite file in a temporary directory or, when `PLANTD_TEST_DATABASE_URL` names a
//! PostgreSQL server (CI sets it), a new database on that server.

use std::path::PathBuf;

/// The PostgreSQL server tests use when set (CI sets it); SQLite otherwise.
pub const TEST_DATABASE_ENV: &str = "PLANTD_TEST_DATABASE_URL";

/// The PostgreSQL server of the test run, if there is one.
pub fn postgres_server() -> Option<String> {
    std::env::var(TEST_DATABASE_ENV)
        .ok()
        .filter(|u| !u.is_empty())
}

/// A new, empty database for one test: its URL and the temporary directory to remove (SQLite).
pub async fn fresh_database() -> (String, Option<PathBuf>) {
    match postgres_server() {
        Some(server_url) => (fresh_postgres(&server_url).await, None),
        None => fresh_sqlite(),
    }
}

/// A new SQLite file in a temporary directory: its URL and the directory.
pub fn fresh_sqlite() -> (String, Option<PathBuf>) {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let dir = std::env::temp_dir().join(format!("plantd-test-{id}"));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    (crate::backend::sqlite_url_for(&dir), Some(dir))
}

/// A new database on the PostgreSQL server at `server_url`; returns its URL.
pub async fn fresh_postgres(server_url: &str) -> String {
    use sqlx::Connection;
    let name = format!("plantd_t_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(server_url)
        .await
        .expect("connect to PLANTD_TEST_DATABASE_URL");
    sqlx::Executor::execute(
        &mut conn,
        sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")),
    )
    .await
    .expect("create the test database");
    let _ = conn.close().await;
    replace_database(server_url, &name)
}

/// A database written by plantd at schema version 6 (commit 3648a63, before the migration
/// layout of version 7): an organization with its owner, an invited member and an admin key,
/// two data sources (one with a password), two alert rules, one alert resolved by its
/// condition and one acknowledged, a webhook with failed deliveries, notification settings and
/// notifications, audit records, and 240 points of telemetry (`Pump_01`, `Flow_Rate` and
/// `Vibration_X` every minute from 2026-11-23T12:00Z for two hours). Made by
/// `fixtures/make-v6.sh`.
pub const V6_SQLITE: &str = include_str!("../fixtures/v6-sqlite.sql");
pub const V6_POSTGRES: &str = include_str!("../fixtures/v6-postgres.sql");
/// The admin API key of each fixture (its SHA-256 is stored).
pub const V6_SQLITE_KEY: &str = "pdk_rNNFxTW17GVEjIwWIGvWkjMNx7zQUmLsmIgRd4jJnz8";
pub const V6_POSTGRES_KEY: &str = "pdk_8eupEsdcel07CF1IjKenY6hYjWozmBscuy9BeHwKQru";

/// A fresh database of the test run's backend holding the version-6 fixture, not yet
/// upgraded: its URL, the temporary directory to remove (SQLite) and the fixture's API key.
pub async fn version_6_database() -> (String, Option<PathBuf>, &'static str) {
    use sqlx::Connection;
    match postgres_server() {
        Some(server_url) => {
            let url = fresh_postgres(&server_url).await;
            let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
            sqlx::raw_sql(sqlx::AssertSqlSafe(V6_POSTGRES))
                .execute(&mut conn)
                .await
                .expect("load the version-6 PostgreSQL dump");
            let _ = conn.close().await;
            (url, None, V6_POSTGRES_KEY)
        }
        None => {
            let (url, dir) = fresh_sqlite();
            let mut conn = sqlx::SqliteConnection::connect(&format!("{url}?mode=rwc"))
                .await
                .expect("create the SQLite file");
            sqlx::raw_sql(sqlx::AssertSqlSafe(V6_SQLITE))
                .execute(&mut conn)
                .await
                .expect("load the version-6 SQLite dump");
            let _ = conn.close().await;
            (url, dir, V6_SQLITE_KEY)
        }
    }
}

/// `postgres://u@h:5432/test?x=y` with the database name replaced.
pub fn replace_database(url: &str, name: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..].find('/').map(|i| i + scheme_end);
    let host = path_start.map_or(base, |i| &base[..i]);
    match query {
        Some(q) => format!("{host}/{name}?{q}"),
        None => format!("{host}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn replaces_the_database_name() {
        assert_eq!(
            super::replace_database("postgres://root@127.0.0.1:5432/test", "x"),
            "postgres://root@127.0.0.1:5432/x"
        );
        assert_eq!(
            super::replace_database("postgres://h/test?sslmode=disable", "x"),
            "postgres://h/x?sslmode=disable"
        );
        assert_eq!(
            super::replace_database("postgres://h", "x"),
            "postgres://h/x"
        );
    }
}
