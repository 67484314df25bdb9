-- BI (issue 32; docs/api.md, "BI"): each organization's configuration (no row: the defaults),
-- saved queries, the history of executions and row-level-security rules.
CREATE TABLE bi_config (
    org_id TEXT PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
    -- JSON object of the configuration's fields
    config TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE bi_saved_queries (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    sql_text TEXT NOT NULL,
    database_name TEXT NOT NULL,
    description TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX bi_saved_queries_org ON bi_saved_queries (org_id, name, id);

CREATE TABLE bi_query_runs (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    executed_by TEXT NOT NULL,
    sql_text TEXT NOT NULL,
    database_name TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    row_count BIGINT NOT NULL,
    execution_time_ms BIGINT NOT NULL,
    executed_at BIGINT NOT NULL
);
CREATE INDEX bi_query_runs_org ON bi_query_runs (org_id, executed_at, id);
CREATE INDEX bi_query_runs_user ON bi_query_runs (org_id, executed_by, executed_at, id);

CREATE TABLE bi_rls_rules (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    table_name TEXT NOT NULL,
    clause TEXT NOT NULL,
    -- JSON array of role names
    roles TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX bi_rls_rules_org ON bi_rls_rules (org_id, name, id);
