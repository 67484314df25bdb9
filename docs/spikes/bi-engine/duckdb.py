# Spike (issue 32): the same 10,000,000 rows and queries in DuckDB, in memory, 2 threads.
import duckdb, time
con = duckdb.connect(); con.execute("SET threads=2")
con.execute("""CREATE TABLE telemetry AS SELECT make_timestamptz(1767225600000000 + (r % 10000) * 60000000) AS timestamp,
  'A' || ((r // 10000) // 10)::VARCHAR AS asset_id, 'T' || ((r // 10000) % 10)::VARCHAR AS tag_name,
  (((r // 10000) * 7 + r % 10000) % 1000) / 10.0 AS value, 0::SMALLINT AS quality FROM range(10000000) t(r)""")
qs = [("a", "SELECT date_trunc('hour', timestamp) AS h, avg(value) FROM telemetry WHERE asset_id = 'A7' AND tag_name = 'T3' AND timestamp >= TIMESTAMPTZ '2026-01-02 00:00:00+00' AND timestamp < TIMESTAMPTZ '2026-01-03 00:00:00+00' GROUP BY h ORDER BY h"),
      ("b", "SELECT count(*), avg(value) FROM telemetry WHERE value > 99.5"),
      ("c", "SELECT asset_id, avg(value), max(value), count(*) FROM telemetry GROUP BY asset_id ORDER BY asset_id")]
for n, q in qs:
    ts = []
    for _ in range(7):
        t = time.perf_counter(); r = con.execute(q).fetchall(); ts.append((time.perf_counter()-t)*1000)
    ts.sort(); print(f"duckdb {n}: p50 {ts[3]:.1f} ms rows {len(r)}")
