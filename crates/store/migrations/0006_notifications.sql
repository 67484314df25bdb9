-- Notifications (issue 6): organization notification settings, the outbox of alert events
-- (written in the transaction that changes the alert) and the email/Slack delivery log.
CREATE TABLE notification_settings (
    org_id TEXT PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
    email_recipients TEXT NOT NULL,
    slack_webhook_url TEXT,
    updated_at BIGINT NOT NULL
);

CREATE TABLE alert_events (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    alert_id TEXT NOT NULL,
    rule_id TEXT NOT NULL,
    event TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX alert_events_order ON alert_events (created_at, id);

CREATE TABLE notifications (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    alert_id TEXT NOT NULL,
    event TEXT NOT NULL,
    channel TEXT NOT NULL,
    target TEXT NOT NULL,
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    last_error TEXT,
    next_attempt_at BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    delivered_at BIGINT
);
CREATE INDEX notifications_due ON notifications (status, next_attempt_at);
CREATE INDEX notifications_log ON notifications (org_id, created_at, id);
