-- The chunks of ML datasets' rows (crates/ml/src/chunk.rs): written once, never changed. A
-- chunk being uploaded carries its upload's id and belongs to no generation until the whole
-- file was good; then spans make it part of the working copy.
CREATE TABLE ml_dataset_chunks (
    id TEXT PRIMARY KEY,
    dataset_id TEXT NOT NULL REFERENCES ml_datasets(id) ON DELETE CASCADE,
    upload_id TEXT,
    -- order within its upload
    seq BIGINT NOT NULL,
    row_count BIGINT NOT NULL,
    source_bytes BIGINT NOT NULL,
    size_bytes BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX ml_dataset_chunks_upload ON ml_dataset_chunks (upload_id, seq);
CREATE INDEX ml_dataset_chunks_dataset ON ml_dataset_chunks (dataset_id);

-- A chunk's rows, numbered from first_row_id, in the generations [from_gen, to_gen).
CREATE TABLE ml_dataset_spans (
    dataset_id TEXT NOT NULL REFERENCES ml_datasets(id) ON DELETE CASCADE,
    chunk_id TEXT NOT NULL REFERENCES ml_dataset_chunks(id) ON DELETE CASCADE,
    first_row_id BIGINT NOT NULL,
    from_gen BIGINT NOT NULL,
    to_gen BIGINT,
    PRIMARY KEY (dataset_id, chunk_id, from_gen)
);
CREATE INDEX ml_dataset_spans_rows ON ml_dataset_spans (dataset_id, first_row_id);
CREATE INDEX ml_dataset_spans_chunk ON ml_dataset_spans (chunk_id);
