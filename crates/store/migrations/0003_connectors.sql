-- Connectors (issue 5): a source can be switched off without losing its settings, and tells
-- why it is not connected. (SQLite reads BIGINT with integer affinity, as the INTEGER an
-- earlier, per-backend copy of this file said.)
ALTER TABLE data_sources ADD COLUMN enabled BIGINT NOT NULL DEFAULT 1;
ALTER TABLE data_sources ADD COLUMN last_error TEXT;
