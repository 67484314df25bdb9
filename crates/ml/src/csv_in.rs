//! Reading an uploaded CSV (docs/api.md, "Upload"): the header, each column's type (declared,
//! or inferred from the first [`SAMPLE_ROWS`] rows), every row checked against the types and
//! packed into chunks as it is read. The caller stores each chunk as it comes and keeps none
//! of them unless the whole file was good: a refused file names its bad lines.

use std::io::Read;

use plantd_model::Validator;
use plantd_model::ml::{Column, ColumnType, check_columns};

use crate::cell;
use crate::chunk::Chunk;

/// Rows a column's type is inferred from, as DuckDB's sniffer samples.
pub const SAMPLE_ROWS: usize = 1000;
/// Bad lines a refusal names; the rest are counted.
pub const MAX_NAMED_LINES: usize = 100;

/// A chunk of rows ready to store.
pub struct EncodedChunk {
    pub rows: u32,
    /// The CSV bytes its rows came from.
    pub source_bytes: u64,
    pub data: Vec<u8>,
}

/// What a good file held.
#[derive(Debug)]
pub struct CsvOutcome {
    pub columns: Vec<Column>,
    pub rows: u64,
    pub bytes: u64,
}

/// Why a file is refused.
#[derive(Debug, PartialEq)]
pub enum CsvRefusal {
    /// The header is missing, malformed, or not the dataset's columns.
    Header(String),
    /// Lines that are not rows of the columns: the first [`MAX_NAMED_LINES`], and how many.
    Lines { first: Vec<String>, total: u64 },
    /// The file could not be read (the upload broke off).
    Read(String),
    /// The receiver of the chunks went away.
    Stopped,
}

struct Rows<'a> {
    types: Vec<ColumnType>,
    names: Vec<String>,
    chunk: Chunk,
    chunk_start: u64,
    rows: u64,
    bad: Vec<String>,
    bad_total: u64,
    emit: &'a mut dyn FnMut(EncodedChunk) -> bool,
}

impl Rows<'_> {
    fn bad_line(&mut self, line: String) {
        self.bad_total += 1;
        if self.bad.len() < MAX_NAMED_LINES {
            self.bad.push(line);
        }
    }

    fn row(&mut self, record: &csv::StringRecord, line: u64) {
        if record.len() != self.types.len() {
            self.bad_line(format!(
                "line {line}: {} fields where the header has {}",
                record.len(),
                self.types.len()
            ));
            return;
        }
        let mut cells = Vec::with_capacity(self.types.len());
        let mut good = true;
        for (i, field) in record.iter().enumerate() {
            match cell::parse(field, self.types[i]) {
                Ok(c) => cells.push(c),
                Err(why) => {
                    good = false;
                    let shown: String = field.chars().take(40).collect();
                    self.bad_line(format!(
                        "line {line}: column '{}': '{shown}' {why}",
                        self.names[i]
                    ));
                    break;
                }
            }
        }
        if good && self.bad_total == 0 {
            self.chunk.push_row(cells);
            self.rows += 1;
        }
    }

    fn flush(&mut self, position: u64) -> Result<(), CsvRefusal> {
        if self.chunk.rows() == 0 || self.bad_total > 0 {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.chunk, Chunk::new(&self.types));
        let encoded = EncodedChunk {
            rows: chunk.rows() as u32,
            source_bytes: position - self.chunk_start,
            data: chunk.encode(),
        };
        self.chunk_start = position;
        if (self.emit)(encoded) {
            Ok(())
        } else {
            Err(CsvRefusal::Stopped)
        }
    }
}

fn read_error(e: csv::Error, line: u64) -> Result<String, CsvRefusal> {
    match e.kind() {
        csv::ErrorKind::Utf8 { .. } => Ok(format!("line {line}: is not UTF-8 text")),
        csv::ErrorKind::Io(io) => Err(CsvRefusal::Read(io.to_string())),
        _ => Ok(format!("line {line}: {e}")),
    }
}

/// Reads a CSV file: with `expected` columns, the header must name them in order; without,
/// the types are inferred. Each full chunk is handed to `emit` (which answers false to stop).
pub fn read_csv(
    input: impl Read,
    expected: Option<&[Column]>,
    emit: &mut dyn FnMut(EncodedChunk) -> bool,
) -> Result<CsvOutcome, CsvRefusal> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(input);
    let mut record = csv::StringRecord::new();
    let header: Vec<String> = loop {
        match rdr.read_record(&mut record) {
            Ok(true) => {}
            Ok(false) => {
                return Err(CsvRefusal::Header(
                    "the file is empty: the first line must be the header".into(),
                ));
            }
            Err(e) => {
                let why = read_error(e, 1)?;
                return Err(CsvRefusal::Header(format!(
                    "the header does not read: {why}"
                )));
            }
        }
        if record.iter().all(|f| f.trim().is_empty()) {
            continue;
        }
        break record
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let f = if i == 0 {
                    f.trim_start_matches('\u{feff}')
                } else {
                    f
                };
                f.trim().to_string()
            })
            .collect();
    };
    if let Some(cols) = expected {
        let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
        if header != names {
            return Err(CsvRefusal::Header(format!(
                "the header must name the dataset's columns in order: {}; the file's header is: {}",
                names.join(","),
                header.join(",")
            )));
        }
    }
    // Lines before the first data row, read ahead to infer the types.
    let mut sample: Vec<(csv::StringRecord, u64, u64)> = Vec::new();
    let mut early_errors: Vec<String> = Vec::new();
    if expected.is_none() {
        while sample.len() < SAMPLE_ROWS {
            let line = rdr.position().line();
            match rdr.read_record(&mut record) {
                Ok(true) => sample.push((record.clone(), line, rdr.position().byte())),
                Ok(false) => break,
                Err(e) => early_errors.push(read_error(e, line)?),
            }
        }
    }
    let columns: Vec<Column> = match expected {
        Some(c) => c.to_vec(),
        None => header
            .iter()
            .enumerate()
            .map(|(i, name)| Column {
                name: name.clone(),
                column_type: cell::infer(sample.iter().filter_map(move |(r, _, _)| r.get(i))),
            })
            .collect(),
    };
    let mut v = Validator::new();
    check_columns(&mut v, "header", &columns);
    if let Err(errors) = v.finish() {
        return Err(CsvRefusal::Header(
            errors
                .iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect::<Vec<_>>()
                .join("; "),
        ));
    }
    let types: Vec<ColumnType> = columns.iter().map(|c| c.column_type).collect();
    let start = sample
        .first()
        .and_then(|(r, _, _)| r.position())
        .map_or_else(|| rdr.position().byte(), |p| p.byte());
    let mut rows = Rows {
        chunk: Chunk::new(&types),
        names: columns.iter().map(|c| c.name.clone()).collect(),
        types,
        chunk_start: start,
        rows: 0,
        bad: Vec::new(),
        bad_total: 0,
        emit,
    };
    for line in early_errors {
        rows.bad_line(line);
    }
    for (r, line, end) in &sample {
        if r.len() <= 1 && r.iter().all(|f| f.trim().is_empty()) {
            continue;
        }
        rows.row(r, *line);
        if rows.chunk.is_full() {
            rows.flush(*end)?;
        }
    }
    drop(sample);
    loop {
        let line = rdr.position().line();
        match rdr.read_record(&mut record) {
            Ok(true) => {
                if record.len() <= 1 && record.iter().all(|f| f.trim().is_empty()) {
                    continue;
                }
                rows.row(&record, line);
                if rows.chunk.is_full() {
                    rows.flush(rdr.position().byte())?;
                }
            }
            Ok(false) => break,
            Err(e) => {
                let why = read_error(e, line)?;
                rows.bad_line(why);
            }
        }
    }
    let end = rdr.position().byte();
    if rows.bad_total > 0 {
        return Err(CsvRefusal::Lines {
            first: rows.bad,
            total: rows.bad_total,
        });
    }
    rows.flush(end)?;
    Ok(CsvOutcome {
        columns,
        rows: rows.rows,
        bytes: end,
    })
}

/// Reads the labels of an import in CSV (`row_id,label`): `(line, row id text, label)`.
pub fn read_label_csv(input: impl Read) -> Result<Vec<(u64, String, String)>, CsvRefusal> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(input);
    let mut out = Vec::new();
    let mut bad = Vec::new();
    let mut header = true;
    for (i, rec) in rdr.records().enumerate() {
        let line = rec
            .as_ref()
            .ok()
            .and_then(|r| r.position())
            .map_or(i as u64 + 1, |p| p.line());
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                bad.push(read_error(e, line)?);
                continue;
            }
        };
        if rec.len() <= 1 && rec.iter().all(|f| f.trim().is_empty()) {
            continue;
        }
        let fields: Vec<&str> = rec.iter().map(str::trim).collect();
        if header {
            header = false;
            let first = fields.first().map(|f| f.trim_start_matches('\u{feff}'));
            if first != Some("row_id") || fields.get(1) != Some(&"label") || fields.len() != 2 {
                return Err(CsvRefusal::Header(
                    "the first line must be the header row_id,label".into(),
                ));
            }
            continue;
        }
        if fields.len() != 2 {
            bad.push(format!(
                "line {line}: {} fields where the header has 2",
                fields.len()
            ));
            continue;
        }
        out.push((line, fields[0].to_string(), fields[1].to_string()));
    }
    if header {
        return Err(CsvRefusal::Header(
            "the file is empty: the first line must be the header row_id,label".into(),
        ));
    }
    if !bad.is_empty() {
        let total = bad.len() as u64;
        bad.truncate(MAX_NAMED_LINES);
        return Err(CsvRefusal::Lines { first: bad, total });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::Cell;

    fn read(
        text: &str,
        expected: Option<&[Column]>,
    ) -> (Result<CsvOutcome, CsvRefusal>, Vec<Chunk>) {
        let mut chunks = Vec::new();
        let out = read_csv(text.as_bytes(), expected, &mut |c| {
            chunks.push(Chunk::decode(&c.data).unwrap());
            true
        });
        (out, chunks)
    }

    #[test]
    fn infers_types_and_reads_quoted_fields() {
        let (out, chunks) = read(
            "\u{feff}id, temp ,ok,when,note\n1,20.5,true,2026-01-01T00:00:00Z,\"a, b\"\n\n2,,false,,\"say \"\"hi\"\"\"\n",
            None,
        );
        let out = out.unwrap();
        let types: Vec<_> = out
            .columns
            .iter()
            .map(|c| (c.name.as_str(), c.column_type))
            .collect();
        assert_eq!(
            types,
            [
                ("id", ColumnType::Number),
                ("temp", ColumnType::Number),
                ("ok", ColumnType::Boolean),
                ("when", ColumnType::Timestamp),
                ("note", ColumnType::String)
            ]
        );
        assert_eq!(out.rows, 2);
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].row(1)[4], Cell::Text("say \"hi\"".into()));
        assert_eq!(chunks[0].row(1)[1], Cell::Null);
    }

    #[test]
    fn names_every_bad_line_and_keeps_nothing() {
        let mut text = String::from("a,b\n");
        for i in 0..1500 {
            text.push_str(&format!("{i},{i}\n"));
        }
        text.push_str("x,1\n1\n2,3\n");
        let (out, _) = read(&text, None);
        match out.unwrap_err() {
            CsvRefusal::Lines { first, total } => {
                assert_eq!(total, 2);
                assert_eq!(first[0], "line 1502: column 'a': 'x' is not a number");
                assert_eq!(first[1], "line 1503: 1 fields where the header has 2");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn checks_the_header_against_the_columns() {
        let cols = vec![Column {
            name: "a".into(),
            column_type: ColumnType::Number,
        }];
        let (out, _) = read("b\n1\n", Some(&cols));
        assert!(matches!(out, Err(CsvRefusal::Header(_))));
        let (out, _) = read("a\n1\nz\n", Some(&cols));
        assert!(matches!(out, Err(CsvRefusal::Lines { total: 1, .. })));
        let (out, chunks) = read("a\n1\n2\n", Some(&cols));
        assert_eq!(out.unwrap().rows, 2);
        assert_eq!(chunks[0].rows(), 2);
    }

    #[test]
    fn chunks_count_their_source_bytes() {
        let mut text = String::from("a\n");
        for i in 0..10_000 {
            text.push_str(&format!("{i}\n"));
        }
        let mut sizes = Vec::new();
        let out = read_csv(text.as_bytes(), None, &mut |c| {
            sizes.push((c.rows, c.source_bytes));
            true
        })
        .unwrap();
        assert_eq!(out.rows, 10_000);
        assert_eq!(sizes.iter().map(|s| s.0 as u64).sum::<u64>(), 10_000);
        assert_eq!(
            sizes.iter().map(|s| s.1).sum::<u64>(),
            text.len() as u64 - 2
        );
        assert_eq!(out.bytes, text.len() as u64);
    }
}
