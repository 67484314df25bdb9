-- The edge agent's outbox (issue 34; crates/tsdb/src/outbox.rs): while the agent is enrolled
-- with a cloud, ingest appends each acknowledged batch here too, in the same transaction as the
-- telemetry log (the same record), so a point stored on the agent is a point still to forward.
-- The uplink publishes the records to the cloud over MQTT (QoS 1) and deletes each one when the
-- cloud has acknowledged it; while the cloud is unreachable they wait here, oldest first.
CREATE TABLE telemetry_outbox (
    id BIGSERIAL PRIMARY KEY,
    org_id TEXT NOT NULL,
    points BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    data BYTEA NOT NULL
);

-- What the agent's cloud said of its regions at enrollment ({"current": region, "known":
-- [{region, api, mqtt, latency_ms}]}): where the agent forwards, and where it fails over to
-- (docs/api.md, "Edge regions"), known even when it starts while its cloud is down.
ALTER TABLE edge_uplink ADD COLUMN regions TEXT NOT NULL DEFAULT '{}';
