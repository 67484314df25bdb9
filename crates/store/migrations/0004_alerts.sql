-- Alerts (issue 6): rules evaluated on ingest, and the alerts they raise.
CREATE TABLE alert_rules (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    severity TEXT NOT NULL,
    data_source_id TEXT NOT NULL,
    asset_id TEXT,
    tag_name TEXT NOT NULL,
    operator TEXT NOT NULL,
    threshold DOUBLE PRECISION NOT NULL,
    duration_seconds BIGINT NOT NULL,
    max_gap_seconds BIGINT NOT NULL,
    notifications TEXT NOT NULL,
    enabled BIGINT NOT NULL,
    auto_resolve BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX alert_rules_org ON alert_rules (org_id, created_at, id);

CREATE TABLE alerts (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    rule_id TEXT NOT NULL,
    rule_name TEXT NOT NULL,
    severity TEXT NOT NULL,
    status TEXT NOT NULL,
    data_source_id TEXT NOT NULL,
    asset_id TEXT NOT NULL,
    tag_name TEXT NOT NULL,
    value DOUBLE PRECISION NOT NULL,
    threshold DOUBLE PRECISION NOT NULL,
    operator TEXT NOT NULL,
    triggered_at BIGINT NOT NULL,
    acknowledged_at BIGINT,
    acknowledged_by TEXT,
    note TEXT,
    resolved_at BIGINT,
    resolved_by TEXT
);
-- At most one open (active or acknowledged) alert per rule and asset.
CREATE UNIQUE INDEX alerts_one_open ON alerts (rule_id, asset_id) WHERE status <> 'resolved';
CREATE INDEX alerts_org_time ON alerts (org_id, triggered_at, id);
