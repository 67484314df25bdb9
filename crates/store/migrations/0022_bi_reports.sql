-- BI reports (issue 32; docs/api.md, "Reports"): a dashboard mailed on a cron schedule as PDF or
-- CSV, and the history of its runs. `next_run_at` is claimed by compare-and-set, so on several
-- nodes each scheduled run happens once.
CREATE TABLE bi_reports (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    dashboard_id TEXT NOT NULL,
    schedule TEXT NOT NULL,
    format TEXT NOT NULL,
    -- JSON array of email addresses
    recipients TEXT NOT NULL,
    enabled BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    -- the user whose row-level-security rules the report reads under (null: an API key
    -- without a user, under no role's rules)
    run_as TEXT,
    -- the next scheduled run (null while disabled)
    next_run_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX bi_reports_org ON bi_reports (org_id, name, id);
CREATE INDEX bi_reports_due ON bi_reports (next_run_at);

CREATE TABLE bi_report_runs (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    report_id TEXT NOT NULL REFERENCES bi_reports(id) ON DELETE CASCADE,
    -- schedule or manual
    trigger_kind TEXT NOT NULL,
    -- the scheduled time a scheduled run is for
    scheduled_for BIGINT,
    status TEXT NOT NULL,
    error TEXT,
    format TEXT NOT NULL,
    size_bytes BIGINT,
    -- JSON array of email addresses
    recipients TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    finished_at BIGINT
);
CREATE INDEX bi_report_runs_report ON bi_report_runs (report_id, started_at, id);
