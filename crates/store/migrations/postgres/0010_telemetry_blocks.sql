-- Telemetry storage v2: raw points packed into blocks, one series' points within one UTC hour
-- (a window) per block, blocks of a series never overlapping in time. `sealed` = 0 marks the
-- head (blocks written by ingest, merged and compressed in the background). The points of
-- `telemetry_raw` are converted by plantd at start (crates/tsdb/src/upgrade.rs), which then
-- drops that table.
CREATE TABLE telemetry_block (
    series_id BIGINT NOT NULL,
    start_ts BIGINT NOT NULL,
    end_ts BIGINT NOT NULL,
    count BIGINT NOT NULL,
    sealed SMALLINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (series_id, start_ts)
);
CREATE INDEX telemetry_block_head ON telemetry_block (series_id, start_ts) WHERE sealed = 0;
-- Blocks are compressed already: no second compression by TOAST.
ALTER TABLE telemetry_block ALTER COLUMN data SET STORAGE EXTERNAL;
