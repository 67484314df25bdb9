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

-- The assets an operator registers in the cloud for an edge device (issue 34): the rows an
-- import takes, as checked; the device pulls them (`POST /v1/provisioning/sync/cloud`).
CREATE TABLE device_assets (
    device_id TEXT PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    assets TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- An edge agent's enrollment with its cloud (`plantd edge --enroll TOKEN --cloud URL`): the
-- cloud's root, the device it is there and its password (the agent's own credential, kept in
-- its own database), what the cloud answered of its MQTT channel.
CREATE TABLE edge_uplink (
    org_id TEXT PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
    cloud_url TEXT NOT NULL,
    device_id TEXT NOT NULL,
    password TEXT NOT NULL,
    mqtt TEXT NOT NULL,
    enrolled_at BIGINT NOT NULL
);
