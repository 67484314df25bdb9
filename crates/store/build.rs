//! Embeds every migration in the binary: `migrations/NNNN_name.sql` (one text for both
//! backends) and `migrations/{sqlite,postgres}/NNNN_name.sql` (one per backend, where the SQL
//! must differ) become the list `migrate.rs` applies, so adding a version is adding its file.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

#[derive(Default)]
struct Version {
    both: Option<PathBuf>,
    sqlite: Option<PathBuf>,
    postgres: Option<PathBuf>,
}

/// `NNNN_name.sql` files of `dir`, by version.
fn sql_files(dir: &Path) -> Vec<(i64, PathBuf)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if path.is_dir() || !name.ends_with(".sql") {
            continue;
        }
        let version = name
            .split('_')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name}: a migration is named NNNN_what.sql"));
        out.push((version, path));
    }
    out
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"))
        .join("migrations");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut versions: BTreeMap<i64, Version> = BTreeMap::new();
    for (v, path) in sql_files(&root) {
        versions.entry(v).or_default().both = Some(path);
    }
    for (v, path) in sql_files(&root.join("sqlite")) {
        versions.entry(v).or_default().sqlite = Some(path);
    }
    for (v, path) in sql_files(&root.join("postgres")) {
        versions.entry(v).or_default().postgres = Some(path);
    }
    let mut list = String::from("&[\n");
    for (expected, (v, m)) in (1..).zip(&versions) {
        assert_eq!(*v, expected, "migration versions run from 1 without a gap");
        let sql = match (&m.both, &m.sqlite, &m.postgres) {
            (Some(both), None, None) => format!("Sql::Both(include_str!({:?}))", both),
            (None, Some(s), Some(p)) => format!(
                "Sql::PerBackend {{ sqlite: include_str!({s:?}), postgres: include_str!({p:?}) }}"
            ),
            _ => panic!(
                "migration {v}: one file for both backends, or one in sqlite/ and one in postgres/"
            ),
        };
        writeln!(list, "    Migration {{ version: {v}, sql: {sql} }},").expect("a string");
    }
    list.push(']');
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("migrations.rs");
    std::fs::write(out, list).expect("write the migration list");
}
