-- Fleet (issue 28): devices with their MQTT credentials, groups, enrollment tokens, commands,
-- and each device's status history. Tags are kept twice: as the record's JSON array, and one
-- row per tag in device_tags for the list's "carries all of these tags" filter.
CREATE TABLE device_groups (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (org_id, name)
);

CREATE TABLE devices (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    serial_number TEXT NOT NULL,
    status TEXT NOT NULL,
    last_seen_at BIGINT,
    firmware_version TEXT,
    tags TEXT NOT NULL,
    metadata TEXT NOT NULL,
    asset_id TEXT NOT NULL,
    -- SHA-256 (hex) of the MQTT password; the MQTT username and client id are the device id
    mqtt_password_hash TEXT NOT NULL,
    -- the last heartbeat's figures (JSON object) and when it came
    heartbeat TEXT,
    heartbeat_at BIGINT,
    enrollment_token_id TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (org_id, serial_number)
);
CREATE INDEX devices_org ON devices (org_id, created_at, id);
CREATE INDEX devices_status ON devices (status, last_seen_at);

CREATE TABLE device_tags (
    org_id TEXT NOT NULL,
    device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    PRIMARY KEY (device_id, tag)
);
CREATE INDEX device_tags_org ON device_tags (org_id, tag);

CREATE TABLE device_group_members (
    org_id TEXT NOT NULL,
    device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    group_id TEXT NOT NULL REFERENCES device_groups(id) ON DELETE CASCADE,
    PRIMARY KEY (device_id, group_id)
);
CREATE INDEX device_group_members_group ON device_group_members (group_id);

CREATE TABLE enrollment_tokens (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    -- SHA-256 (hex) of the secret, and its first characters to tell tokens apart
    token_hash TEXT NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    group_id TEXT REFERENCES device_groups(id) ON DELETE SET NULL,
    tags TEXT NOT NULL,
    expires_at BIGINT,
    max_uses BIGINT,
    uses BIGINT NOT NULL,
    revoked_at BIGINT,
    created_at BIGINT NOT NULL
);
CREATE INDEX enrollment_tokens_org ON enrollment_tokens (org_id, created_at, id);

CREATE TABLE device_commands (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    command TEXT NOT NULL,
    params TEXT NOT NULL,
    status TEXT NOT NULL,
    result TEXT,
    created_at BIGINT NOT NULL,
    sent_at BIGINT,
    completed_at BIGINT,
    expires_at BIGINT NOT NULL
);
CREATE INDEX device_commands_device ON device_commands (device_id, created_at, id);
CREATE INDEX device_commands_open ON device_commands (status, expires_at);

CREATE TABLE device_status_history (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    status TEXT NOT NULL,
    at BIGINT NOT NULL
);
CREATE INDEX device_status_history_device ON device_status_history (device_id, at);
