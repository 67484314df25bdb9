"""An independent check of plantd's ML datasets against DuckDB reading the same file.

Usage: ml_dataset_duckdb.py [API_BASE ADMIN_KEY]
(without arguments: the environment's PLANTD_URL and PLANTD_KEY; the base may be given with
or without its `/v1`).

Writes a CSV of 20,000 rows with a column of each type: `seq` (the data line's number, 1..N),
`temperature` (numbers, about 1% empty cells and three planted out-of-range values),
`pressure` (numbers), `site` (string categories, two of them quoted: a comma, a quote),
`running` (boolean, some empty) and `measured_at` (RFC 3339, some empty). Creates a dataset
without columns and uploads the file (multipart `file`) through the API, then checks what
plantd answers against DuckDB's own reading of the file:

- the inferred column types against DuckDB's sniffer;
- `GET .../quality`, per column: count, nulls and distinct exactly (`count(col)`,
  `count(*) - count(col)`, `count(DISTINCT col)`), min and max (exactly: the same decimal
  text parses to the same double; timestamps in text order), mean and std (`avg`,
  `stddev_samp`) within 1e-9 relative, the histogram's bins and the top values' counts;
- `GET .../preview`: the first page, a page across the first 4,096-row chunk boundary and the
  last page against the file's rows (row ids are the 1-based order of the data lines);
- `POST .../validate` with two `range` rules and a `not_null` rule: each rule's violations
  against DuckDB's `count(*) WHERE col < min OR col > max` (or `IS NULL`), its first row ids
  (`rows`, at most 100) and `rows_truncated`, and the quality score and grade.

Prints one "ok ..." line per check (a "FAIL ..." line on stderr for each mismatch) and exits
non-zero on any mismatch; the Rust test checks the ok lines.
"""

import atexit
import csv
import datetime
import math
import os
import random
import shutil
import sys
import tempfile
import uuid

import duckdb
import requests

ROWS = 20_000
CHUNK = 4_096

if len(sys.argv) >= 3:
    API, KEY = sys.argv[1], sys.argv[2]
else:
    API, KEY = os.environ["PLANTD_URL"], os.environ["PLANTD_KEY"]
API = API.rstrip("/")
if not API.endswith("/v1"):
    API += "/v1"
AUTH = {"Authorization": "Bearer " + KEY}

failures = []


def check(ok, step, detail="", info=""):
    """Prints `ok step [info]`, or records a failure with its detail (reported at the end)."""
    if ok:
        print(f"ok {step} {info}".rstrip())
    else:
        failures.append(step)
        print("FAIL", step, detail, file=sys.stderr)


def call(method, path, expect=(200,), **kw):
    r = requests.request(method, API + path, headers=AUTH, timeout=120, **kw)
    assert r.status_code in expect, (method, path, r.status_code, r.text[:2000])
    return r.json()


def close(a, b, rel=1e-9):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


# The file. Planted out-of-range temperatures: the first data row of the second chunk among
# them, so that row ids across a chunk boundary are checked too.
PLANTED = {17: 250.5, CHUNK + 1: -40.25, ROWS - 1: 999.0}
SITES = ["north", "south", "east, annex", 'west "B"']
rng = random.Random(20261127)
start = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)
tmp = tempfile.mkdtemp(prefix="plantd-ml-duckdb-")
atexit.register(shutil.rmtree, tmp, True)
path = os.path.join(tmp, "peer.csv")
with open(path, "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["seq", "temperature", "pressure", "site", "running", "measured_at"])
    for seq in range(1, ROWS + 1):
        if seq in PLANTED:
            temperature = "%.3f" % PLANTED[seq]
        elif rng.random() < 0.01:
            temperature = ""
        else:
            temperature = "%.3f" % (60.0 + 10.0 * math.sin(seq / 500.0) + rng.uniform(-2.0, 2.0))
        pressure = "%.4f" % rng.uniform(4.0, 8.0)
        site = rng.choices(SITES, weights=[50, 30, 15, 5])[0] if rng.random() > 0.005 else ""
        running = ("true" if rng.random() < 0.8 else "false") if rng.random() > 0.003 else ""
        at = start + datetime.timedelta(milliseconds=1500 * seq)
        measured_at = at.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (at.microsecond // 1000)
        if seq % 250 == 3:
            measured_at = ""
        w.writerow([seq, temperature, pressure, site, running, measured_at])
with open(path, newline="") as f:
    file_rows = list(csv.DictReader(f))
size = os.path.getsize(path)

# DuckDB's reading: the declared types (numbers as doubles, the timestamp as its text, as
# plantd keeps it), RFC 4180 quoting, an empty cell NULL.
db = duckdb.connect()
quoted = path.replace("'", "''")
db.execute(
    f"""CREATE TABLE t AS SELECT * FROM read_csv('{quoted}', header = true, auto_detect = false,
    delim = ',', quote = '"', escape = '"',
    columns = {{'seq': 'DOUBLE', 'temperature': 'DOUBLE', 'pressure': 'DOUBLE',
               'site': 'VARCHAR', 'running': 'BOOLEAN', 'measured_at': 'VARCHAR'}})"""
)
TYPES = {"seq": "number", "temperature": "number", "pressure": "number", "site": "string", "running": "boolean", "measured_at": "timestamp"}
n = db.execute("SELECT count(*) FROM t").fetchone()[0]
assert n == ROWS == len(file_rows), (n, len(file_rows))
assert db.execute("SELECT count(measured_at) = count(TRY_CAST(measured_at AS TIMESTAMPTZ)) FROM t").fetchone()[0]


def sniffed(duck_type):
    """plantd's type for the type DuckDB's sniffer gives a column."""
    t = duck_type.upper()
    if t == "BOOLEAN":
        return "boolean"
    if t.startswith(("TIMESTAMP", "DATE")):
        return "timestamp"
    if t == "VARCHAR":
        return "string"
    return "number"


# Create without columns; the upload infers them.
dataset = call("POST", "/ml/datasets", expect=(201,), json={"name": "duckdb peer " + uuid.uuid4().hex[:8], "description": "independent check with DuckDB"})["data"]
did = dataset["id"]
with open(path, "rb") as f:
    uploaded = call("POST", f"/ml/datasets/{did}/upload", expect=(200, 201), files={"file": ("peer.csv", f, "text/csv")})["data"]
check(uploaded["row_count"] == ROWS, "uploaded", uploaded["row_count"])
check(uploaded.get("file_size_bytes") == size, "file size", (uploaded.get("file_size_bytes"), size))
got_types = {c["name"]: c["type"] for c in uploaded["columns"]}
duck_sniff = {r[0]: sniffed(r[1]) for r in db.execute(f"DESCRIBE SELECT * FROM read_csv_auto('{quoted}')").fetchall()}
check(
    [c["name"] for c in uploaded["columns"]] == list(TYPES) and got_types == TYPES == duck_sniff,
    "inferred types",
    (got_types, duck_sniff),
)

# Quality against DuckDB.
quality = call("GET", f"/ml/datasets/{did}/quality")["data"]
check(quality["row_count"] == ROWS, "quality row_count", quality["row_count"])
profiles = {c["name"]: c for c in quality["columns"]}
for col, typ in TYPES.items():
    p = profiles.get(col)
    if p is None:
        check(False, f"quality {col}", "no profile")
        continue
    count, nulls, distinct, lo, hi = db.execute(f'SELECT count("{col}"), count(*) - count("{col}"), count(DISTINCT "{col}"), min("{col}"), max("{col}") FROM t').fetchone()
    check(p["type"] == typ, f"quality {col} type", p["type"])
    check((p["count"], p["nulls"], p["distinct"]) == (count, nulls, distinct), f"quality {col} counts", ((p["count"], p["nulls"], p["distinct"]), (count, nulls, distinct)))
    if typ == "number":
        mean, std = db.execute(f'SELECT avg("{col}"), stddev_samp("{col}") FROM t').fetchone()
        check(p["min"] == lo and p["max"] == hi, f"quality {col} min max", ((p["min"], p["max"]), (lo, hi)))
        check(close(p["mean"], mean) and close(p["std"], std), f"quality {col} mean std", ((p["mean"], p["std"]), (mean, std)))
        # Ten equal-width bins between min and max, the last closed; a value within 1e-9 of a
        # bin edge may fall on either side of it.
        bins = p["histogram"]
        values = [r[0] for r in db.execute(f'SELECT "{col}" FROM t WHERE "{col}" IS NOT NULL').fetchall()]
        width = (hi - lo) / 10
        expected, edges = [0] * 10, 0
        for x in values:
            pos = (x - lo) / width
            expected[min(int(pos), 9)] += 1
            edges += 1 <= round(pos) <= 9 and abs(pos - round(pos)) < 1e-9
        got = [b["count"] for b in bins]
        near = lambda a, b: abs(a - b) <= 1e-9 * (hi - lo)
        shape = len(bins) == 10 and all(near(b["start"], lo + i * width) and near(b["end"], lo + (i + 1) * width) for i, b in enumerate(bins))
        off = sum(abs(a - b) for a, b in zip(got, expected))
        check(shape and sum(got) == count and off <= 2 * edges, f"quality {col} histogram", (bins, expected))
        check(p["top_values"] == [], f"quality {col} no top values", p["top_values"])
    else:
        if typ == "timestamp":
            check(p["min"] == lo and p["max"] == hi, f"quality {col} min max", ((p["min"], p["max"]), (lo, hi)))
        else:
            check(p["min"] is None and p["max"] is None, f"quality {col} no min max", (p["min"], p["max"]))
        check(p["mean"] is None and p["std"] is None and p["histogram"] == [], f"quality {col} no mean std histogram", p)
        # The ten most frequent values: each with DuckDB's count, and no other value more
        # frequent than the least frequent of them (ties may be named either way).
        freq = {str(v).lower() if typ == "boolean" else v: c for v, c in db.execute(f'SELECT "{col}", count(*) FROM t WHERE "{col}" IS NOT NULL GROUP BY 1').fetchall()}
        top = p["top_values"]
        right = all(freq.get(str(tv["value"]).lower() if typ == "boolean" else tv["value"]) == tv["count"] for tv in top)
        best = sorted(freq.values(), reverse=True)[:10]
        counts = [tv["count"] for tv in top]
        check(right and counts == best, f"quality {col} top values", (top, best))

# Preview against the file's rows.


def cell(typ, text):
    if text == "":
        return None
    if typ == "number":
        return float(text)
    if typ == "boolean":
        return text.lower() == "true"
    return text


def preview(page, step):
    got = call("GET", f"/ml/datasets/{did}/preview", params={"page": page, "per_page": 100})
    first = (page - 1) * 100
    want = file_rows[first : first + 100]
    rows = got["data"]["rows"]
    ok = got["meta"]["total"] == ROWS and len(rows) == len(want)
    bad = None
    for i, (r, line) in enumerate(zip(rows, want)):
        values = {c: cell(t, line[c]) for c, t in TYPES.items()}
        if r["row_id"] != first + i + 1 or r["values"] != values or r["values"]["seq"] != r["row_id"]:
            ok, bad = False, (r, values)
            break
        if r.get("label_class_id") is not None or r.get("skipped") or r.get("flagged"):
            ok, bad = False, r
            break
    check(ok, step, (got["meta"], bad))


preview(1, "preview first page")
preview(CHUNK // 100 + 1, "preview across a chunk boundary")
preview((ROWS + 99) // 100, "preview last page")

# Validation against DuckDB.
RULES = [
    ({"name": "temperature in range", "rule_type": "range", "column": "temperature", "config": {"min": -20, "max": 120}}, "temperature < -20 OR temperature > 120"),
    ({"name": "pressure at most 7.5", "rule_type": "range", "column": "pressure", "config": {"max": 7.5}}, "pressure > 7.5"),
    ({"name": "temperature present", "rule_type": "not_null", "column": "temperature", "config": {}}, "temperature IS NULL"),
]
ids = []
for rule, where in RULES:
    ids.append(call("POST", f"/ml/datasets/{did}/validation-rules", expect=(201,), json=rule)["data"]["id"])
result = call("POST", f"/ml/datasets/{did}/validate")["data"]
issues = {i["rule_id"]: i for i in result["issues"]}
for rid, (rule, where) in zip(ids, RULES):
    violations = db.execute(f"SELECT count(*) FROM t WHERE {where}").fetchone()[0]
    first = [int(r[0]) for r in db.execute(f"SELECT seq FROM t WHERE {where} ORDER BY seq LIMIT 100").fetchall()]
    issue = issues.get(rid, {"violations": 0, "rows": [], "rows_truncated": False})
    check(
        issue["violations"] == violations and issue["rows"] == first and issue["rows_truncated"] == (violations > 100),
        f"validate {rule['rule_type']} {rule['column']}",
        (issue, violations, first[:10]),
        f"({violations} violations, first rows {first[:5]})",
    )
check(issues.get(ids[0], {}).get("rows") == sorted(PLANTED), "validate planted rows", issues.get(ids[0]), sorted(PLANTED))
bad_rows = db.execute("SELECT count(*) FROM t WHERE " + " OR ".join(f"({w})" for _, w in RULES)).fetchone()[0]
score = round(100.0 * (ROWS - bad_rows) / ROWS, 1)
grade = "A" if score >= 95 else "B" if score >= 85 else "C" if score >= 70 else "D" if score >= 50 else "F"
check(
    abs(result["quality_score"] - score) <= 0.05 + 1e-9 and result["grade"] == grade and result["valid"] is False and result["row_count"] == ROWS,
    "validate quality score",
    (result["quality_score"], result["grade"], result["valid"], result["row_count"]),
    f"{score} {grade}",
)
kept = call("GET", f"/ml/datasets/{did}/quality")["data"]["last_validation"]
check(kept is not None and kept["quality_score"] == result["quality_score"], "last validation kept", kept)

if failures:
    print(f"{len(failures)} check(s) failed: {', '.join(failures)}", file=sys.stderr)
    sys.exit(1)
print("ok all checks")
