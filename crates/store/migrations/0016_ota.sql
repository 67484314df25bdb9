-- OTA (issue 29): firmware packages (the file is content-addressed on disk by its SHA-256, the
-- row holds its facts and the signature of its manifest), deployments with their phases, and
-- each target device's state in a deployment.
CREATE TABLE ota_packages (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    device_type TEXT NOT NULL,
    release_notes TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    -- hex; the file's name in the package directory
    sha256 TEXT NOT NULL,
    -- base64 of the Ed25519 signature of the manifest (docs/api.md, "OTA")
    signature TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    released_at BIGINT,
    UNIQUE (org_id, name, version)
);
CREATE INDEX ota_packages_org ON ota_packages (org_id, created_at, id);
CREATE INDEX ota_packages_sha ON ota_packages (sha256);

CREATE TABLE ota_deployments (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    package_id TEXT NOT NULL REFERENCES ota_packages(id),
    -- JSON: the targets and the phases as requested
    targets TEXT NOT NULL,
    strategy TEXT NOT NULL,
    phases TEXT NOT NULL,
    rollback_enabled INTEGER NOT NULL,
    include_new_devices INTEGER NOT NULL,
    device_timeout_seconds BIGINT NOT NULL,
    status TEXT NOT NULL,
    -- index into phases of the phase under way (or last done)
    current_phase INTEGER NOT NULL,
    -- when a scheduled deployment starts, or a paused one resumes by itself
    resume_at BIGINT,
    reason TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    started_at BIGINT,
    finished_at BIGINT
);
CREATE INDEX ota_deployments_org ON ota_deployments (org_id, created_at, id);
CREATE INDEX ota_deployments_status ON ota_deployments (status);

CREATE TABLE ota_deployment_devices (
    deployment_id TEXT NOT NULL REFERENCES ota_deployments(id) ON DELETE CASCADE,
    device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    org_id TEXT NOT NULL,
    phase INTEGER NOT NULL,
    state TEXT NOT NULL,
    message TEXT,
    progress_percent INTEGER,
    -- the last command sent for this deployment (update, then rollback)
    command_id TEXT,
    notified_at BIGINT,
    -- a device not done by then has failed (device_timeout_seconds after it was told)
    deadline_at BIGINT,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (deployment_id, device_id)
);
CREATE INDEX ota_deployment_devices_device ON ota_deployment_devices (device_id, state);
CREATE INDEX ota_deployment_devices_deadline ON ota_deployment_devices (deadline_at);

-- a device presents its password as a bearer token to download packages
CREATE INDEX devices_password ON devices (mqtt_password_hash);
