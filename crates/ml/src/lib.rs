//! Machine-learning computation of plantd, without I/O: a dataset's cells and their types
//! (`cell`), the CSV reader that checks a file row by row into chunks (`csv_in`), the compressed
//! column chunks rows are stored in (`chunk`), column profiles (`profile`), validation rules
//! (`rules`), the isolation forest (`forest`) and how its scores are judged (`evaluate`). The application feeds them bytes and stored chunks; they never touch a file, a
//! socket or a database.

pub mod cell;
pub mod chunk;
pub mod csv_in;
pub mod evaluate;
pub mod forest;
pub mod profile;
pub mod rules;

pub use cell::Cell;
pub use chunk::{Chunk, ChunkError};
