-- Dashboards (issue 14): a name, a description and the layout (widgets, variables) as JSON.
CREATE TABLE dashboards (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    layout TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX dashboards_org ON dashboards (org_id, name, id);
