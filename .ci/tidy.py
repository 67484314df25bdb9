#!/usr/bin/env python3
"""Cheap checks of the code's shape that CI runs (ARCHITECTURE.md "Invariants"):
1. no source file over 800 lines (test files excepted) and a `//!` line atop every file;
2. no import circle between the files of a crate (`use crate::...`, `super::...` and
   `crate::x::f()` paths; a facade's `mod` and `pub use` lines re-export, they do not depend);
3. no crate depends on a crate of its own or a higher layer;
4. every declared audit event (`audit_events!` in model/src/audit.rs) is recorded somewhere
   (named outside its declaration, tests excepted).
Prints each problem and exits 1 if there is one."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 800
# Layers, bottom first: a crate may depend only on crates of lower layers.
LAYERS = [
    ["model"],
    ["auth", "ml", "bi", "report"],
    ["store"],
    ["tsdb", "alerts", "connectors", "sim"],
    ["app"],
    ["api", "mqtt"],
    ["test-support"],
    ["plantd", "bench"],
]

problems = []


def is_test_file(p: Path) -> bool:
    return "tests" in p.parts or p.name == "tests.rs" or p.name.endswith("_tests.rs")


def check_files():
    for f in sorted(ROOT.glob("crates/*/src/**/*.rs")) + sorted(ROOT.glob("crates/*/tests/**/*.rs")):
        text = f.read_text()
        rel = f.relative_to(ROOT)
        if not text.startswith("//!"):
            problems.append(f"{rel}: the file does not start with a `//!` line saying what it is for")
        n = text.count("\n")
        if n > MAX_LINES and not is_test_file(f.relative_to(ROOT / "crates" / f.relative_to(ROOT).parts[1])):
            problems.append(f"{rel}: {n} lines (at most {MAX_LINES}); split it by concept")


USE_RE = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?use\s+([^;]+);", re.M)
PATH_RE = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")


def expand(tree: str):
    """`crate::{a::B, c}` -> ["crate::a::B", "crate::c"]"""
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [re.sub(r"as[A-Za-z_0-9]+$", "", tree)]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        parts.append(cur)
    out = []
    for p in parts:
        if p == "self":
            out.append(prefix.rstrip(":"))
        else:
            out.extend(expand(prefix + p))
    return out


def module_path(src: Path, f: Path):
    """src/routes/alerts.rs -> ["routes", "alerts"]; lib.rs -> []; a/mod.rs -> ["a"]."""
    parts = list(f.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("lib", "main", "mod"):
        parts = parts[:-1]
    return parts


def check_cycles(crate: Path):
    src = crate / "src"
    files = [f for f in src.rglob("*.rs")]
    by_mod = {tuple(module_path(src, f)): f for f in files}

    def reexports(f: Path):
        """Names a facade re-exports: name -> module path it comes from."""
        out = {}
        for m in USE_RE.finditer(f.read_text()):
            if not m.group(1):
                continue
            for path in expand(m.group(3)):
                segs = path.split("::")
                if segs[0] in ("crate", "self"):
                    segs = segs[1:]
                elif segs[0] == "super":
                    continue
                name = segs[-1]
                base = module_path(src, f)
                out[name] = tuple(base + segs[:-1]) if segs[0] != "crate" else tuple(segs[:-1])
        return out

    facades = {key: reexports(f) for key, f in by_mod.items() if f.name in ("lib.rs", "mod.rs", "main.rs")}

    def resolve(segs):
        """Module path segments (crate-relative) -> the file that defines the item."""
        segs = list(segs)
        while True:
            for i in range(len(segs), -1, -1):
                key = tuple(segs[:i])
                if key in by_mod:
                    rest = segs[i:]
                    if rest and key in facades and rest[0] in facades[key] and tuple(facades[key][rest[0]]) != key:
                        segs = list(facades[key][rest[0]]) + rest
                        break
                    return by_mod[key]
            else:
                return None

    graph = {f: set() for f in files}
    for f in files:
        # Comments name paths without depending on them; a file's unit tests (its last item,
        # by convention) see their own file as `super`.
        text = re.split(r"#\[cfg\(test\)\]\s*mod \w+ \{", re.sub(r"//[^\n]*", "", f.read_text()))[0]
        here = module_path(src, f)
        is_facade = f.name in ("lib.rs", "mod.rs", "main.rs")
        # A facade's re-exports are not dependencies.
        if is_facade:
            text = USE_RE.sub(lambda m: "" if m.group(1) else m.group(0), text)
        refs = []
        for m in USE_RE.finditer(text):
            refs.extend(expand(m.group(3)))
        body = USE_RE.sub("", text)
        refs.extend(m.group(0) for m in PATH_RE.finditer(body))
        # Bare paths to this module's own children (`migrate::run`, `mod x; x::f()`).
        for m in re.finditer(r"(?<![A-Za-z0-9_:])([a-z_][a-z0-9_]*)::", body):
            if tuple(here + [m.group(1)]) in by_mod:
                refs.append("self::" + m.group(1))
        for r in refs:
            segs = r.split("::")
            if segs[0] == "self":
                segs = ["crate"] + here + segs[1:]
            if segs[0] == "crate":
                path = segs[1:]
            elif segs[0] == "super":
                base = here if f.name == "mod.rs" or is_facade else here[:-1]
                # `super` of a file module is its parent module.
                base = here[:-1]
                while segs and segs[0] == "super":
                    segs = segs[1:]
                    if segs and segs[0] == "super":
                        base = base[:-1]
                path = base + segs
            else:
                continue
            target = resolve(path)
            if target is not None and target != f:
                graph[f].add(target)

    # Cycles: strongly connected components of more than one file.
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            strong(v)
    for comp in out:
        names = sorted(str(c.relative_to(ROOT)) for c in comp)
        edges = sorted(
            f"{a.relative_to(src)} -> {b.relative_to(src)}" for a in comp for b in graph[a] if b in comp
        )
        problems.append(f"import circle in {crate.name}: {', '.join(names)} ({'; '.join(edges)})")


def check_layers():
    layer_of = {c: i for i, layer in enumerate(LAYERS) for c in layer}
    for toml in sorted(ROOT.glob("crates/*/Cargo.toml")):
        crate = toml.parent.name
        if crate not in layer_of:
            problems.append(f"crates/{crate}: not in the layer list of .ci/tidy.py")
            continue
        for dep in re.findall(r"^plantd-([a-z-]+)\s*(?:\.workspace|=)", toml.read_text(), re.M):
            if dep == crate:
                continue  # a dev-dependency on itself, for test features
            if dep not in layer_of:
                problems.append(f"crates/{crate} depends on unknown plantd-{dep}")
            elif layer_of[dep] >= layer_of[crate]:
                problems.append(
                    f"crates/{crate} (layer {layer_of[crate]}) depends on plantd-{dep} (layer {layer_of[dep]}): "
                    "a crate may depend only on lower layers"
                )


def check_audit_events():
    decl = ROOT / "crates/model/src/audit.rs"
    table = re.search(r"audit_events! \{(.*?)\n\}", decl.read_text(), re.S)
    events = re.findall(r"^\s*(\w+) =>", table.group(1), re.M) if table else []
    if not events:
        problems.append(f"{decl.relative_to(ROOT)}: no audit_events! table found")
    code = "\n".join(
        f.read_text()
        for f in ROOT.glob("crates/*/src/**/*.rs")
        if f != decl and not is_test_file(f)
    )
    for e in events:
        if not re.search(rf"AuditEvent::{e}\b", code):
            problems.append(
                f"{decl.relative_to(ROOT)}: the audit event {e} is declared but no code records it"
            )


check_files()
check_audit_events()
for crate in sorted(p.parent for p in ROOT.glob("crates/*/Cargo.toml")):
    check_cycles(crate)
check_layers()
for p in problems:
    print(p)
if problems:
    print(f"tidy: {len(problems)} problem(s)")
    sys.exit(1)
print("tidy: ok")
