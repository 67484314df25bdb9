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
    /// A stored block could not be encoded or read back (the codec's error kept).
    #[error("telemetry block: {context}")]
    Block {
        context: &'static str,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

pub type Result<T> = std::result::Result<T, TsdbError>;
