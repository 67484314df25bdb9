//! Spike (issue 32): DataFusion over 10,000,000 telemetry rows in Arrow memory (no table
//! provider yet), the three benchmark queries, and the refusals of DDL and bad SQL.
use datafusion::arrow::array::{Float64Array, Int16Array, StringArray, TimestampMillisecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::prelude::*;
use std::sync::Arc;
use std::time::Instant;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> datafusion::error::Result<()> {
    let series = 1000usize;
    let per = 10_000usize;
    let t0 = 1_767_225_600_000i64;
    let schema = Arc::new(Schema::new(vec![
        Field::new("timestamp", DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), false),
        Field::new("asset_id", DataType::Utf8, false),
        Field::new("tag_name", DataType::Utf8, false),
        Field::new("value", DataType::Float64, false),
        Field::new("quality", DataType::Int16, false),
    ]));
    let mut parts = vec![Vec::new(), Vec::new()];
    let started = Instant::now();
    for s in 0..series {
        let asset = format!("A{}", s / 10);
        let tag = format!("T{}", s % 10);
        let ts: Vec<i64> = (0..per).map(|i| t0 + i as i64 * 60_000).collect();
        let v: Vec<f64> = (0..per).map(|i| ((s * 7 + i) % 1000) as f64 / 10.0).collect();
        let batch = RecordBatch::try_new(schema.clone(), vec![
            Arc::new(TimestampMillisecondArray::from(ts).with_timezone("UTC")),
            Arc::new(StringArray::from(vec![asset.as_str(); per])),
            Arc::new(StringArray::from(vec![tag.as_str(); per])),
            Arc::new(Float64Array::from(v)),
            Arc::new(Int16Array::from(vec![0i16; per])),
        ])?;
        parts[s % 2].push(batch);
    }
    println!("built 10M rows in {:?}", started.elapsed());
    let config = SessionConfig::new().with_target_partitions(2);
    let ctx = SessionContext::new_with_config(config);
    ctx.register_table("telemetry", Arc::new(MemTable::try_new(schema, parts)?))?;
    let queries = [
        ("a hourly avg one tag one day", "SELECT date_trunc('hour', timestamp) AS h, avg(value) FROM telemetry WHERE asset_id = 'A7' AND tag_name = 'T3' AND timestamp >= TIMESTAMP '2026-01-02T00:00:00Z' AND timestamp < TIMESTAMP '2026-01-03T00:00:00Z' GROUP BY h ORDER BY h"),
        ("b full scan filter on value", "SELECT count(*), avg(value) FROM telemetry WHERE value > 99.5"),
        ("c group by asset", "SELECT asset_id, avg(value), max(value), count(*) FROM telemetry GROUP BY asset_id ORDER BY asset_id"),
    ];
    let opts = datafusion::execution::context::SQLOptions::new().with_allow_ddl(false).with_allow_dml(false).with_allow_statements(false);
    for (name, q) in queries {
        let mut times = Vec::new();
        let mut rows = 0;
        for _ in 0..7 {
            let t = Instant::now();
            let df = ctx.sql_with_options(q, opts).await?;
            let out = df.collect().await?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            rows = out.iter().map(|b| b.num_rows()).sum::<usize>();
        }
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!("{name}: p50 {:.1} ms (rows {rows})", times[3]);
    }
    for bad in ["CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'", "SELEC 1", "SELECT * FROM nope"] {
        match ctx.sql_with_options(bad, opts).await { Ok(_) => println!("{bad}: accepted!"), Err(e) => println!("{bad}: {e}") }
    }
    Ok(())
}
