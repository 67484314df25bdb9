//! The store's error: what a repository refuses (not found, a conflict) and what failed
//! beneath it, with its source kept.

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("invalid database URL: {0}")]
    InvalidUrl(String),
    #[error("database error")]
    Database(#[from] sqlx::Error),
    #[error("stored JSON is unreadable")]
    Json(#[from] serde_json::Error),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A background writer of this store (the audit writer) stopped or failed.
    #[error("{0}")]
    Writer(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// Maps a unique-constraint violation to [`StoreError::Conflict`] with `message`.
pub(crate) fn conflict_on_unique(e: sqlx::Error, message: &str) -> StoreError {
    match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            StoreError::Conflict(message.to_string())
        }
        _ => StoreError::Database(e),
    }
}
