-- The secondary region's copy of an organization's resident data (issue 33, active-passive;
-- docs/api.md, "Regions"): on the primary region's instance the copy it last sent (`sent`), on
-- the secondary's the copy it holds (`held`), when it was taken and what it held.
CREATE TABLE region_standby (
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    -- sent: the secondary region; held: the primary region it came from
    region TEXT NOT NULL,
    copied_at BIGINT NOT NULL,
    points BIGINT NOT NULL,
    rows_copied BIGINT NOT NULL,
    PRIMARY KEY (org_id, role)
);
