//! Spike (issue 32): SQLite as the BI engine, a virtual table over columns held in memory
//! (row at a time), asset and tag pushed down; the three benchmark queries.
use rusqlite::ffi;
use rusqlite::vtab::{eponymous_only_module, Context, Filters, IndexConstraintOp, IndexInfo, VTab, VTabConnection, VTabCursor};
use rusqlite::{Connection, Result};
use std::ffi::c_int;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

struct Data { ts: Vec<i64>, series: Vec<(String, String, usize, usize)>, value: Vec<f64> }

#[repr(C)]
struct Tab { base: ffi::sqlite3_vtab, data: Arc<Data> }

unsafe impl<'vtab> VTab<'vtab> for Tab {
    type Aux = Arc<Data>;
    type Cursor = Cur<'vtab>;
    fn connect(_db: &mut VTabConnection, aux: Option<&Arc<Data>>, _args: &[&[u8]]) -> Result<(String, Self)> {
        Ok(("CREATE TABLE x(timestamp INTEGER, asset_id TEXT, tag_name TEXT, value REAL, quality INTEGER)".into(),
            Tab { base: ffi::sqlite3_vtab::default(), data: aux.unwrap().clone() }))
    }
    fn best_index(&self, info: &mut IndexInfo) -> Result<()> {
        // asset_id = ? (bit 1), tag_name = ? (bit 2)
        let mut idx = 0; let mut n = 0; let mut uses = vec![];
        for (i, c) in info.constraints().enumerate() {
            if !c.is_usable() || c.operator() != IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_EQ { continue; }
            match c.column() { 1 if idx & 1 == 0 => { idx |= 1; uses.push((i, 1)); } 2 if idx & 2 == 0 => { idx |= 2; uses.push((i, 2)); } _ => {} }
        }
        uses.sort_by_key(|u| u.1);
        for (i, _) in uses { n += 1; let mut u = info.constraint_usage(i); u.set_argv_index(n); u.set_omit(true); }
        info.set_idx_num(idx);
        info.set_estimated_cost(if idx == 3 { 10.0 } else { 1e7 });
        Ok(())
    }
    fn open(&mut self) -> Result<Cur<'_>> { Ok(Cur { base: ffi::sqlite3_vtab_cursor::default(), data: self.data.clone(), s: 0, i: 0, only: None, ph: PhantomData }) }
}

#[repr(C)]
struct Cur<'vtab> { base: ffi::sqlite3_vtab_cursor, data: Arc<Data>, s: usize, i: usize, only: Option<usize>, ph: PhantomData<&'vtab Tab> }

unsafe impl VTabCursor for Cur<'_> {
    fn filter(&mut self, idx: c_int, _s: Option<&str>, args: &Filters<'_>) -> Result<()> {
        self.only = None; self.s = 0;
        if idx == 3 {
            let a: String = args.get(0)?; let t: String = args.get(1)?;
            let k = self.data.series.iter().position(|x| x.0 == a && x.1 == t);
            self.only = Some(k.unwrap_or(usize::MAX));
            self.s = k.unwrap_or(self.data.series.len());
        }
        self.i = if self.s < self.data.series.len() { self.data.series[self.s].2 } else { self.data.ts.len() };
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        self.i += 1;
        if self.s < self.data.series.len() && self.i >= self.data.series[self.s].3 {
            if self.only.is_some() { self.s = self.data.series.len(); self.i = self.data.ts.len(); } else { self.s += 1; }
        }
        Ok(())
    }
    fn eof(&self) -> bool { self.i >= self.data.ts.len() }
    fn column(&self, ctx: &mut Context, c: c_int) -> Result<()> {
        match c { 0 => ctx.set_result(&self.data.ts[self.i]), 1 => ctx.set_result(&self.data.series[self.s].0), 2 => ctx.set_result(&self.data.series[self.s].1), 3 => ctx.set_result(&self.data.value[self.i]), _ => ctx.set_result(&0i64) }
    }
    fn rowid(&self) -> Result<i64> { Ok(self.i as i64) }
}

fn main() -> Result<()> {
    let (series, per, t0) = (1000usize, 10_000usize, 1_767_225_600_000i64);
    let mut d = Data { ts: Vec::with_capacity(series * per), series: vec![], value: Vec::with_capacity(series * per) };
    for s in 0..series {
        let start = d.ts.len();
        for i in 0..per { d.ts.push(t0 + i as i64 * 60_000); d.value.push(((s * 7 + i) % 1000) as f64 / 10.0); }
        d.series.push((format!("A{}", s / 10), format!("T{}", s % 10), start, d.ts.len()));
    }
    let conn = Connection::open_in_memory()?;
    conn.create_module(c"telemetry", eponymous_only_module::<Tab>(), Some(Arc::new(d)))?;
    let qs = [
        ("a", "SELECT (timestamp / 3600000) * 3600000 AS h, avg(value) FROM telemetry WHERE asset_id = 'A7' AND tag_name = 'T3' AND timestamp >= 1767312000000 AND timestamp < 1767398400000 GROUP BY h ORDER BY h"),
        ("b", "SELECT count(*), avg(value) FROM telemetry WHERE value > 99.5"),
        ("c", "SELECT asset_id, avg(value), max(value), count(*) FROM telemetry GROUP BY asset_id ORDER BY asset_id"),
    ];
    for (n, q) in qs {
        let mut times = vec![]; let mut rows = 0;
        for _ in 0..3 {
            let t = Instant::now();
            let mut st = conn.prepare(q)?;
            let mut r = st.query([])?; rows = 0;
            while let Some(_) = r.next()? { rows += 1; }
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!("sqlite vtab {n}: p50 {:.1} ms rows {rows}", times[1]);
    }
    Ok(())
}
