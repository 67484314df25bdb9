//! Identifiers of records.

/// A new identifier: a UUID v7 string. Time-ordered ids keep `ORDER BY created_at, id` stable
/// and index-friendly on both backends.
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}
