//! Column profiles (docs/api.md, "Quality"): per column the non-empty and empty cells, the
//! exact number of distinct values, min and max, mean and sample standard deviation (numbers),
//! ten equal-width bins (numbers) or the ten most frequent values (the other types).

use std::collections::HashMap;

use plantd_model::ml::{Bin, Column, ColumnProfile, ColumnType, TopValue};
use serde_json::Value;

use crate::chunk::{Chunk, ColumnData};

const BINS: usize = 10;
const TOP: usize = 10;

enum Acc {
    Numbers(Vec<f64>),
    Texts(HashMap<String, u64>),
}

/// Profiles columns from the chunks fed to it in any order.
pub struct Profiler {
    columns: Vec<Column>,
    acc: Vec<Acc>,
    nulls: Vec<u64>,
}

impl Profiler {
    pub fn new(columns: &[Column]) -> Self {
        Self {
            columns: columns.to_vec(),
            acc: columns
                .iter()
                .map(|c| match c.column_type {
                    ColumnType::Number => Acc::Numbers(Vec::new()),
                    _ => Acc::Texts(HashMap::new()),
                })
                .collect(),
            nulls: vec![0; columns.len()],
        }
    }

    pub fn add(&mut self, chunk: &Chunk) {
        for (i, data) in chunk.columns.iter().enumerate().take(self.acc.len()) {
            match (&mut self.acc[i], data) {
                (Acc::Numbers(v), ColumnData::Number(cells)) => {
                    v.extend(cells.iter().flatten());
                    self.nulls[i] += cells.iter().filter(|c| c.is_none()).count() as u64;
                }
                (Acc::Texts(m), ColumnData::Bool(cells)) => {
                    for c in cells {
                        match c {
                            Some(b) => *m.entry(b.to_string()).or_default() += 1,
                            None => self.nulls[i] += 1,
                        }
                    }
                }
                (Acc::Texts(m), ColumnData::Text(cells)) => {
                    for c in cells {
                        match c {
                            Some(s) => match m.get_mut(s.as_str()) {
                                Some(n) => *n += 1,
                                None => {
                                    m.insert(s.clone(), 1);
                                }
                            },
                            None => self.nulls[i] += 1,
                        }
                    }
                }
                _ => self.nulls[i] += data.len() as u64,
            }
        }
    }

    pub fn finish(self) -> Vec<ColumnProfile> {
        self.columns
            .into_iter()
            .zip(self.acc)
            .zip(self.nulls)
            .map(|((column, acc), nulls)| match acc {
                Acc::Numbers(v) => numbers(column, v, nulls),
                Acc::Texts(m) => texts(column, m, nulls),
            })
            .collect()
    }
}

fn json(n: f64) -> Value {
    serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
}

fn numbers(column: Column, mut v: Vec<f64>, nulls: u64) -> ColumnProfile {
    v.sort_unstable_by(f64::total_cmp);
    let n = v.len();
    let distinct = v.windows(2).filter(|w| w[0] != w[1]).count() as u64 + u64::from(n > 0);
    let mean = (n > 0).then(|| v.iter().sum::<f64>() / n as f64);
    let std = mean
        .filter(|_| n > 1)
        .map(|m| (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64).sqrt());
    let mut histogram = Vec::new();
    if let (Some(&lo), Some(&hi)) = (v.first(), v.last()) {
        if lo == hi {
            histogram.push(Bin {
                start: lo,
                end: hi,
                count: n as u64,
            });
        } else {
            let width = (hi - lo) / BINS as f64;
            let mut counts = [0u64; BINS];
            for x in &v {
                let b = (((x - lo) / width) as usize).min(BINS - 1);
                counts[b] += 1;
            }
            histogram = counts
                .iter()
                .enumerate()
                .map(|(i, c)| Bin {
                    start: lo + width * i as f64,
                    end: if i == BINS - 1 {
                        hi
                    } else {
                        lo + width * (i + 1) as f64
                    },
                    count: *c,
                })
                .collect();
        }
    }
    ColumnProfile {
        name: column.name,
        column_type: column.column_type,
        count: n as u64,
        nulls,
        distinct,
        min: v.first().map(|x| json(*x)),
        max: v.last().map(|x| json(*x)),
        mean,
        std,
        histogram,
        top_values: Vec::new(),
    }
}

fn texts(column: Column, m: HashMap<String, u64>, nulls: u64) -> ColumnProfile {
    let count = m.values().sum();
    let (min, max) = if column.column_type == ColumnType::Timestamp {
        (
            m.keys().min().map(|s| Value::String(s.clone())),
            m.keys().max().map(|s| Value::String(s.clone())),
        )
    } else {
        (None, None)
    };
    let distinct = m.len() as u64;
    let mut top: Vec<(String, u64)> = m.into_iter().collect();
    top.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    top.truncate(TOP);
    ColumnProfile {
        name: column.name,
        column_type: column.column_type,
        count,
        nulls,
        distinct,
        min,
        max,
        mean: None,
        std: None,
        histogram: Vec::new(),
        top_values: top
            .into_iter()
            .map(|(value, count)| TopValue { value, count })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::Cell;

    #[test]
    fn profiles_numbers_and_text() {
        let columns = vec![
            Column {
                name: "x".into(),
                column_type: ColumnType::Number,
            },
            Column {
                name: "s".into(),
                column_type: ColumnType::String,
            },
        ];
        let mut chunk = Chunk::new(&[ColumnType::Number, ColumnType::String]);
        for (x, s) in [
            (Some(1.0), "a"),
            (Some(2.0), "b"),
            (None, "a"),
            (Some(2.0), ""),
            (Some(5.0), "a"),
        ] {
            chunk.push_row(vec![
                x.map_or(Cell::Null, Cell::Number),
                if s.is_empty() {
                    Cell::Null
                } else {
                    Cell::Text(s.into())
                },
            ]);
        }
        let mut p = Profiler::new(&columns);
        p.add(&chunk);
        let out = p.finish();
        assert_eq!((out[0].count, out[0].nulls, out[0].distinct), (4, 1, 3));
        assert_eq!(out[0].mean, Some(2.5));
        assert!((out[0].std.unwrap() - 1.7320508075688772).abs() < 1e-12);
        assert_eq!(out[0].histogram.len(), 10);
        assert_eq!(out[0].histogram.iter().map(|b| b.count).sum::<u64>(), 4);
        assert_eq!(out[0].histogram[9].count, 1);
        assert_eq!((out[1].count, out[1].nulls, out[1].distinct), (4, 1, 2));
        assert_eq!(
            out[1].top_values[0],
            TopValue {
                value: "a".into(),
                count: 3
            }
        );
    }
}
