-- Regions (issue 33): an organization's primary region and strict residency, and the outbox of
-- replicated records. A trigger queues every change of a replicated record (organization
-- settings, user credentials, role definitions, API key metadata) in the transaction that makes
-- it, so a committed change is published once; while the replication applier writes a change
-- that came from another region its transaction holds the row of `replication_applying` (no
-- other transaction sees it), and nothing is queued again. Nothing is queued while
-- `replication_config.publish` is 0 (no NATS).
ALTER TABLE organizations ADD COLUMN primary_region TEXT;
ALTER TABLE organizations ADD COLUMN data_residency_enabled INTEGER NOT NULL DEFAULT 0;

CREATE TABLE replication_config (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    publish INTEGER NOT NULL
);
INSERT INTO replication_config (id, publish) VALUES (1, 0);

CREATE TABLE replication_applying (id INTEGER PRIMARY KEY);

CREATE TABLE replication_outbox (
    seq BIGSERIAL PRIMARY KEY,
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

CREATE FUNCTION plantd_replicate() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    k TEXT;
BEGIN
    IF (SELECT publish FROM replication_config) <> 1
        OR EXISTS (SELECT 1 FROM replication_applying) THEN
        RETURN NULL;
    END IF;
    IF TG_ARGV[0] = 'membership' THEN
        IF TG_OP = 'DELETE' THEN k := OLD.org_id || '/' || OLD.user_id;
        ELSE k := NEW.org_id || '/' || NEW.user_id; END IF;
    ELSE
        IF TG_OP = 'DELETE' THEN k := OLD.id; ELSE k := NEW.id; END IF;
    END IF;
    INSERT INTO replication_outbox (kind, record_key) VALUES (TG_ARGV[0], k);
    RETURN NULL;
END
$$;

CREATE TRIGGER replicate_organizations AFTER INSERT OR UPDATE OR DELETE ON organizations
    FOR EACH ROW EXECUTE FUNCTION plantd_replicate('organization');
CREATE TRIGGER replicate_users AFTER INSERT OR UPDATE OF email, name, password_hash OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION plantd_replicate('user');
CREATE TRIGGER replicate_memberships AFTER INSERT OR UPDATE OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION plantd_replicate('membership');
-- Not on last_used_at: using a key is not a change of its metadata.
CREATE TRIGGER replicate_api_keys AFTER INSERT OR UPDATE OF org_id, user_id, name, prefix, key_hash, scopes, expires_at, revoked_at OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION plantd_replicate('api_key');
