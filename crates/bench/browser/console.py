"""plantd-bench console, the browser part: headless Chromium through WebDriver (selenium).

usage: console.py BASE_URL EMAIL PASSWORD WEEK_DASHBOARD_ID LIVE_DASHBOARD_ID

Prints one JSON object with the figures: bytes transferred by the first load of the week
dashboard (Resource Timing transferSize, fresh profile, so nothing cached), the time until every
chart has drawn, and on the live dashboard the browser's CPU time per second (Chrome's
Performance.getMetrics TaskDuration, ScriptDuration, LayoutDuration, RecalcStyleDuration) and
the time from each live point's timestamp to the frame that drew it.
"""

import json
import sys
import time


import chromium  # beside this script

BASE, EMAIL, PASSWORD, WEEK, LIVE = sys.argv[1:6]
CPU_WINDOW_S = 20


def wait(d, what, timeout=60):
    return chromium.wait(d, what, timeout)


def charts_drawn(d):
    return d.execute_script(
        "const s = window.plantdDashboard && window.plantdDashboard.stats;"
        "return s && s.frames > 0 && document.querySelectorAll('#grid canvas').length >= 8"
        " && Array.from(document.querySelectorAll('#grid .note')).filter(n => /points/.test(n.textContent)).length >= 8")


def pct(values, p):
    if not values:
        return None
    values = sorted(values)
    return values[round((len(values) - 1) * p)]


def main():
    d = chromium.browser()
    out = {}
    try:
        chromium.login(d, BASE, EMAIL, PASSWORD)

        # First load of the week dashboard: everything the page fetched, nothing cached before.
        started = time.time()
        d.get(f"{BASE}/dashboards/{WEEK}")
        wait(d, lambda: charts_drawn(d))
        out["first_draw_ms"] = (time.time() - started) * 1000
        time.sleep(2)
        sizes = d.execute_script("""
            const nav = performance.getEntriesByType('navigation')[0];
            const res = performance.getEntriesByType('resource');
            const stat = res.filter(r => r.name.includes('/assets/'));
            return {total: nav.transferSize + res.reduce((a, r) => a + r.transferSize, 0),
                    requests: 1 + res.length,
                    statics: nav.transferSize + stat.reduce((a, r) => a + r.transferSize, 0)};""")
        out["first_load_bytes"] = sizes["total"]
        out["first_load_requests"] = sizes["requests"]
        out["static_bytes"] = sizes["statics"]

        # Eight live charts: CPU per second of wall time, and ingest-to-drawn latency.
        d.get(f"{BASE}/dashboards/{LIVE}")
        wait(d, lambda: charts_drawn(d))
        time.sleep(3)
        d.execute_cdp_cmd("Performance.enable", {"timeDomain": "timeTicks"})
        d.execute_script("window.plantdDashboard.stats.drawnAfterMs.length = 0")
        frames0 = d.execute_script("return window.plantdDashboard.stats.frames")

        def metrics():
            m = d.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
            return {x["name"]: x["value"] for x in m}

        m0 = metrics()
        time.sleep(CPU_WINDOW_S)
        m1 = metrics()
        wall = m1["Timestamp"] - m0["Timestamp"]
        delta = lambda k: m1.get(k, 0) - m0.get(k, 0)
        out["cpu_window_s"] = wall
        out["cpu_percent"] = 100 * delta("TaskDuration") / wall
        out["script_percent"] = 100 * delta("ScriptDuration") / wall
        out["layout_paint_percent"] = 100 * (delta("LayoutDuration") + delta("RecalcStyleDuration")) / wall
        stats = d.execute_script("return window.plantdDashboard.stats")
        out["frames"] = stats["frames"] - frames0
        lat = stats["drawnAfterMs"]
        out["latency_samples"] = len(lat)
        out["latency_p50_ms"] = pct(lat, 0.5)
        out["latency_p99_ms"] = pct(lat, 0.99)
    finally:
        d.quit()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
