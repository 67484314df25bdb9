-- Hour rollups packed per series and UTC day (crates/tsdb/src/rollups.rs, `HOURS`): the sealer
-- moves a day's hour rows of `telemetry_rollup` (level 2) into one compressed row here an hour
-- after the day's end, and ingest that touches a packed day moves it back first. For a series
-- and day the hours are either rows there or one row here, never both. `hours` is how many hour
-- buckets it holds.
CREATE TABLE telemetry_hour_block (
    series_id BIGINT NOT NULL,
    day BIGINT NOT NULL,
    hours BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (series_id, day)
);
