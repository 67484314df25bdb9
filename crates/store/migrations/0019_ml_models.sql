-- ML training jobs and models (issue 31; docs/api.md, "ML training and models"). A job is
-- claimed by one node (queued -> running, conditional), beats while it runs (updated_at), and
-- is failed by any node when its beat stops (a crash). A model keeps its forest in the
-- download format (JSON), read only to score or to download.
CREATE TABLE ml_training_jobs (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    dataset_id TEXT NOT NULL REFERENCES ml_datasets(id) ON DELETE CASCADE,
    dataset_version TEXT,
    -- JSON arrays and objects
    features TEXT NOT NULL,
    algorithm TEXT NOT NULL,
    hyperparameters TEXT NOT NULL,
    status TEXT NOT NULL,
    progress DOUBLE PRECISION NOT NULL,
    cancel_requested INTEGER NOT NULL,
    error TEXT,
    metrics TEXT,
    model_id TEXT,
    created_at BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    started_at BIGINT,
    finished_at BIGINT,
    updated_at BIGINT NOT NULL
);
CREATE INDEX ml_training_jobs_org ON ml_training_jobs (org_id, created_at, id);
CREATE INDEX ml_training_jobs_status ON ml_training_jobs (status, created_at);

CREATE TABLE ml_models (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    training_job_id TEXT NOT NULL,
    dataset_id TEXT NOT NULL,
    dataset_version TEXT,
    algorithm TEXT NOT NULL,
    features TEXT NOT NULL,
    hyperparameters TEXT NOT NULL,
    metrics TEXT NOT NULL,
    threshold DOUBLE PRECISION NOT NULL,
    status TEXT NOT NULL,
    -- JSON of the deployment while deployed
    deployment TEXT,
    forest TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX ml_models_org ON ml_models (org_id, created_at, id);
CREATE INDEX ml_models_deployed ON ml_models (status);
