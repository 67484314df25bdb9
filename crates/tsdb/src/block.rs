//! The bytes of a block: the points of one series within one window, as three columns
//! (timestamps, values, quality codes).
//!
//! Two encodings behind a one-byte tag. `PLAIN` keeps the columns as little-endian numbers: the
//! head, written by ingest for a few points of the open window, where compressing would cost more
//! time than it saves bytes. `PCO` compresses each column with pco (the maintained numeric codec of
//! the pcodec project): timestamps by first-order deltas (a regular 1 s series' deltas are one
//! value and cost almost nothing), values by its float modes (multiples of a decimal step, drifts
//! and steps) losslessly, bit for bit. The framing around the columns is only lengths: no
//! compression of our own.

use crate::error::{Result, TsdbError};
use plantd_model::telemetry::Quality;

const PLAIN: u8 = 1;
const PCO: u8 = 2;

/// Points per block below which ingest writes the plain encoding (sealing compresses later).
pub(crate) const COMPRESS_FROM: usize = 256;

/// pco's settings for a column of timestamps (or bucket starts): first-order deltas, without the
/// search for a mode and a delta order that pco's defaults run for every column compressed. A
/// regular series' deltas are one value and cost almost nothing; jittered ones cost what pco's
/// own choice does. Level 4 (of 12): the few hundred points of a window gain nothing from more
/// bins. Half the time of the defaults on a window of 256 points and the same bytes (measured on
/// ramps and noisy values, with and without jitter).
pub(crate) fn times_config() -> pco::ChunkConfig {
    pco::ChunkConfig::default()
        .with_compression_level(4)
        .with_mode_spec(pco::ModeSpec::Classic)
        .with_delta_spec(pco::DeltaSpec::TryConsecutive(1))
}

/// pco's settings for a column of values: its own choice of mode (multiples of a decimal step,
/// drifts) and delta order, at level 6 (of 12): the bytes of the default level 8 on a window,
/// in about two thirds of the time.
pub(crate) fn values_config() -> pco::ChunkConfig {
    pco::ChunkConfig::default().with_compression_level(6)
}

/// A block's points in time order, as columns.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Columns {
    pub ts: Vec<i64>,
    pub values: Vec<f64>,
    pub quality: Vec<i16>,
}

impl Columns {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self {
            ts: Vec::with_capacity(n),
            values: Vec::with_capacity(n),
            quality: Vec::with_capacity(n),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.ts.len()
    }

    /// Room for `n` more points in the columns `want`ed.
    pub(crate) fn reserve(&mut self, want: PointFields, n: usize) {
        if want.timestamps {
            self.ts.reserve(n);
        }
        if want.values {
            self.values.reserve(n);
        }
        if want.quality {
            self.quality.reserve(n);
        }
    }

    pub(crate) fn push(&mut self, ts: i64, value: f64, quality: i16) {
        self.ts.push(ts);
        self.values.push(value);
        self.quality.push(quality);
    }

    /// The points as (timestamp, value, quality).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (i64, f64, Quality)> + '_ {
        (0..self.len()).map(|i| {
            (
                self.ts[i],
                self.values[i],
                Quality::from_code(self.quality[i].into()),
            )
        })
    }

    /// Merges two sorted column sets; where both hold a timestamp, `newer`'s point wins. Returns
    /// the merge and the timestamps `newer` replaced.
    pub(crate) fn merge(older: &Columns, newer: &Columns) -> (Columns, Vec<i64>) {
        let mut out = Columns::with_capacity(older.len() + newer.len());
        let mut replaced = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < older.len() || j < newer.len() {
            let take_newer = match (older.ts.get(i), newer.ts.get(j)) {
                (Some(a), Some(b)) if a == b => {
                    replaced.push(*b);
                    i += 1;
                    true
                }
                (Some(a), Some(b)) => b < a,
                (None, Some(_)) => true,
                _ => false,
            };
            if take_newer {
                out.push(newer.ts[j], newer.values[j], newer.quality[j]);
                j += 1;
            } else {
                out.push(older.ts[i], older.values[i], older.quality[i]);
                i += 1;
            }
        }
        (out, replaced)
    }

    /// Appends `other`, whose points all come after these.
    pub(crate) fn extend(&mut self, other: Columns) {
        self.ts.extend(other.ts);
        self.values.extend(other.values);
        self.quality.extend(other.quality);
    }

    /// Only the points with `lo <= ts < hi`.
    pub(crate) fn retain_range(&mut self, lo: i64, hi: i64) {
        let a = self.ts.partition_point(|t| *t < lo);
        let b = self.ts.partition_point(|t| *t < hi);
        self.ts = self.ts[a..b].to_vec();
        self.values = self.values[a..b].to_vec();
        self.quality = self.quality[a..b].to_vec();
    }
}

/// Encodes sorted columns: plain below [`COMPRESS_FROM`] points unless `compress`.
pub(crate) fn encode(c: &Columns, compress: bool) -> Result<Vec<u8>> {
    let n = c.len();
    let count = u32::try_from(n).map_err(|_| corrupt("a block holds at most 2^32 points"))?;
    if !compress && n < COMPRESS_FROM {
        let mut out = Vec::with_capacity(5 + n * 18);
        out.push(PLAIN);
        out.extend_from_slice(&count.to_le_bytes());
        for t in &c.ts {
            out.extend_from_slice(&t.to_le_bytes());
        }
        for v in &c.values {
            out.extend_from_slice(&v.to_bits().to_le_bytes());
        }
        for q in &c.quality {
            out.extend_from_slice(&q.to_le_bytes());
        }
        return Ok(out);
    }
    let config = values_config();
    let ts = pco::standalone::simple_compress(&c.ts, &times_config()).map_err(codec)?;
    let values = pco::standalone::simple_compress(&c.values, &config).map_err(codec)?;
    // Quality is nearly always "good": an empty column says so.
    let quality = if c.quality.iter().all(|q| *q == 0) {
        Vec::new()
    } else {
        pco::standalone::simple_compress(&c.quality, &config).map_err(codec)?
    };
    let mut out = Vec::with_capacity(17 + ts.len() + values.len() + quality.len());
    out.push(PCO);
    out.extend_from_slice(&count.to_le_bytes());
    for part in [&ts, &values] {
        out.extend_from_slice(&(part.len() as u32).to_le_bytes());
        out.extend_from_slice(part);
    }
    out.extend_from_slice(&quality);
    Ok(out)
}

/// Whether a block's bytes are the compressed encoding.
pub(crate) fn is_compressed(bytes: &[u8]) -> bool {
    bytes.first() == Some(&PCO)
}

/// Decodes a block's bytes (either encoding).
pub(crate) fn decode(bytes: &[u8]) -> Result<Columns> {
    let mut c = Columns::default();
    decode_into(bytes, PointFields::ALL, &mut c)?;
    Ok(c)
}

/// Which columns of a block a read wants (a scan that reads no timestamp decodes none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointFields {
    pub timestamps: bool,
    pub values: bool,
    pub quality: bool,
}

impl PointFields {
    pub const ALL: Self = Self {
        timestamps: true,
        values: true,
        quality: true,
    };
}

/// Appends the `want`ed columns of a block's points to `out` (the others untouched), decoded
/// straight into place; answers how many points the block holds.
pub(crate) fn decode_into(bytes: &[u8], want: PointFields, out: &mut Columns) -> Result<usize> {
    decode_kept(bytes, want, out, None)
}

/// [`decode_into`], the compressed timestamps and values taken from `kept` when it holds them
/// (and kept there when decoded).
pub(crate) fn decode_kept(
    bytes: &[u8],
    want: PointFields,
    out: &mut Columns,
    kept: Option<&crate::decoded::Decoded>,
) -> Result<usize> {
    let mut r = Reader(bytes);
    let tag = r.take(1)?[0];
    let n = r.u32()? as usize;
    match tag {
        PLAIN => {
            if r.0.len() != n * 18 {
                return Err(corrupt("plain block of the wrong length"));
            }
            let (ts, values, quality) = (r.take(n * 8)?, r.take(n * 8)?, r.take(n * 2)?);
            if want.timestamps {
                out.ts
                    .extend(ts.chunks_exact(8).map(|w| i64::from_le_bytes(word(w))));
            }
            if want.values {
                out.values.extend(
                    values
                        .chunks_exact(8)
                        .map(|w| f64::from_bits(u64::from_le_bytes(word(w)))),
                );
            }
            if want.quality {
                out.quality.extend(
                    quality
                        .chunks_exact(2)
                        .map(|w| i16::from_le_bytes([w[0], w[1]])),
                );
            }
        }
        PCO => {
            let (ts, values) = (r.part()?, r.part()?);
            if want.timestamps {
                column_onto(kept, ts, n, &mut out.ts)?;
            }
            if want.values {
                column_onto(kept, values, n, &mut out.values)?;
            }
            if want.quality {
                if r.0.is_empty() {
                    out.quality.resize(out.quality.len() + n, 0);
                } else {
                    decompress_onto(r.0, n, &mut out.quality)?;
                }
            }
        }
        _ => return Err(corrupt("unknown block encoding")),
    }
    Ok(n)
}

/// A compressed column of `n` numbers onto the end of `into`: from `kept` when it holds it (and
/// kept there once decoded), else decoded.
fn column_onto<T: crate::decoded::Cached>(
    kept: Option<&crate::decoded::Decoded>,
    part: &[u8],
    n: usize,
    into: &mut Vec<T>,
) -> Result<()> {
    match kept {
        Some(k) => k.column(part, n, into, decompress_onto),
        None => decompress_onto(part, n, into),
    }
}

/// Decompresses a column of `n` numbers onto the end of `into`.
fn decompress_onto<T: pco::data_types::Number + Default>(
    part: &[u8],
    n: usize,
    into: &mut Vec<T>,
) -> Result<()> {
    let at = into.len();
    into.resize(at + n, T::default());
    let done = pco::standalone::simple_decompress_into(part, &mut into[at..]).map_err(codec)?;
    if done.n_processed != n || !done.finished {
        into.truncate(at);
        return Err(corrupt("compressed block columns of different lengths"));
    }
    Ok(())
}

/// Reads a block's bytes front to back (shared with the packed minutes of `rollups.rs`).
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(corrupt("block shorter than its header says"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    pub(crate) fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// A part prefixed with its length (u32).
    pub(crate) fn part(&mut self) -> Result<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }
}

fn word(b: &[u8]) -> [u8; 8] {
    let mut w = [0; 8];
    w.copy_from_slice(&b[..8]);
    w
}

pub(crate) fn codec(e: pco::errors::PcoError) -> TsdbError {
    TsdbError::Block {
        context: "the compression codec failed",
        source: Some(Box::new(e)),
    }
}

pub(crate) fn corrupt(what: &'static str) -> TsdbError {
    TsdbError::Block {
        context: what,
        source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize) -> Columns {
        let mut c = Columns::with_capacity(n);
        for i in 0..n {
            let q = if i % 97 == 5 { 1 } else { 0 };
            c.push(
                1_795_435_200_000 + i as i64 * 1000,
                (i % 1000) as f64 / 10.0 + 0.1,
                q,
            );
        }
        c
    }

    #[test]
    fn both_encodings_read_back_bit_for_bit() {
        for n in [0, 1, 3, 255, 256, 3600] {
            let mut c = sample(n);
            if n > 2 {
                c.values[1] = f64::MIN_POSITIVE;
                c.values[2] = -0.0;
            }
            for compress in [false, true] {
                let back = decode(&encode(&c, compress).unwrap()).unwrap();
                assert_eq!(back.ts, c.ts);
                assert_eq!(back.quality, c.quality);
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&back.values), bits(&c.values), "n={n} {compress}");
            }
        }
    }

    #[test]
    fn a_regular_series_compresses_to_well_under_a_byte_a_point() {
        let c = sample(3600);
        let bytes = encode(&c, true).unwrap();
        assert!(bytes.len() < 3600 / 2, "{} bytes", bytes.len());
    }

    #[test]
    fn damaged_blocks_are_errors_not_panics() {
        let bytes = encode(&sample(300), true).unwrap();
        for cut in [0, 1, 5, 9, 20, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode(&[9, 0, 0, 0, 0]).is_err());
        let plain = encode(&sample(3), false).unwrap();
        assert!(decode(&plain[..plain.len() - 1]).is_err());
    }

    #[test]
    fn merging_keeps_order_and_lets_the_newer_point_win() {
        let mut old = Columns::default();
        for t in [1, 3, 5] {
            old.push(t, t as f64, 0);
        }
        let mut new = Columns::default();
        for t in [2, 3, 6] {
            new.push(t, 10.0 * t as f64, 0);
        }
        let (m, replaced) = Columns::merge(&old, &new);
        assert_eq!(m.ts, vec![1, 2, 3, 5, 6]);
        assert_eq!(m.values, vec![1.0, 20.0, 30.0, 5.0, 60.0]);
        assert_eq!(replaced, vec![3]);
    }
}
