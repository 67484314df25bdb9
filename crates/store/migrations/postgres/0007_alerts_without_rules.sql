-- Alerts without a rule (POST /v1/alerts): rule, data source, tag, value and condition become
-- optional; every alert gets a title (its rule's name for rule alerts), an optional message, a
-- source, tags, its own notification channels and an optional deduplication key.
ALTER TABLE alerts
    ALTER COLUMN rule_id DROP NOT NULL,
    ALTER COLUMN rule_name DROP NOT NULL,
    ALTER COLUMN data_source_id DROP NOT NULL,
    ALTER COLUMN tag_name DROP NOT NULL,
    ALTER COLUMN value DROP NOT NULL,
    ALTER COLUMN threshold DROP NOT NULL,
    ALTER COLUMN operator DROP NOT NULL,
    ADD COLUMN title TEXT,
    ADD COLUMN message TEXT,
    ADD COLUMN source TEXT NOT NULL DEFAULT 'rule',
    ADD COLUMN tags TEXT NOT NULL DEFAULT '[]',
    ADD COLUMN notifications TEXT NOT NULL DEFAULT '[]',
    ADD COLUMN dedup_key TEXT;
UPDATE alerts SET title = rule_name;
ALTER TABLE alerts ALTER COLUMN title SET NOT NULL;
-- At most one open alert per deduplication key of an organization.
CREATE UNIQUE INDEX alerts_open_dedup ON alerts (org_id, dedup_key)
    WHERE status <> 'resolved' AND dedup_key IS NOT NULL;
ALTER TABLE alert_events ALTER COLUMN rule_id DROP NOT NULL;
