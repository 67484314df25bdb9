-- Alerts without a rule (POST /v1/alerts): rule, data source, tag, value and condition become
-- optional; every alert gets a title (its rule's name for rule alerts), an optional message, a
-- source, tags, its own notification channels and an optional deduplication key. SQLite cannot
-- drop NOT NULL in place, so the tables are rebuilt (PostgreSQL alters them).
CREATE TABLE alerts_v7 (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    rule_id TEXT,
    rule_name TEXT,
    severity TEXT NOT NULL,
    status TEXT NOT NULL,
    data_source_id TEXT,
    asset_id TEXT NOT NULL,
    tag_name TEXT,
    value DOUBLE PRECISION,
    threshold DOUBLE PRECISION,
    operator TEXT,
    triggered_at BIGINT NOT NULL,
    acknowledged_at BIGINT,
    acknowledged_by TEXT,
    note TEXT,
    resolved_at BIGINT,
    resolved_by TEXT,
    title TEXT NOT NULL,
    message TEXT,
    source TEXT NOT NULL DEFAULT 'rule',
    tags TEXT NOT NULL DEFAULT '[]',
    notifications TEXT NOT NULL DEFAULT '[]',
    dedup_key TEXT
);
INSERT INTO alerts_v7 (id, org_id, rule_id, rule_name, severity, status, data_source_id, asset_id,
    tag_name, value, threshold, operator, triggered_at, acknowledged_at, acknowledged_by, note,
    resolved_at, resolved_by, title)
SELECT id, org_id, rule_id, rule_name, severity, status, data_source_id, asset_id, tag_name,
    value, threshold, operator, triggered_at, acknowledged_at, acknowledged_by, note, resolved_at,
    resolved_by, rule_name
FROM alerts;
DROP TABLE alerts;
ALTER TABLE alerts_v7 RENAME TO alerts;
-- At most one open (active or acknowledged) alert per rule and asset.
CREATE UNIQUE INDEX alerts_one_open ON alerts (rule_id, asset_id) WHERE status <> 'resolved';
CREATE INDEX alerts_org_time ON alerts (org_id, triggered_at, id);
-- At most one open alert per deduplication key of an organization.
CREATE UNIQUE INDEX alerts_open_dedup ON alerts (org_id, dedup_key)
    WHERE status <> 'resolved' AND dedup_key IS NOT NULL;

CREATE TABLE alert_events_v7 (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    alert_id TEXT NOT NULL,
    rule_id TEXT,
    event TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
INSERT INTO alert_events_v7 SELECT id, org_id, alert_id, rule_id, event, payload, created_at
FROM alert_events;
DROP TABLE alert_events;
ALTER TABLE alert_events_v7 RENAME TO alert_events;
CREATE INDEX alert_events_order ON alert_events (created_at, id);
