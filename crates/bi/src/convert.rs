//! Between plantd's values and Arrow: a batch of points or records for a scan, and a result
//! batch's rows as JSON for the answer.

use datafusion::arrow::array::AsArray;
use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, BooleanBuilder, DictionaryArray, Float64Array, Float64Builder,
    Int8Array, Int64Builder, RecordBatch, RecordBatchOptions, StringArray, StringBuilder,
    StringViewArray, StringViewBuilder, TimestampMillisecondArray, TimestampMillisecondBuilder,
    UInt32Array,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{
    DataType, Float64Type, Int8Type, Int64Type, SchemaRef, TimeUnit, TimestampMillisecondType,
    UInt64Type,
};
use datafusion::error::{DataFusionError, Result};
use plantd_model::Timestamp;
use serde_json::Value;
use std::sync::Arc;

use crate::source::{PointColumns, PointFields, RollupRow};
use crate::tables::Kind;

/// The qualities' names, indexed by their code.
const QUALITIES: [&str; 3] = ["good", "uncertain", "bad"];

/// Raw points of many series, gathered into one batch of the columns a scan needs (indices
/// into the telemetry table's columns: timestamp, asset_id, tag_name, value, quality): a
/// column no one reads is never built.
pub(crate) struct PointRows {
    needed: Vec<usize>,
    rows: usize,
    ts: Vec<i64>,
    /// Each series' rows as (row count, asset, tag).
    runs: Vec<Run>,
    values: Vec<f64>,
    quality: Vec<i8>,
}

/// The telemetry table's columns by index (`tables.rs` declares them in this order).
const TIMESTAMP: usize = 0;
const ASSET_ID: usize = 1;
const TAG_NAME: usize = 2;
const VALUE: usize = 3;
const QUALITY: usize = 4;

/// One series' rows in a batch: how many, its asset and its tag.
pub(crate) type Run = (usize, Arc<str>, Arc<str>);

/// Appends `more` to `into`, moving it when `into` is empty (a read's points: no copy).
fn append<T: Copy>(into: &mut Vec<T>, more: Vec<T>) {
    if into.is_empty() {
        *into = more;
    } else {
        into.extend_from_slice(&more);
    }
}

impl PointRows {
    pub(crate) fn new(needed: &[usize]) -> Self {
        Self {
            needed: needed.to_vec(),
            rows: 0,
            ts: Vec::new(),
            runs: Vec::new(),
            values: Vec::new(),
            quality: Vec::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.rows
    }

    /// The columns a read has to fill for this batch.
    pub(crate) fn fields(&self) -> PointFields {
        PointFields {
            timestamps: self.needed.contains(&TIMESTAMP),
            values: self.needed.contains(&VALUE),
            quality: self.needed.contains(&QUALITY),
        }
    }

    /// Appends the points of a read (`runs`: each series' rows, in order), its columns moved
    /// in when the batch is empty.
    pub(crate) fn push(&mut self, runs: Vec<Run>, p: PointColumns) {
        let n: usize = runs.iter().map(|r| r.0).sum();
        self.rows += n;
        if self.needed.contains(&TIMESTAMP) {
            append(&mut self.ts, p.ts);
        }
        if self.needed.contains(&ASSET_ID) || self.needed.contains(&TAG_NAME) {
            self.runs.extend(runs);
        }
        if self.needed.contains(&VALUE) {
            append(&mut self.values, p.values);
        }
        if self.needed.contains(&QUALITY) {
            self.quality
                .extend(p.quality.iter().map(|q| (*q).clamp(0, 2) as i8));
        }
    }

    /// The batch, of `schema` (the telemetry table's columns at the needed indices).
    pub(crate) fn finish(self, schema: &SchemaRef) -> Result<RecordBatch> {
        let Self {
            needed,
            rows,
            ts,
            runs,
            values,
            quality,
        } = self;
        // A name column: each series' name once, repeated by index (views copied, not text).
        let repeated = |name: fn(&Run) -> &str| -> Result<ArrayRef> {
            let names = StringViewArray::from_iter_values(runs.iter().map(name));
            let mut index = Vec::with_capacity(rows);
            for (i, run) in runs.iter().enumerate() {
                index.extend(std::iter::repeat_n(i as u32, run.0));
            }
            Ok(take(&names, &UInt32Array::from(index), None)?)
        };
        let (mut ts, mut values, mut quality) = (Some(ts), Some(values), Some(quality));
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(needed.len());
        for &column in &needed {
            columns.push(match column {
                TIMESTAMP => Arc::new(
                    TimestampMillisecondArray::from(ts.take().unwrap_or_default())
                        .with_timezone("UTC"),
                ),
                ASSET_ID => repeated(|r| &r.1)?,
                TAG_NAME => repeated(|r| &r.2)?,
                VALUE => Arc::new(Float64Array::from(values.take().unwrap_or_default())),
                _ => Arc::new(DictionaryArray::<Int8Type>::try_new(
                    Int8Array::from(quality.take().unwrap_or_default()),
                    Arc::new(StringArray::from(QUALITIES.to_vec())),
                )?),
            });
        }
        Ok(RecordBatch::try_new_with_options(
            schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }
}

/// Rollup buckets as a batch of a rollup table.
pub(crate) fn rollup_batch(schema: &SchemaRef, rows: &[RollupRow]) -> Result<RecordBatch> {
    let texts = |f: fn(&RollupRow) -> &str| {
        Arc::new(StringViewArray::from_iter_values(rows.iter().map(f))) as ArrayRef
    };
    let floats = |f: fn(&RollupRow) -> f64| {
        Arc::new(Float64Array::from_iter_values(rows.iter().map(f))) as ArrayRef
    };
    Ok(RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(
                TimestampMillisecondArray::from_iter_values(rows.iter().map(|r| r.bucket))
                    .with_timezone("UTC"),
            ),
            texts(|r| &r.asset_id),
            texts(|r| &r.tag_name),
            Arc::new(datafusion::arrow::array::Int64Array::from_iter_values(
                rows.iter().map(|r| r.count as i64),
            )),
            floats(|r| r.sum),
            floats(|r| r.min),
            floats(|r| r.max),
            floats(|r| {
                if r.count > 0 {
                    r.sum / r.count as f64
                } else {
                    f64::NAN
                }
            }),
        ],
    )?)
}

/// Records (JSON objects) as a batch of a record table: each column read from the field of
/// its name; a missing field or null is NULL.
pub(crate) fn records_batch(
    schema: &SchemaRef,
    columns: &[(&str, Kind)],
    records: &[Value],
) -> Result<RecordBatch> {
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len());
    for (name, kind) in columns {
        let cells = records
            .iter()
            .map(|r| r.get(*name).filter(|v| !v.is_null()));
        let array: ArrayRef = match kind {
            Kind::Name => {
                let mut b = StringViewBuilder::new();
                for c in cells {
                    b.append_option(c.and_then(Value::as_str));
                }
                Arc::new(b.finish())
            }
            Kind::Text | Kind::Quality => {
                let mut b = StringBuilder::new();
                for c in cells {
                    match c {
                        Some(Value::String(s)) => b.append_value(s),
                        Some(other) => b.append_value(other.to_string()),
                        None => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            Kind::Int => {
                let mut b = Int64Builder::new();
                for c in cells {
                    b.append_option(c.and_then(Value::as_i64));
                }
                Arc::new(b.finish())
            }
            Kind::Float => {
                let mut b = Float64Builder::new();
                for c in cells {
                    b.append_option(c.and_then(Value::as_f64));
                }
                Arc::new(b.finish())
            }
            Kind::Bool => {
                let mut b = BooleanBuilder::new();
                for c in cells {
                    b.append_option(c.and_then(Value::as_bool));
                }
                Arc::new(b.finish())
            }
            Kind::Time => {
                let mut b = TimestampMillisecondBuilder::new().with_timezone("UTC");
                for c in cells {
                    b.append_option(
                        c.and_then(Value::as_str)
                            .and_then(|s| Timestamp::parse(s).ok())
                            .map(Timestamp::millis),
                    );
                }
                Arc::new(b.finish())
            }
        };
        arrays.push(array);
    }
    Ok(RecordBatch::try_new(schema.clone(), arrays)?)
}

/// Keeps the rows of `batch` where `mask` is true (NULL is false).
pub(crate) fn keep(batch: &RecordBatch, mask: &ArrayRef) -> Result<RecordBatch> {
    let mask = mask
        .as_any()
        .downcast_ref::<BooleanArray>()
        .ok_or_else(|| {
            DataFusionError::Plan("a row-level-security clause must be a condition".into())
        })?;
    Ok(datafusion::arrow::compute::filter_record_batch(
        batch, mask,
    )?)
}

/// Appends the rows of `batch` as JSON arrays, one value per column: numbers, booleans,
/// timestamps as RFC 3339 text, NULL (and NaN or infinity) as null, anything else as text.
pub(crate) fn rows_of(batch: &RecordBatch, out: &mut Vec<Vec<Value>>, max: usize) -> Result<()> {
    let n = batch.num_rows().min(max);
    let mut columns: Vec<Vec<Value>> = Vec::with_capacity(batch.num_columns());
    for array in batch.columns() {
        columns.push(values_of(array, n)?);
    }
    for i in 0..n {
        out.push(
            columns
                .iter_mut()
                .map(|c| std::mem::take(&mut c[i]))
                .collect(),
        );
    }
    Ok(())
}

/// The first `n` values of `array`, NULL as null, the others through `value`.
fn each(array: &dyn Array, n: usize, value: impl Fn(usize) -> Value) -> Vec<Value> {
    (0..n)
        .map(|i| {
            if array.is_null(i) {
                Value::Null
            } else {
                value(i)
            }
        })
        .collect()
}

fn values_of(array: &ArrayRef, n: usize) -> Result<Vec<Value>> {
    use DataType::*;
    Ok(match array.data_type() {
        Null => vec![Value::Null; n],
        Boolean => {
            let a = array.as_boolean();
            each(a, n, |i| Value::Bool(a.value(i)))
        }
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 => {
            let a = cast(array, &Int64)?;
            let a = a.as_primitive::<Int64Type>();
            each(a, n, |i| Value::from(a.value(i)))
        }
        UInt64 => {
            let a = array.as_primitive::<UInt64Type>();
            each(a, n, |i| Value::from(a.value(i)))
        }
        Float16 | Float32 | Float64 | Decimal128(_, _) | Decimal256(_, _) => {
            let a = cast(array, &Float64)?;
            let a = a.as_primitive::<Float64Type>();
            each(a, n, |i| {
                serde_json::Number::from_f64(a.value(i)).map_or(Value::Null, Value::Number)
            })
        }
        Timestamp(_, _) | Date32 | Date64 => {
            let a = cast(array, &Timestamp(TimeUnit::Millisecond, None))?;
            let a = a.as_primitive::<TimestampMillisecondType>();
            each(a, n, |i| {
                Value::String(plantd_model::Timestamp::from_millis(a.value(i)).to_rfc3339())
            })
        }
        _ => {
            let a = cast(array, &Utf8)?;
            let a = a.as_string::<i32>();
            each(a, n, |i| Value::String(a.value(i).to_string()))
        }
    })
}
