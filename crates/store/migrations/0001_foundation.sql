-- Foundation: organizations, users, memberships, API keys and their usage, audit, data sources.
-- Timestamps are Unix milliseconds (BIGINT) so one SQL text serves SQLite and PostgreSQL.
CREATE TABLE organizations (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    tier TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    password_hash TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE memberships (
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    status TEXT NOT NULL,
    joined_at BIGINT NOT NULL,
    PRIMARY KEY (org_id, user_id)
);

CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id TEXT,
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    key_hash TEXT NOT NULL UNIQUE,
    scopes TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    last_used_at BIGINT,
    revoked_at BIGINT
);
CREATE INDEX api_keys_org ON api_keys (org_id, created_at, id);

CREATE TABLE api_key_usage (
    key_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    day TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    requests BIGINT NOT NULL,
    PRIMARY KEY (key_id, day, endpoint)
);
CREATE INDEX api_key_usage_org_day ON api_key_usage (org_id, day);

CREATE TABLE audit_logs (
    id TEXT PRIMARY KEY,
    org_id TEXT,
    ts BIGINT NOT NULL,
    actor_type TEXT NOT NULL,
    actor_id TEXT,
    user_id TEXT,
    category TEXT NOT NULL,
    event_type TEXT NOT NULL,
    severity TEXT NOT NULL,
    outcome TEXT NOT NULL,
    resource_type TEXT NOT NULL,
    resource_id TEXT,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    status_code INTEGER NOT NULL,
    error_code TEXT,
    client_ip TEXT,
    user_agent TEXT,
    request_id TEXT NOT NULL
);
CREATE INDEX audit_logs_org_ts ON audit_logs (org_id, ts, id);

CREATE TABLE data_sources (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    status TEXT NOT NULL,
    tag_count BIGINT NOT NULL,
    config TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (org_id, name)
);
CREATE INDEX data_sources_org ON data_sources (org_id, created_at, id);
