-- Minute rollups packed per series and UTC hour (crates/tsdb/src/rollups.rs): the sealer moves
-- a closed hour's minute rows of `telemetry_rollup` (level 1) into one compressed row here, and
-- ingest that touches a packed hour moves it back first. For a series and hour the minutes are
-- either rows there or one row here, never both. `minutes` is how many minute buckets it holds.
CREATE TABLE telemetry_minute_block (
    series_id BIGINT NOT NULL,
    hour BIGINT NOT NULL,
    minutes BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (series_id, hour)
);
