-- Telemetry: a series per (organization, asset, tag), raw points, and rollups per level
-- (1 = minute, 2 = hour, 3 = day) recomputed exactly on ingest.
CREATE TABLE telemetry_series (
    id BIGSERIAL PRIMARY KEY,
    org_id TEXT NOT NULL,
    asset_id TEXT NOT NULL,
    tag_name TEXT NOT NULL,
    data_source_id TEXT,
    UNIQUE (org_id, asset_id, tag_name)
);
CREATE INDEX telemetry_series_source ON telemetry_series (org_id, data_source_id);

CREATE TABLE telemetry_raw (
    series_id BIGINT NOT NULL,
    ts BIGINT NOT NULL,
    value DOUBLE PRECISION NOT NULL,
    quality SMALLINT NOT NULL,
    PRIMARY KEY (series_id, ts)
);

CREATE TABLE telemetry_rollup (
    level SMALLINT NOT NULL,
    series_id BIGINT NOT NULL,
    bucket BIGINT NOT NULL,
    count BIGINT NOT NULL,
    sum DOUBLE PRECISION NOT NULL,
    min DOUBLE PRECISION NOT NULL,
    max DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (level, series_id, bucket)
);
