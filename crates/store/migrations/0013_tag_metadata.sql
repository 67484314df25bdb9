-- What a tag measures: its unit, description and engineering range, read from the device
-- (OPC UA EngineeringUnits and EURange) or set by a person (`source` = 'user', which the
-- device's values never overwrite).
CREATE TABLE tag_metadata (
    org_id TEXT NOT NULL,
    asset_id TEXT NOT NULL,
    tag_name TEXT NOT NULL,
    unit TEXT,
    description TEXT,
    eu_low DOUBLE PRECISION,
    eu_high DOUBLE PRECISION,
    source TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (org_id, asset_id, tag_name)
);
