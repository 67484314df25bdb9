#!/usr/bin/env python3
"""Side-by-side telemetry benchmark: plantd against InfluxDB 1.x and VictoriaMetrics on this machine.

Started from the shared harness (../shared/bench/ingest_peers.py) and extended for storage v2
(issue 15): the data's shape (`synthetic`: the harness's sawtooth; `sim`: noise, drift and steps
at 1 Hz as the simulator's patterns make them, at a sensor's 0.01 resolution; `sim-f64`: the
same at full double precision, which no lossless codec packs small), and the time to read the
1,000,000-point series back raw (plantd's GET /v1/telemetry/export beside VictoriaMetrics'
/api/v1/export; InfluxDB's SELECT of the raw points).

The same points go to every system over loopback HTTP, from request bodies built before the clock
starts, with the same number of client threads. Prints points/s for ingest, the latency of an
hourly-average query over one series, the raw read, and bytes on disk per point after a graceful
stop, per system, in one run. Durability: plantd acknowledges once committed (SQLite WAL,
synchronous=FULL); InfluxDB after its WAL write (no fsync per request by default);
VictoriaMetrics from memory (flushed every second).

Usage: crates/bench/peers/telemetry_peers.py [--systems plantd,influxdb,victoriametrics]
         [--series 100] [--seconds 3600] [--batch 5000] [--threads 2] [--query-points 1000000]
         [--shape synthetic|sim|sim-f64]
Run it from the project's root: plantd is target/release/plantd there (or PLANTD_BIN).
Peers come from Debian: apt-get install influxdb victoria-metrics.
"""
import math
import random
import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PLANTD_BIN = os.environ.get("PLANTD_BIN", os.path.join(os.getcwd(), "target", "release", "plantd"))
T0 = (int(time.time()) // 3600 - 48) * 3600  # two days ago, on the hour: inside every retention


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status < 500:
                    return
        except Exception:
            time.sleep(0.2)
    raise RuntimeError(f"no answer from {url}")


SHAPE = "synthetic"


def sim_value(k, s, rng):
    """A simulator-shaped value of series k at second s: a level that drifts, steps now and then
    (a setpoint change), a slow oscillation, and Gaussian noise."""
    level = 20.0 + 5.0 * (k % 7) + 0.0005 * s + 3.0 * ((s // 900 + k) % 3)
    v = level + 0.8 * math.sin(2 * math.pi * s / 600.0) + rng.gauss(0.0, 0.15)
    return v if SHAPE == "sim-f64" else round(v, 2)


def points(series, seconds, start=T0):
    """Yields (asset, tag, ts, value) in time order, `series` series at 1 Hz."""
    rng = random.Random(42)
    for s in range(seconds):
        ts = start + s
        for k in range(series):
            if SHAPE == "synthetic":
                v = (k * 7 + s) % 1000 / 10.0
            else:
                v = sim_value(k, s, rng)
            yield (f"A{k // 10}", f"T{k % 10}", ts, v)


def iso(ts):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


class System:
    name = "?"
    proc = None
    tmp = None

    def halt(self):
        """Stops the process gracefully (so buffers reach disk) and returns its data's size in bytes."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        size = 0
        for root, _, files in os.walk(self.tmp or "/nonexistent"):
            for f in files:
                if not f.endswith((".conf", ".toml")):
                    size += os.path.getsize(os.path.join(root, f))
        return size

    def stop(self):
        self.halt()
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)


class Influx(System):
    name = "influxdb-1.6"

    def start(self):
        self.tmp = tempfile.mkdtemp(prefix="bench-influx-")
        self.port = free_port()
        conf = os.path.join(self.tmp, "influx.conf")
        with open(conf, "w") as f:
            f.write(f"""reporting-disabled = true
bind-address = "127.0.0.1:{free_port()}"
[meta]
  dir = "{self.tmp}/meta"
[data]
  dir = "{self.tmp}/data"
  wal-dir = "{self.tmp}/wal"
  query-log-enabled = false
[http]
  bind-address = "127.0.0.1:{self.port}"
  log-enabled = false
[monitor]
  store-enabled = false
""")
        self.proc = subprocess.Popen(["influxd", "run", "-config", conf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_http(f"http://127.0.0.1:{self.port}/ping")
        urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{self.port}/query", data=b"q=CREATE DATABASE bench", method="POST"))
        self.host, self.path, self.headers = "127.0.0.1", "/write?db=bench&precision=s", {}

    def body(self, batch):
        return "\n".join(f"telemetry,asset_id={a},tag_name={t} value={v!r} {ts}" for a, t, ts, v in batch).encode()

    def query(self, asset, tag, start, end):
        q = (f"SELECT mean(value) FROM telemetry WHERE asset_id='{asset}' AND tag_name='{tag}' "
             f"AND time >= {start}s AND time < {end}s GROUP BY time(1h)")
        url = f"http://127.0.0.1:{self.port}/query?db=bench&q={urllib.parse.quote(q)}"
        with urllib.request.urlopen(url) as r:
            body = json.load(r)
        return len(body["results"][0].get("series", [{}])[0].get("values", []))


    def read_raw(self, asset, tag, start, end):
        q = (f"SELECT value FROM telemetry WHERE asset_id='{asset}' AND tag_name='{tag}' "
             f"AND time >= {start}s AND time < {end}s")
        url = f"http://127.0.0.1:{self.port}/query?db=bench&chunked=true&chunk_size=100000&q={urllib.parse.quote(q)}"
        n = 0
        with urllib.request.urlopen(url) as r:
            for line in r:
                body = json.loads(line)
                for res in body.get("results", []):
                    for ser in res.get("series", []):
                        n += len(ser["values"])
        return n


class Victoria(System):
    name = "victoriametrics-1.79"

    def start(self):
        self.tmp = tempfile.mkdtemp(prefix="bench-vm-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["victoria-metrics", f"-storageDataPath={self.tmp}", f"-httpListenAddr=127.0.0.1:{self.port}",
             "-search.disableCache", "-retentionPeriod=100y", "-loggerLevel=ERROR"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_http(f"http://127.0.0.1:{self.port}/health")
        self.host, self.path, self.headers = "127.0.0.1", "/write?precision=s", {}

    body = Influx.body

    def flush(self):
        urllib.request.urlopen(f"http://127.0.0.1:{self.port}/internal/force_flush").read()

    def query(self, asset, tag, start, end):
        q = f'avg_over_time(telemetry_value{{asset_id="{asset}",tag_name="{tag}"}}[1h])'
        url = (f"http://127.0.0.1:{self.port}/api/v1/query_range?query={urllib.parse.quote(q)}"
               f"&start={start + 3600}&end={end}&step=3600")
        with urllib.request.urlopen(url) as r:
            body = json.load(r)
        res = body["data"]["result"]
        return len(res[0]["values"]) if res else 0


    def read_raw(self, asset, tag, start, end):
        sel = urllib.parse.quote(f'telemetry_value{{asset_id="{asset}",tag_name="{tag}"}}')
        url = f"http://127.0.0.1:{self.port}/api/v1/export?match[]={sel}&start={start}&end={end - 1}"
        n = 0
        with urllib.request.urlopen(url) as r:
            for line in r:
                n += len(json.loads(line)["values"])
        return n


class Plantd(System):
    name = "plantd"

    def start(self):
        self.tmp = tempfile.mkdtemp(prefix="bench-plantd-")
        self.port = free_port()
        conf = os.path.join(self.tmp, "plantd.toml")
        with open(conf, "w") as f:  # keep raw points as long as the peers do (they run with 100y)
            f.write("[telemetry.retention]\nraw_days = 36500\nminute_days = 36501\n"
                    "hour_days = 36502\nday_days = 36502\n")
        args = [PLANTD_BIN, "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir", self.tmp,
                "--config", conf]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_http(f"http://127.0.0.1:{self.port}/v1/health")
        key = subprocess.run([PLANTD_BIN, "keys", "create", "--name", "bench", "--scopes", "admin",
                              "--data-dir", self.tmp], capture_output=True, text=True, check=True)
        self.key = key.stdout.strip().splitlines()[-1]
        self.host, self.path = "127.0.0.1", "/v1/telemetry"
        self.headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}

    def body(self, batch):
        return json.dumps({"data": [{"asset_id": a, "tag_name": t, "value": v, "timestamp": iso(ts)}
                                    for a, t, ts, v in batch]}).encode()

    def query(self, asset, tag, start, end):
        """Every page of the hourly averages (per_page is capped at 100), as a client must fetch them."""
        rows, page = 0, 1
        while True:
            url = (f"http://127.0.0.1:{self.port}/v1/telemetry?asset_id={asset}&tag_name={tag}"
                   f"&start={iso(start)}&end={iso(end)}&aggregation=avg&interval=1h&per_page=100&page={page}")
            req = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.key}"})
            with urllib.request.urlopen(req) as r:
                body = json.load(r)
            rows += len(body["data"])
            if not body["data"] or rows >= body.get("meta", {}).get("total", 0):
                return rows
            page += 1


    def read_raw(self, asset, tag, start, end):
        url = (f"http://127.0.0.1:{self.port}/v1/telemetry/export?asset_id={asset}&tags={tag}"
               f"&start={iso(start)}&end={iso(end)}&format=csv")
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.key}"})
        n = 0
        with urllib.request.urlopen(req) as r:
            while True:
                chunk = r.read(1 << 20)
                if not chunk:
                    break
                n += chunk.count(b"\n")
        return n - 1  # the header line


def send_all(system, bodies, threads):
    """Posts every body once over keep-alive connections; returns (seconds, failures)."""
    lock = threading.Lock()
    queue = list(range(len(bodies)))
    failures = []

    def worker():
        conn = http.client.HTTPConnection(system.host, system.port, timeout=120)
        while True:
            with lock:
                if not queue:
                    break
                i = queue.pop()
            conn.request("POST", system.path, body=bodies[i], headers=system.headers)
            r = conn.getresponse()
            r.read()
            if r.status >= 300:
                failures.append(r.status)
        conn.close()

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    t = time.perf_counter()
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return time.perf_counter() - t, failures


def batches(gen, size):
    batch = []
    for p in gen:
        batch.append(p)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def run(system, args):
    system.start()
    try:
        bodies = [system.body(b) for b in batches(points(args.series, args.seconds), args.batch)]
        n = args.series * args.seconds
        secs, fails = send_all(system, bodies, args.threads)
        ingest = n / secs
        # one long series for the query: query_points at 1 Hz
        qstart = T0 - args.query_points - 10
        qbodies = [system.body(b) for b in batches(
            ((a, t, ts, v) for a, t, ts, v in points(1, args.query_points, qstart)), args.batch)]
        send_all(system, qbodies, args.threads)
        if hasattr(system, "flush"):
            system.flush()
        times, rows = [], 0
        for _ in range(7):
            t = time.perf_counter()
            rows = system.query("A0", "T0", qstart, qstart + args.query_points)
            times.append(time.perf_counter() - t)
        raw_times, raw_rows = [], 0
        for _ in range(3):
            t = time.perf_counter()
            raw_rows = system.read_raw("A0", "T0", qstart, qstart + args.query_points)
            raw_times.append(time.perf_counter() - t)
        disk = system.halt()
        return {"system": system.name, "shape": SHAPE, "threads": args.threads, "points": n,
                "ingest_pts_s": round(ingest),
                "failed_requests": len(fails), "query_ms_p50": round(statistics.median(times[1:]) * 1000, 1),
                "query_rows": rows, "raw_read_s": round(min(raw_times), 2), "raw_rows": raw_rows,
                "raw_pts_s": round(raw_rows / min(raw_times)),
                "disk_bytes_per_point": round(disk / (n + args.query_points), 2)}
    finally:
        system.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--systems", default="plantd,influxdb,victoriametrics")
    ap.add_argument("--series", type=int, default=100)
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--query-points", type=int, default=1_000_000)
    ap.add_argument("--shape", default="synthetic", choices=["synthetic", "sim", "sim-f64"])
    args = ap.parse_args()
    global SHAPE
    SHAPE = args.shape
    table = {"plantd": Plantd, "influxdb": Influx, "victoriametrics": Victoria}
    for name in args.systems.split(","):
        try:
            print(json.dumps(run(table[name](), args)), flush=True)
        except Exception as exc:
            print(json.dumps({"system": name, "error": repr(exc)}), flush=True)


if __name__ == "__main__":
    main()
