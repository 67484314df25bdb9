//! The compressed column chunks a dataset's rows are stored in (docs/api.md, "Storage"): up to
//! [`CHUNK_ROWS`] rows, per column the bitmap of non-empty cells and the values (numbers with
//! their bytes transposed, so that similar readings compress), the whole deflated. A chunk is
//! written once and never changed; versions share chunks.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use plantd_model::ml::ColumnType;

use crate::cell::Cell;

/// The most rows of a chunk.
pub const CHUNK_ROWS: usize = 4096;
const FORMAT: u8 = 1;

/// A column's cells in a chunk.
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnData {
    Number(Vec<Option<f64>>),
    Bool(Vec<Option<bool>>),
    Text(Vec<Option<String>>),
}

impl ColumnData {
    fn new(t: ColumnType) -> Self {
        match t {
            ColumnType::Number => ColumnData::Number(Vec::new()),
            ColumnType::Boolean => ColumnData::Bool(Vec::new()),
            ColumnType::Timestamp | ColumnType::String => ColumnData::Text(Vec::new()),
        }
    }

    fn push(&mut self, cell: Cell) {
        match (self, cell) {
            (ColumnData::Number(v), Cell::Number(n)) => v.push(Some(n)),
            (ColumnData::Bool(v), Cell::Bool(b)) => v.push(Some(b)),
            (ColumnData::Text(v), Cell::Text(s)) => v.push(Some(s)),
            (ColumnData::Number(v), _) => v.push(None),
            (ColumnData::Bool(v), _) => v.push(None),
            (ColumnData::Text(v), _) => v.push(None),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ColumnData::Number(v) => v.len(),
            ColumnData::Bool(v) => v.len(),
            ColumnData::Text(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn cell(&self, row: usize) -> Cell {
        match self {
            ColumnData::Number(v) => v[row].map_or(Cell::Null, Cell::Number),
            ColumnData::Bool(v) => v[row].map_or(Cell::Null, Cell::Bool),
            ColumnData::Text(v) => v[row].clone().map_or(Cell::Null, Cell::Text),
        }
    }

    fn present(&self, row: usize) -> bool {
        match self {
            ColumnData::Number(v) => v[row].is_some(),
            ColumnData::Bool(v) => v[row].is_some(),
            ColumnData::Text(v) => v[row].is_some(),
        }
    }

    /// Whether two cells are the same value (numbers by their bits, so `-0` differs from `0`).
    fn same(&self, row: usize, other: &ColumnData, other_row: usize) -> bool {
        match (self, other) {
            (ColumnData::Number(a), ColumnData::Number(b)) => {
                a[row].map(f64::to_bits) == b[other_row].map(f64::to_bits)
            }
            (ColumnData::Bool(a), ColumnData::Bool(b)) => a[row] == b[other_row],
            (ColumnData::Text(a), ColumnData::Text(b)) => a[row] == b[other_row],
            _ => false,
        }
    }
}

/// Rows in columns.
#[derive(Clone, Debug, PartialEq)]
pub struct Chunk {
    pub columns: Vec<ColumnData>,
}

/// A stored chunk that does not decode: the database was changed by something else.
#[derive(Debug)]
pub struct ChunkError(pub String);

impl std::fmt::Display for ChunkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a dataset chunk does not decode: {}", self.0)
    }
}

impl std::error::Error for ChunkError {}

impl Chunk {
    pub fn new(types: &[ColumnType]) -> Self {
        Self {
            columns: types.iter().map(|t| ColumnData::new(*t)).collect(),
        }
    }

    /// Appends a row (one cell per column, of its column's type or null).
    pub fn push_row(&mut self, cells: Vec<Cell>) {
        for (c, cell) in self.columns.iter_mut().zip(cells) {
            c.push(cell);
        }
    }

    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, ColumnData::len)
    }

    pub fn is_full(&self) -> bool {
        self.rows() >= CHUNK_ROWS
    }

    pub fn row(&self, row: usize) -> Vec<Cell> {
        self.columns.iter().map(|c| c.cell(row)).collect()
    }

    /// Whether row `row` of this chunk and row `other_row` of `other` hold the same values.
    pub fn same_row(&self, row: usize, other: &Chunk, other_row: usize) -> bool {
        self.columns.len() == other.columns.len()
            && self
                .columns
                .iter()
                .zip(&other.columns)
                .all(|(a, b)| a.same(row, b, other_row))
    }

    /// The chunk's stored bytes.
    pub fn encode(&self) -> Vec<u8> {
        let rows = self.rows();
        let mut raw = Vec::with_capacity(rows * self.columns.len() * 9 + 16);
        raw.push(FORMAT);
        raw.extend_from_slice(&(rows as u32).to_le_bytes());
        raw.extend_from_slice(&(self.columns.len() as u32).to_le_bytes());
        for c in &self.columns {
            let mut bitmap = vec![0u8; rows.div_ceil(8)];
            for (r, byte) in (0..rows).map(|r| (r, r / 8)) {
                if c.present(r) {
                    bitmap[byte] |= 1 << (r % 8);
                }
            }
            match c {
                ColumnData::Number(v) => {
                    raw.push(0);
                    raw.extend_from_slice(&bitmap);
                    let values: Vec<[u8; 8]> =
                        v.iter().flatten().map(|n| n.to_le_bytes()).collect();
                    // Byte planes: the high bytes of similar readings repeat and deflate well.
                    for plane in 0..8 {
                        raw.extend(values.iter().map(|b| b[plane]));
                    }
                }
                ColumnData::Bool(v) => {
                    raw.push(1);
                    raw.extend_from_slice(&bitmap);
                    raw.extend(v.iter().flatten().map(|b| u8::from(*b)));
                }
                ColumnData::Text(v) => {
                    raw.push(2);
                    raw.extend_from_slice(&bitmap);
                    for s in v.iter().flatten() {
                        raw.extend_from_slice(&(s.len() as u32).to_le_bytes());
                        raw.extend_from_slice(s.as_bytes());
                    }
                }
            }
        }
        let mut out = DeflateEncoder::new(Vec::with_capacity(raw.len() / 2), Compression::fast());
        // Writing into a Vec cannot fail.
        let _ = out.write_all(&raw);
        out.finish().unwrap_or_default()
    }

    pub fn decode(data: &[u8]) -> Result<Chunk, ChunkError> {
        let mut raw = Vec::with_capacity(data.len() * 3);
        DeflateDecoder::new(data)
            .read_to_end(&mut raw)
            .map_err(|e| ChunkError(e.to_string()))?;
        let mut r = Reader { raw: &raw, at: 0 };
        if r.take(1)?[0] != FORMAT {
            return Err(ChunkError("unknown format".into()));
        }
        let rows = r.u32()? as usize;
        let ncols = r.u32()? as usize;
        let mut columns = Vec::with_capacity(ncols);
        for _ in 0..ncols {
            let kind = r.take(1)?[0];
            let bitmap = r.take(rows.div_ceil(8))?.to_vec();
            let present = |row: usize| bitmap[row / 8] & (1 << (row % 8)) != 0;
            let n = (0..rows).filter(|x| present(*x)).count();
            columns.push(match kind {
                0 => {
                    let planes = r.take(n * 8)?;
                    let mut values = (0..n).map(|i| {
                        let mut b = [0u8; 8];
                        for (p, byte) in b.iter_mut().enumerate() {
                            *byte = planes[p * n + i];
                        }
                        f64::from_le_bytes(b)
                    });
                    ColumnData::Number(
                        (0..rows)
                            .map(|row| if present(row) { values.next() } else { None })
                            .collect(),
                    )
                }
                1 => {
                    let mut values = r.take(n)?.iter().map(|b| *b != 0);
                    ColumnData::Bool(
                        (0..rows)
                            .map(|row| if present(row) { values.next() } else { None })
                            .collect(),
                    )
                }
                2 => {
                    let mut v = Vec::with_capacity(rows);
                    for row in 0..rows {
                        v.push(if present(row) {
                            let len = r.u32()? as usize;
                            let s = std::str::from_utf8(r.take(len)?)
                                .map_err(|e| ChunkError(e.to_string()))?;
                            Some(s.to_string())
                        } else {
                            None
                        });
                    }
                    ColumnData::Text(v)
                }
                k => return Err(ChunkError(format!("unknown column kind {k}"))),
            });
        }
        Ok(Chunk { columns })
    }
}

struct Reader<'a> {
    raw: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ChunkError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.raw.len())
            .ok_or_else(|| ChunkError("cut short".into()))?;
        let out = &self.raw[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, ChunkError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_type_with_nulls() {
        let types = [
            ColumnType::Number,
            ColumnType::Boolean,
            ColumnType::Timestamp,
            ColumnType::String,
        ];
        let mut c = Chunk::new(&types);
        for i in 0..1000 {
            let null = i % 7 == 0;
            c.push_row(vec![
                if null {
                    Cell::Null
                } else {
                    Cell::Number(i as f64 * 0.5 - 3.0)
                },
                if i % 5 == 0 {
                    Cell::Null
                } else {
                    Cell::Bool(i % 2 == 0)
                },
                Cell::Text(format!("2026-01-01T00:00:{:02}Z", i % 60)),
                if i % 3 == 0 {
                    Cell::Null
                } else {
                    Cell::Text(format!("é{i}\"x,y"))
                },
            ]);
        }
        let bytes = c.encode();
        let back = Chunk::decode(&bytes).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.rows(), 1000);
        assert!(back.same_row(3, &c, 3));
        assert!(!back.same_row(3, &c, 4));
        assert!(Chunk::decode(&bytes[..bytes.len() / 2]).is_err());
    }
}
