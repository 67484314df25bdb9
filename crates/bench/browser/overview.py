"""plantd-bench console, the overview at plant scale: headless Chromium through WebDriver.

usage: overview.py BASE_URL EMAIL PASSWORD

Prints one JSON object: the bytes the overview's first load transferred (Resource Timing
transferSize of the page and everything it fetched, fresh profile), the HTML's size, the rows it
shows, the time to the page's answer (first, and again once the server holds the latest values in
memory) and to DOM complete; then, over 20 s while the plant sends
points, the browser's CPU time per second of wall time (Chrome's Performance.getMetrics
TaskDuration and ScriptDuration) and how many of the page's rows were updated live.
"""

import json
import sys
import time

from selenium.webdriver.common.by import By

import chromium  # beside this script

BASE, EMAIL, PASSWORD = sys.argv[1:4]
CPU_WINDOW_S = 20


def wait(d, what, timeout=120):
    return chromium.wait(d, what, timeout)


def stamps(d):
    return d.execute_script(
        "return Array.from(document.querySelectorAll('#overview tr[data-asset] time'),"
        " t => t.getAttribute('datetime'))")


def main():
    d = chromium.browser()
    out = {}
    try:
        chromium.login(d, BASE, EMAIL, PASSWORD)
        d.get(BASE + "/")
        wait(d, lambda: d.execute_script("return document.readyState") == "complete")
        time.sleep(2)
        t = d.execute_script("""
            const nav = performance.getEntriesByType('navigation')[0];
            const res = performance.getEntriesByType('resource');
            return {total: nav.transferSize + res.reduce((a, r) => a + r.transferSize, 0),
                    html: nav.decodedBodySize, response: nav.responseEnd - nav.requestStart,
                    dom: nav.domComplete - nav.startTime};""")
        out["first_load_bytes"] = t["total"]
        out["html_bytes"] = t["html"]
        out["response_ms"] = t["response"]
        out["dom_complete_ms"] = t["dom"]
        out["rows"] = len(d.find_elements(By.CSS_SELECTOR, "#overview tr[data-asset]"))
        # Again, with the latest values in the server's memory.
        d.refresh()
        wait(d, lambda: d.execute_script("return document.readyState") == "complete")
        out["response_again_ms"] = d.execute_script(
            "const n = performance.getEntriesByType('navigation')[0]; return n.responseEnd - n.requestStart;")

        d.execute_cdp_cmd("Performance.enable", {"timeDomain": "timeTicks"})

        def metrics():
            m = d.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
            return {x["name"]: x["value"] for x in m}

        before = stamps(d)
        m0 = metrics()
        time.sleep(CPU_WINDOW_S)
        m1 = metrics()
        after = stamps(d)
        wall = m1["Timestamp"] - m0["Timestamp"]
        delta = lambda k: m1.get(k, 0) - m0.get(k, 0)
        out["cpu_window_s"] = wall
        out["cpu_percent"] = 100 * delta("TaskDuration") / wall
        out["script_percent"] = 100 * delta("ScriptDuration") / wall
        out["rows_updated"] = sum(1 for a, b in zip(before, after) if a != b)
    finally:
        d.quit()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
