-- Assets provisioned on an edge agent (issue 34; docs/api.md, "Edge provisioning"): each one
-- is the data source named by its asset id; this keeps the asset as it was described (type,
-- protocol, host, port, sensors, SPEC 2.17 settings), how it came (csv, yaml, qr, usb, cloud,
-- clone), and goes with its data source.
CREATE TABLE provisioned_assets (
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    asset_id TEXT NOT NULL,
    data_source_id TEXT NOT NULL REFERENCES data_sources(id) ON DELETE CASCADE,
    asset TEXT NOT NULL,
    method TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (org_id, asset_id)
);
CREATE INDEX provisioned_assets_source ON provisioned_assets (data_source_id);

-- The mount directory an organization's USB auto-import watches on this instance (resumed at
-- start); this instance's own, not copied with the organization's data.
CREATE TABLE usb_watches (
    org_id TEXT PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    started_at BIGINT NOT NULL
);
