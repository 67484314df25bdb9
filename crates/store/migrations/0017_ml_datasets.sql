-- ML datasets (issue 30; docs/api.md, "ML datasets"). A dataset's rows live in compressed
-- chunks (0018); what a version holds is told by generations: the working copy is generation
-- `generation`, version k froze generation k, and a chunk's membership or a row's label holds
-- in the generations [from_gen, to_gen) (to_gen NULL: still in the working copy). Nothing is
-- copied for a version.
CREATE TABLE ml_datasets (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    -- JSON [{name, type}]; [] until the first upload
    columns TEXT NOT NULL,
    -- JSON: {"type": "upload"} or {"type": "telemetry", ...}
    source TEXT NOT NULL,
    generation BIGINT NOT NULL,
    -- the rows changed since the newest version (the next version is a major one)
    rows_changed INTEGER NOT NULL,
    current_version TEXT,
    -- JSON of the last validation result
    last_validation TEXT,
    created_at BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (org_id, name)
);
CREATE INDEX ml_datasets_org ON ml_datasets (org_id, created_at, id);

CREATE TABLE ml_label_classes (
    id TEXT PRIMARY KEY,
    dataset_id TEXT NOT NULL REFERENCES ml_datasets(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    color TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (dataset_id, name)
);

-- A row's label state while it holds; a row without an open record is unlabelled.
CREATE TABLE ml_dataset_labels (
    dataset_id TEXT NOT NULL REFERENCES ml_datasets(id) ON DELETE CASCADE,
    row_id BIGINT NOT NULL,
    from_gen BIGINT NOT NULL,
    to_gen BIGINT,
    label_class_id TEXT,
    skipped INTEGER NOT NULL,
    flagged INTEGER NOT NULL,
    PRIMARY KEY (dataset_id, row_id, from_gen)
);
CREATE INDEX ml_dataset_labels_open ON ml_dataset_labels (dataset_id, to_gen, label_class_id);

CREATE TABLE ml_dataset_versions (
    dataset_id TEXT NOT NULL REFERENCES ml_datasets(id) ON DELETE CASCADE,
    version TEXT NOT NULL,
    generation BIGINT NOT NULL,
    notes TEXT NOT NULL,
    row_count BIGINT NOT NULL,
    file_size_bytes BIGINT NOT NULL,
    label_count BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    PRIMARY KEY (dataset_id, version)
);

CREATE TABLE ml_validation_rules (
    id TEXT PRIMARY KEY,
    dataset_id TEXT NOT NULL REFERENCES ml_datasets(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    rule_type TEXT NOT NULL,
    column_name TEXT NOT NULL,
    -- JSON
    config TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX ml_validation_rules_dataset ON ml_validation_rules (dataset_id, created_at);
