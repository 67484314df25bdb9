//! Why a query gave no answer.

use datafusion::error::DataFusionError;

use crate::source::SourceError;

#[derive(Debug, thiserror::Error)]
pub enum BiError {
    /// The SQL is not a query the engine can answer (syntax, with its line and column; an
    /// unknown table or column; a statement other than a query; an error while running, such
    /// as a division by zero or the query's memory limit). The message is the engine's.
    #[error("{0}")]
    Query(String),
    /// The query ran longer than the organization's limit and was cancelled.
    #[error("the query ran longer than {0} s and was cancelled")]
    Timeout(u64),
    /// Storage failed under the query.
    #[error("reading storage failed: {0}")]
    Source(String),
}

impl From<DataFusionError> for BiError {
    fn from(e: DataFusionError) -> Self {
        if let DataFusionError::External(inner) = e.find_root()
            && let Some(s) = inner.downcast_ref::<SourceError>()
        {
            return BiError::Source(s.0.clone());
        }
        BiError::Query(message(&e))
    }
}

/// The engine's message without its internal prefixes and backtrace hints.
fn message(e: &DataFusionError) -> String {
    // The parser's own words ("sql parser error: Expected: ..., found: X at Line: 1, Column:
    // 5"), not the wrapper's debug form.
    if let DataFusionError::SQL(parser, _) = e.find_root() {
        return parser.to_string();
    }
    let text = e.find_root().to_string();
    let text = text.trim();
    for prefix in [
        "Error during planning: ",
        "Execution error: ",
        "SQL error: ",
        "Arrow error: ",
    ] {
        if let Some(rest) = text.strip_prefix(prefix) {
            return rest.trim().to_string();
        }
    }
    text.to_string()
}
