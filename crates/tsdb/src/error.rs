//! The telemetry store's error, with its source kept.

#[derive(Debug, thiserror::Error)]
pub enum TsdbError {
    #[error("database error")]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Store(#[from] plantd_store::StoreError),
    /// The ingest writer failed a group of batches (the message carries its cause chain) or
    /// stopped before answering.
    #[error("{0}")]
    Writer(String),
    /// A stored block could not be encoded or read back.
    #[error("telemetry block: {0}")]
    Block(String),
}

pub type Result<T> = std::result::Result<T, TsdbError>;
