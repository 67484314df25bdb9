-- Region migrations (issue 33; docs/api.md, "Regions"): an organization's move of its resident
-- data to another region, kept by the instance of its (source) region. At most one scheduled or
-- running migration per organization.
CREATE TABLE region_migrations (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    source_region TEXT NOT NULL,
    target_region TEXT NOT NULL,
    -- scheduled, running, completed, failed
    status TEXT NOT NULL,
    migration_time BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    finished_at BIGINT,
    -- 0 to 100
    progress BIGINT NOT NULL DEFAULT 0,
    error TEXT,
    -- JSON: the rows and checksum of each table copied, and the points
    verified TEXT,
    -- completed: when the source's copy is deleted, and when it was
    delete_after BIGINT,
    source_deleted_at BIGINT
);
CREATE INDEX region_migrations_org ON region_migrations (org_id, created_at);
CREATE INDEX region_migrations_status ON region_migrations (status, migration_time);
CREATE UNIQUE INDEX region_migrations_active ON region_migrations (org_id)
    WHERE status IN ('scheduled', 'running');
