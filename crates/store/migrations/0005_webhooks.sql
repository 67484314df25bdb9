-- Webhooks (issue 6): subscriptions to events, and the log of their deliveries.
CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    secret TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX webhooks_org ON webhooks (org_id, created_at, id);

CREATE TABLE webhook_deliveries (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    webhook_id TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    event TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    last_status_code BIGINT,
    last_error TEXT,
    next_attempt_at BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    delivered_at BIGINT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (webhook_id, created_at, id);
