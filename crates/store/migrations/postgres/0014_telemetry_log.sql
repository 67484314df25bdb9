-- The telemetry log (crates/tsdb/src/log.rs): ingest appends each acknowledged batch here whole
-- (its points with their series ids, sorted by series and time), durable before the answer;
-- the flusher (crates/tsdb/src/flush.rs) writes them into blocks and rollups in the background,
-- many batches at once, and deletes the rows it wrote in the same transaction. Reads flush first,
-- so they see every acknowledged point; a restart flushes what was left.
CREATE TABLE telemetry_log (
    id BIGSERIAL PRIMARY KEY,
    org_id TEXT NOT NULL,
    points BIGINT NOT NULL,
    data BYTEA NOT NULL
);
