-- Regions (issue 33): an organization's primary region and strict residency, and the outbox of
-- replicated records. Triggers queue every change of a replicated record (organization
-- settings, user credentials, role definitions, API key metadata) in the transaction that makes
-- it, so a committed change is published once; while the replication applier writes a change
-- that came from another region it holds the row of `replication_applying`, and nothing is
-- queued again. Nothing is queued while `replication_config.publish` is 0 (no NATS).
ALTER TABLE organizations ADD COLUMN primary_region TEXT;
ALTER TABLE organizations ADD COLUMN data_residency_enabled INTEGER NOT NULL DEFAULT 0;

CREATE TABLE replication_config (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    publish INTEGER NOT NULL
);
INSERT INTO replication_config (id, publish) VALUES (1, 0);

CREATE TABLE replication_applying (id INTEGER PRIMARY KEY);

CREATE TABLE replication_outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    record_key TEXT NOT NULL
);

-- The version (publication time, ms, and the publishing region) of the newest change of each
-- record this database holds: a change older than it is not applied (last writer wins).
CREATE TABLE replication_versions (
    kind TEXT NOT NULL,
    record_key TEXT NOT NULL,
    version BIGINT NOT NULL,
    region TEXT NOT NULL,
    PRIMARY KEY (kind, record_key)
);

CREATE TRIGGER replicate_organizations_insert AFTER INSERT ON organizations
WHEN (SELECT publish FROM replication_config) = 1 AND NOT EXISTS (SELECT 1 FROM replication_applying)
BEGIN INSERT INTO replication_outbox (kind, record_key) VALUES ('organization', NEW.id); END;
CREATE TRIGGER replicate_organizations_update AFTER UPDATE ON organizations
WHEN (SELECT publish FROM replication_config) = 1 AND NOT EXISTS (SELECT 1 FROM replication_applying)
BEGIN INSERT INTO replication_outbox (kind, record_key) VALUES ('organization', NEW.id); END;
CREATE TRIGGER replicate_organizations_delete AFTER DELETE ON organizations
WHEN (SELECT publish FROM replication_config) = 1 AND NOT EXISTS (SELECT 1 FROM replication_applying)
BEGIN INSERT INTO replication_outbox (kind, record_key) VALUES ('organization', OLD.id); END;

CREATE TRIGGER replicate_users_insert AFTER INSERT ON users
WHEN (SELECT publish FROM replication_config) = 1 AND NOT EXISTS (SELECT 1 FROM replication_applying)
BEGIN INSERT INTO replication_outbox (kind, record_key) VALUES ('user', NEW.id); END;
CREATE TRIGGER replicate_users_update AFTER UPDATE OF email, name, password_hash ON users
WHEN (SELECT publish FROM replication_config) = 1 AND NOT EXISTS (SELECT 1 FROM replication_applying)
BEGIN INSERT INTO replication_outbox (kind, record_key) VALUES ('user', NEW.id); END;
CREATE TRIGGER replicate_users_delete AFTER DELETE ON users
WHEN (SELECT publish FROM replication_config) = 1 AND NOT EXISTS (SELECT 1 FROM replication_applying)
BEGIN INSERT INTO replication_outbox (kind, record_key) VALUES ('user', OLD.id); END;

CREATE TRIGGER replicate_memberships_insert AFTER INSERT ON memberships
WHEN (SELECT publish FROM replication_config) = 1 AND NOT EXISTS (SELECT 1 FROM replication_applying)
BEGIN INSERT INTO replication_outbox (kind, record_key) VALUES ('membership', NEW.org_id || '/' || NEW.user_id); END;
CREATE TRIGGER replicate_memberships_update AFTER UPDATE ON memberships
WHEN (SELECT publish FROM replication_config) = 1 AND NOT EXISTS (SELECT 1 FROM replication_applying)
BEGIN INSERT INTO replication_outbox (kind, record_key) VALUES ('membership', NEW.org_id || '/' || NEW.user_id); END;
CREATE TRIGGER replicate_memberships_delete AFTER DELETE ON memberships
WHEN (SELECT publish FROM replication_config) = 1 AND NOT EXISTS (SELECT 1 FROM replication_applying)
BEGIN INSERT INTO replication_outbox (kind, record_key) VALUES ('membership', OLD.org_id || '/' || OLD.user_id); END;

-- Not on last_used_at: using a key is not a change of its metadata.
CREATE TRIGGER replicate_api_keys_insert AFTER INSERT ON api_keys
WHEN (SELECT publish FROM replication_config) = 1 AND NOT EXISTS (SELECT 1 FROM replication_applying)
BEGIN INSERT INTO replication_outbox (kind, record_key) VALUES ('api_key', NEW.id); END;
CREATE TRIGGER replicate_api_keys_update AFTER UPDATE OF org_id, user_id, name, prefix, key_hash, scopes, expires_at, revoked_at ON api_keys
WHEN (SELECT publish FROM replication_config) = 1 AND NOT EXISTS (SELECT 1 FROM replication_applying)
BEGIN INSERT INTO replication_outbox (kind, record_key) VALUES ('api_key', NEW.id); END;
CREATE TRIGGER replicate_api_keys_delete AFTER DELETE ON api_keys
WHEN (SELECT publish FROM replication_config) = 1 AND NOT EXISTS (SELECT 1 FROM replication_applying)
BEGIN INSERT INTO replication_outbox (kind, record_key) VALUES ('api_key', OLD.id); END;
