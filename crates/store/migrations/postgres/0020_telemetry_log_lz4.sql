-- A telemetry log record (tens to hundreds of kilobytes: a batch's points, plain) is stored out of
-- line by TOAST, which compresses it first. PostgreSQL's default compression (pglz) took about
-- 11 ms of the server's CPU for a 10,000-point record, a core at 850,000 points/s; LZ4 takes
-- about 1 ms and stores it smaller. PostgreSQL built without LZ4 (or before 14) keeps the record
-- uncompressed instead, which is still cheaper than pglz (the record lives until the next flush).
DO $$
BEGIN
    ALTER TABLE telemetry_log ALTER COLUMN data SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN
    ALTER TABLE telemetry_log ALTER COLUMN data SET STORAGE EXTERNAL;
END
$$;
