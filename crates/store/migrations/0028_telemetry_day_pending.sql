-- The days of sparse series are compacted into one block a day (crates/tsdb/src/compact.rs).
-- The sealer marks a series' day here when it seals one of its small windows (at most 2,500
-- points); the compaction pass reads only the marked days. Every day already holding such
-- sealed blocks is marked, so that a database written before this is compacted too.
CREATE TABLE telemetry_day_pending (
    series_id BIGINT NOT NULL,
    day BIGINT NOT NULL,
    PRIMARY KEY (series_id, day)
);
INSERT INTO telemetry_day_pending (series_id, day)
    SELECT DISTINCT series_id, (start_ts / 86400000) * 86400000 FROM telemetry_block WHERE sealed = 1 AND count <= 2500;
