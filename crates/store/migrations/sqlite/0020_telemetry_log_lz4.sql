-- PostgreSQL only (its TOAST compression of the telemetry log's records); nothing on SQLite.
SELECT 1;
