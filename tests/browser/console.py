"""The plantd console in headless Chromium, through WebDriver (selenium), against `plantd up`.

usage: console.py BASE_URL PASSWORD SCREENSHOT_DIR SIM_ENDPOINT EDGE_URL MODBUS_PORT

Prints "ok <step>" per step passed; exits non-zero at the first failure. Uses Debian's chromium
and chromedriver from PATH (no driver download).
"""

import json
import os
import random
import shutil
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

BASE, PASSWORD, SHOTS, SIM, EDGE, MODBUS_PORT = sys.argv[1:7]
EMAIL = "admin@localhost"


def ok(step):
    print(f"ok {step}", flush=True)


def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000", "--lang=en-US"]:
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)


def wait(d, what, timeout=30):
    return WebDriverWait(d, timeout, poll_frequency=0.2).until(lambda _: what())


def api(d, method, path, body=None):
    """Calls the API from the page, as the page's scripts do (session cookie, same origin)."""
    return d.execute_async_script(
        """
        const [method, path, body, done] = arguments;
        fetch(path, {method, credentials: 'same-origin',
                     headers: body === null ? {} : {'Content-Type': 'application/json'},
                     body: body === null ? undefined : JSON.stringify(body)})
          .then(async r => done({status: r.status, json: await r.json().catch(() => null)}))
          .catch(e => done({status: 0, json: String(e)}));
        """,
        method, path, body)


def shot(d, name):
    path = os.path.join(SHOTS, name + ".png")
    d.save_screenshot(path)


def main():
    d = browser()
    d.set_script_timeout(30)
    try:
        run(d)
    finally:
        d.quit()


def run(d):
    # Log in: a page without a session leads to the login form, then back.
    d.get(BASE + "/dashboards")
    wait(d, lambda: "/login" in d.current_url)
    d.find_element(By.ID, "email").send_keys(EMAIL)
    d.find_element(By.ID, "password").send_keys(PASSWORD)
    d.find_element(By.CSS_SELECTOR, "form[action='/login'] button[type=submit]").click()
    wait(d, lambda: d.current_url.rstrip("/").endswith("/dashboards"))
    assert "Pump station" in d.page_source, "the demo dashboards are listed"
    ok("login")

    # A new dashboard from the list page, then a line chart of Pump_01 / Vibration_X in the editor.
    d.find_element(By.ID, "new-name").send_keys("Browser check")
    d.find_element(By.CSS_SELECTOR, "form[data-action='/v1/dashboards'] button[type=submit]").click()
    wait(d, lambda: d.current_url.endswith("/edit"))
    dash_id = d.current_url.split("/dashboards/")[1].split("/")[0]
    wait(d, lambda: d.execute_script("return !!window.plantdEditor"))
    # Ready when the connector has read what the simulator says Vibration_X measures.
    wait(d, lambda: ((api(d, "GET", "/v1/assets/Pump_01/tags/Vibration_X")["json"] or {}).get("data") or {})
         .get("unit") == "mm/s", timeout=60)
    add_line_chart(d)
    saved = d.execute_async_script(
        "const done = arguments[0]; window.plantdEditor.save().then(() => done(true), e => done(String(e)));")
    assert saved is True, f"save failed: {saved}"
    stored = api(d, "GET", f"/v1/dashboards/{dash_id}")
    widgets = stored["json"]["data"]["layout"]["widgets"]
    charts = [w for w in widgets if w["type"] == "line_chart"]
    assert charts and charts[0]["query"]["asset_id"] == "Pump_01", widgets
    assert "Vibration_X" in charts[0]["query"]["tags"], widgets
    assert charts[0]["options"]["unit"] == "mm/s" and charts[0]["options"]["max"] == 10, widgets
    ok("dashboard_created")

    # The view draws the history, then points arriving on the WebSocket, without a reload.
    d.get(f"{BASE}/dashboards/{dash_id}")
    wait(d, lambda: d.execute_script(
        "const s = window.plantdDashboard && window.plantdDashboard.stats; return s && s.frames > 0"))
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#grid canvas"))
    ok("chart_drawn")
    before = d.execute_script("return Object.assign({}, window.plantdDashboard.stats)")
    wait(d, lambda: d.execute_script(
        "const s = window.plantdDashboard.stats; return s.pointsReceived > arguments[0] && s.frames > arguments[1]",
        before["pointsReceived"], before["frames"]), timeout=30)
    ok("live_points_drawn")
    shot(d, "dashboard")

    # An alert raised while the alerts page is open appears there live, and is acknowledged.
    d.get(BASE + "/alerts")
    wait(d, lambda: d.execute_script("return !!(window.plantdConsole && window.plantdConsole.connected)"))
    # (The demo plant reads the simulator through its edge agent; this data source of the
    # platform's own, switched off, names the points the test sends and is browsed below: it
    # lists the pump's vibration variables, which the browse page shows ticked.)
    made = api(d, "POST", "/v1/data-sources", {
        "name": "Simulator (browse check)", "type": "opcua", "enabled": False,
        "config": {"endpoint": SIM, "security_mode": "None", "nodes": [
            {"node_id": f"ns=2;s=Pump_01.Vibration_{axis}", "asset_id": "Pump_01",
             "tag_name": f"Vibration_{axis}"} for axis in "XYZ"]}})
    assert made["status"] == 201, made
    source = made["json"]["data"]
    rule = api(d, "POST", "/v1/alert-rules", {
        "name": "Browser check: vibration", "severity": "critical", "data_source_id": source["id"],
        "asset_id": "Pump_01", "auto_resolve": False,
        "condition": {"tag_name": "Vibration_X", "operator": "gt", "value": 50, "duration_seconds": 0}})
    assert rule["status"] == 201, rule
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ingest = api(d, "POST", "/v1/telemetry", {"data_source_id": source["id"], "data": [
        {"asset_id": "Pump_01", "tag_name": "Vibration_X", "value": 64.0, "timestamp": now}]})
    assert ingest["status"] == 200, ingest
    row_css = "#alerts-table tbody tr[data-status='active']"

    def new_row():
        for row in d.find_elements(By.CSS_SELECTOR, row_css):
            if "Browser check: vibration" in row.text:
                return row
        return None

    row = wait(d, new_row)
    ok("alert_appeared_live")
    alert_id = row.get_attribute("data-alert-id")
    note = row.find_element(By.CSS_SELECTOR, "input[name=note]")
    note.send_keys("checked by the browser test")
    row.find_element(By.XPATH, ".//button[normalize-space()='Acknowledge']").click()
    wait(d, lambda: d.find_elements(
        By.CSS_SELECTOR, f"#alerts-table tr[data-alert-id='{alert_id}'][data-status='acknowledged']"))
    stored = api(d, "GET", "/v1/alerts?status=acknowledged")["json"]["data"]
    mine = next(a for a in stored if a["id"] == alert_id)
    assert mine["note"] == "checked by the browser test", mine
    ok("alert_acknowledged")
    shot(d, "alerts")

    # The overview's latest values follow the stream.
    d.get(BASE + "/")
    cell = "tr[data-asset='Pump_01'][data-tag='Vibration_X'] time"
    first = wait(d, lambda: d.find_elements(By.CSS_SELECTOR, cell))[0].get_attribute("datetime")
    wait(d, lambda: d.find_element(By.CSS_SELECTOR, cell).get_attribute("datetime") != first)
    # A series whose first point arrives after the page loaded (a source that connected late)
    # gets its row and its asset's card without a reload.
    late = api(d, "POST", "/v1/telemetry", {"data": [
        {"asset_id": "Late_Asset", "tag_name": "Level", "value": 12.5,
         "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]})
    assert late["status"] == 200, late
    wait(d, lambda: d.find_elements(
        By.CSS_SELECTOR, "article.card[data-asset='Late_Asset'] tr[data-tag='Level'] td.value"))
    assert d.find_element(
        By.CSS_SELECTOR, "tr[data-asset='Late_Asset'][data-tag='Level'] td.value").text == "12.500"
    ok("overview_live")
    shot(d, "overview")
    # Searched, the overview shows the matching asset only and follows just its series.
    d.find_element(By.ID, "overview-q").send_keys("pump_01")
    d.find_element(By.CSS_SELECTOR, "form[role='search'] button[type='submit']").click()
    wait(d, lambda: "q=pump_01" in d.current_url)
    assert {c.get_attribute("data-asset") for c in d.find_elements(By.CSS_SELECTOR, "article.card")} == {"Pump_01"}
    first = wait(d, lambda: d.find_elements(By.CSS_SELECTOR, cell))[0].get_attribute("datetime")
    wait(d, lambda: d.find_element(By.CSS_SELECTOR, cell).get_attribute("datetime") != first)
    ok("overview_search_live")
    d.get(f"{BASE}/dashboards/{dash_id}/edit")
    wait(d, lambda: d.execute_script("return !!window.plantdEditor"))
    shot(d, "editor")
    pump = next(x for x in api(d, "GET", "/v1/dashboards")["json"]["data"] if x["name"] == "Pump station")
    d.get(f"{BASE}/dashboards/{pump['id']}")
    wait(d, lambda: d.execute_script(
        "const s = window.plantdDashboard && window.plantdDashboard.stats; return s && s.frames > 0"))
    time.sleep(2)
    shot(d, "pump-station")

    # A data source's browse page: the simulator's address space, opened level by level, shows
    # the variables it collects ticked.
    d.get(BASE + "/data-sources")
    d.find_element(By.CSS_SELECTOR, "tr[data-source-id] td a").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#browse-tree button.tree-toggle"))
    def open_object(name):
        toggle = wait(d, lambda: [b for b in d.find_elements(By.CSS_SELECTOR, "#browse-tree button.tree-toggle")
                                  if name in b.text])[0]
        toggle.click()
    open_object("Simulation")
    open_object("Pump_01")
    box = wait(d, lambda: [b for b in d.find_elements(By.CSS_SELECTOR, "#browse-tree input[type=checkbox]")
                           if "Vibration_X" in b.get_attribute("data-node")])[0]
    assert box.is_selected(), "Vibration_X is collected"
    assert "ticked variables" in d.find_element(By.ID, "browse-save").text
    ok("data_source_browsed")
    shot(d, "browse")

    # Fleet: a group and an enrollment token (its secret shown once), a device registered from the
    # form (its MQTT login shown once), its page, and a command sent from it.
    d.get(BASE + "/fleet")
    d.find_element(By.ID, "group-name").send_keys("Line 1")
    d.find_element(By.CSS_SELECTOR, "form[data-action='/v1/fleet/groups'] button[type=submit]").click()
    wait(d, lambda: "Line 1" in d.execute_script("const t = document.getElementById('groups'); return t ? t.textContent : ''"))
    Select(d.find_element(By.ID, "token-group")).select_by_visible_text("Line 1")
    d.find_element(By.ID, "token-uses").send_keys("5")
    d.find_element(By.CSS_SELECTOR, "form[data-action='/v1/fleet/enrollment/token'] button[type=submit]").click()
    secret = wait(d, lambda: d.find_element(By.CSS_SELECTOR, "form[data-action='/v1/fleet/enrollment/token'] output code").text)
    assert secret.startswith("pde_"), secret
    d.get(BASE + "/devices")
    d.find_element(By.ID, "device-name").send_keys("Gateway 7")
    d.find_element(By.ID, "device-serial").send_keys("GW-7")
    Select(d.find_element(By.ID, "device-group")).select_by_visible_text("Line 1")
    d.find_element(By.CSS_SELECTOR, "form[data-action='/v1/fleet/devices'] button[type=submit]").click()
    login = wait(d, lambda: d.find_element(By.CSS_SELECTOR, "form[data-action='/v1/fleet/devices'] output").text)
    assert "pdm_" in login and "plantd/devices/" in login, login
    shot(d, "device-registered")
    d.get(BASE + "/devices?status=unknown")
    d.find_element(By.LINK_TEXT, "Gateway 7").click()
    wait(d, lambda: "GW-7" in d.find_element(By.TAG_NAME, "main").text)
    d.find_element(By.ID, "cmd-name").send_keys("reboot")
    d.find_element(By.ID, "cmd-params").send_keys('{"delay_s": 5}')
    d.find_element(By.CSS_SELECTOR, "form[data-action$='/command'] button[type=submit]").click()
    commands = "const t = document.getElementById('commands'); return t ? t.textContent : ''"
    wait(d, lambda: "reboot" in d.execute_script(commands))
    assert "queued" in d.execute_script(commands)
    shot(d, "device")
    # An alert rule watching the group: its devices going offline.
    d.get(BASE + "/alert-rules")
    d.find_element(By.ID, "new-name").send_keys("Line 1 gateway offline")
    Select(d.find_element(By.ID, "new-ds")).select_by_visible_text("Line 1")
    d.find_element(By.ID, "new-tag").send_keys("online")
    Select(d.find_element(By.ID, "new-op")).select_by_value("lt")
    d.find_element(By.ID, "new-value").send_keys("1")
    d.find_element(By.CSS_SELECTOR, "form.rule-form[data-method=POST] button[type=submit]").click()
    # Read in one script: the page reloads after the answer, so elements go stale.
    wait(d, lambda: d.execute_script(
        "return Array.from(document.querySelectorAll('table.list tbody tr')).some(r =>"
        " r.textContent.includes('Line 1 gateway offline') && r.textContent.includes('Line 1 / every asset'))"))
    ok("fleet_pages")

    # OTA: a package uploaded from the page (multipart, with its progress bar), released, and
    # deployed to Line 1; Gateway 7 never answers, so the page shows it fail after its timeout
    # and the deployment roll back, live.
    firmware = os.path.join(SHOTS, "gateway-fw.bin")
    with open(firmware, "wb") as f:
        f.write(os.urandom(4 * 1024 * 1024))
    d.get(BASE + "/ota/packages")
    d.find_element(By.ID, "pkg-file").send_keys(firmware)
    d.find_element(By.ID, "pkg-version").send_keys("1.0.0")
    d.find_element(By.ID, "pkg-type").send_keys("gateway")
    d.find_element(By.CSS_SELECTOR, "#package-upload button[type=submit]").click()
    packages = "const t = document.getElementById('packages'); return t ? t.textContent : ''"
    wait(d, lambda: "gateway-fw.bin" in d.execute_script(packages) and "draft" in d.execute_script(packages))
    d.execute_script("window.confirm = () => true")
    d.find_element(By.CSS_SELECTOR, "form[data-action$='/release'] button[type=submit]").click()
    wait(d, lambda: "released" in d.execute_script(packages))
    shot(d, "ota-packages")
    d.get(BASE + "/ota/deployments")
    d.find_element(By.ID, "dep-name").send_keys("1.0.0 to Line 1")
    Select(d.find_element(By.ID, "dep-group")).select_by_visible_text("Line 1 (1)")
    Select(d.find_element(By.ID, "dep-strategy")).select_by_value("all_at_once")
    timeout = d.find_element(By.ID, "dep-timeout")
    timeout.clear()
    timeout.send_keys("3")
    d.find_element(By.CSS_SELECTOR, "form[data-action='/v1/ota/deployments'] button[type=submit]").click()
    wait(d, lambda: "/ota/deployments/" in d.current_url and d.find_elements(By.ID, "deployment-devices"))
    state = "const c = document.querySelector('#deployment-devices [data-state]'); return c ? c.dataset.state : ''"
    wait(d, lambda: d.execute_script(state) == "notified")
    wait(d, lambda: d.execute_script(
        "const b = document.querySelector('#deployment-status .badge'); return b ? b.dataset.status : ''") == "rolled_back")
    assert d.execute_script(state) == "failed", d.execute_script(state)
    assert "no answer in time" in d.find_element(By.ID, "deployment-devices").text
    assert "phase 1: 1 of 1" in d.find_element(By.ID, "deployment-reason").text
    shot(d, "ota-deployment")
    ok("ota_pages")

    drained = ml_datasets(d)
    ml_models(d)
    drained += sql_lab(d)
    drained += bi_admin(d)
    # Last: the edge agent's console shares the host (and so the session cookie's name).
    drained += edge_setup(d)

    errors = drained + [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, json.dumps(errors, indent=1)
    ok("no_console_errors")
    print(f"screenshots: {SHOTS}", flush=True)


def edge_setup(d):
    """The edge agent of `plantd up` (the same login): its setup wizard shows the host's network
    and adds a pump from a template over Modbus TCP (setup.js posts the CSV line); a bad asset id
    is refused with its field named. Returns the browser log read meanwhile."""
    severe = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    d.get(EDGE + "/login")
    d.find_element(By.ID, "email").send_keys(EMAIL)
    d.find_element(By.ID, "password").send_keys(PASSWORD)
    d.find_element(By.CSS_SELECTOR, "form[action='/login'] button[type=submit]").click()
    wait(d, lambda: "/login" not in d.current_url)
    d.get(EDGE + "/setup")
    wait(d, lambda: d.find_elements(By.ID, "setup-template"))
    rows = d.find_elements(By.CSS_SELECTOR, "#setup-interfaces tbody tr")
    assert any("127.0.0.1/8" in r.text for r in rows), [r.text for r in rows]
    Select(d.find_element(By.ID, "template")).select_by_value("centrifugal_pump")
    Select(d.find_element(By.ID, "template-protocol")).select_by_value("modbus")
    assert d.find_element(By.ID, "template-port").get_attribute("value") == "502"
    asset = d.find_element(By.ID, "template-asset")
    asset.send_keys("Pump,07")
    d.find_element(By.ID, "template-host").send_keys("127.0.0.1")
    port = d.find_element(By.ID, "template-port")
    port.clear()
    port.send_keys(MODBUS_PORT)
    d.find_element(By.CSS_SELECTOR, "#setup-template button[type=submit]").click()
    wait(d, lambda: "asset_id" in d.find_element(By.CSS_SELECTOR, "#setup-template .upload-errors").text)
    # (The refusal's 400 is the browser's log line; anything else is an error.)
    severe += [e for e in d.get_log("browser") if e["level"] == "SEVERE" and "/import/csv" not in e["message"]]
    asset.clear()
    asset.send_keys("Pump_07")
    d.find_element(By.CSS_SELECTOR, "#setup-template button[type=submit]").click()
    wait(d, lambda: "Pump_07 added" in d.find_element(By.CSS_SELECTOR, "#setup-template output").text)
    assert d.execute_script("return window.plantdSetup.added") == 1
    assets = api(d, "GET", "/v1/provisioning/assets")["json"]["data"]
    pump = next(a for a in assets if a["asset_id"] == "Pump_07")
    assert pump["protocol"] == "modbus" and pump["sensors"][0] == {"name": "Vibration_X", "address": "0"}, pump
    # It reads the simulator: the pump's values arrive at the agent.
    wait(d, lambda: any(p["tag_name"] == "Vibration_X" for p in
                        (api(d, "GET", "/v1/telemetry/latest?asset_id=Pump_07")["json"] or {}).get("data") or []),
         timeout=30)
    shot(d, "edge-setup")
    ok("edge_setup")
    return severe + [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


TEXT_OF = "const t = document.getElementById(arguments[0]); return t ? t.textContent : ''"
SELECTED_TEXT = "const t = document.querySelector(arguments[0]); return t ? t.textContent : ''"


def ml_datasets(d):
    """ML datasets: a CSV file refused (each bad line listed), then uploaded to the dataset it
    created; its page (column profiles with histograms), two label classes, the labeling page
    driven by keys (label, label, skip, flag, undo twice: the API has the rows as before), a
    version, a range rule validated to its grade, and a dataset from telemetry whose labeling page
    draws the trend around the row. Returns the browser's severe log entries it read (the refused
    upload's 400 excepted), since reading the log empties it."""
    good = os.path.join(SHOTS, "readings.csv")
    bad = os.path.join(SHOTS, "readings-bad.csv")
    temps = [21.5, 22.0, 22.4, 80.0, 21.9, 22.8, 23.1, 22.2]   # one of 8 out of 0..50: score 87.5, grade B
    with open(good, "w") as f:
        f.write("timestamp,temp,pressure,state\n")
        for i, t in enumerate(temps):
            f.write(f"2026-01-01T00:{i:02d}:00Z,{t},{1 + i / 100:.2f},{'warn' if i % 3 == 0 else 'ok'}\n")
    with open(bad, "w") as f:
        f.write("timestamp,temp,pressure,state\n2026-01-01T00:00:00Z,21.5,1.00,ok\n"
                "2026-01-01T00:01:00Z,22.0\n2026-01-01T00:02:00Z,22.4,1.02,ok,extra\n")
    severe = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]

    d.get(BASE + "/ml/datasets")
    d.find_element(By.ID, "ds-name").send_keys("Browser check readings")
    file_input = d.find_element(By.ID, "ds-file")
    file_input.send_keys(bad)
    d.find_element(By.CSS_SELECTOR, "#dataset-upload button[type=submit]").click()
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#ds-upload-errors li")) >= 2)
    refused = d.find_element(By.ID, "ds-upload-errors").text
    assert "line" in refused, refused
    assert "without rows" in d.find_element(By.CSS_SELECTOR, "#dataset-upload .form-error").text
    severe += [e for e in d.get_log("browser") if e["level"] == "SEVERE" and "/upload" not in e["message"]]
    d.execute_script("arguments[0].value = ''", file_input)
    file_input.send_keys(good)
    d.find_element(By.CSS_SELECTOR, "#dataset-upload button[type=submit]").click()
    # Read in one script: the page reloads after the upload, so elements go stale.
    dataset_id = wait(d, lambda: d.execute_script(
        "const r = Array.from(document.querySelectorAll('#datasets tr[data-dataset-id]'))"
        ".filter(r => r.textContent.includes(arguments[0]));"
        "return r.length === 1 && r[0].dataset.rows === '8' ? r[0].dataset.datasetId : null",
        "Browser check readings"))
    shot(d, "ml-datasets")
    ok("ml_dataset_uploaded")

    # Its page: every column profiled, number columns with their histogram.
    d.get(f"{BASE}/ml/datasets/{dataset_id}")
    for column in ["temp", "pressure"]:
        bars = d.find_elements(By.CSS_SELECTOR, f"#columns tr[data-column='{column}'] svg.histogram rect")
        assert len(bars) == 10, (column, len(bars))
        assert d.find_element(By.CSS_SELECTOR, f"#columns tr[data-column='{column}'] svg.histogram").is_displayed()
    assert "warn" in d.find_element(By.CSS_SELECTOR, "#columns tr[data-column='state']").text
    for name in ["normal", "fault"]:
        d.find_element(By.ID, "class-name").send_keys(name)
        d.find_element(By.CSS_SELECTOR, "#class-form button[type=submit]").click()
        wait(d, lambda: name in d.execute_script(TEXT_OF, "label-classes"))
    classes = {c["name"]: c["id"] for c in api(d, "GET", f"/v1/ml/datasets/{dataset_id}/label-classes")["json"]["data"]}
    shot(d, "ml-dataset")
    ok("ml_dataset_page")

    # The labeling page, by keys: 1 and 2 label rows 1 and 2, s skips row 3, f flags row 4; u undoes
    # the flag, u again the skip (back on row 3). The counts follow; the API has rows 3 and 4 as before.
    d.get(f"{BASE}/ml/datasets/{dataset_id}/label")
    wait(d, lambda: d.execute_script("return !!(window.plantdLabel && window.plantdLabel.ready)"))
    assert d.find_element(By.ID, "row-id").text == "1"

    def press(key, then_row):
        ActionChains(d).send_keys(key).perform()
        wait(d, lambda: d.execute_script(
            "const h = window.plantdLabel; return h.pending === 0 && h.row === arguments[0]", then_row))

    def shown(*ids):
        return tuple(d.find_element(By.ID, i).text for i in ids)

    def class_count(name):
        return d.find_element(By.CSS_SELECTOR, f"#class-buttons button[data-class-id='{classes[name]}'] .count").text

    progress = lambda: d.find_element(By.ID, "label-progress").get_attribute("value")
    press("1", 2)
    assert shown("count-labeled", "count-skipped") == ("1", "0") and class_count("normal") == "1"
    press("2", 3)
    assert shown("count-labeled") == ("2",) and class_count("fault") == "1"
    press("s", 4)
    assert shown("count-labeled", "count-skipped") == ("2", "1") and progress() == "3", progress()
    press("f", 4)
    assert shown("count-flagged") == ("1",)
    assert d.find_element(By.ID, "row-state").get_attribute("data-flagged") == "true"
    shot(d, "ml-label")
    press("u", 4)
    assert shown("count-flagged") == ("0",)
    press("u", 3)
    assert shown("row-id", "count-labeled", "count-skipped") == ("3", "2", "0") and progress() == "2", progress()
    rows = api(d, "GET", f"/v1/ml/datasets/{dataset_id}/preview?page=1&per_page=100")["json"]["data"]["rows"]
    states = {r["row_id"]: (r["label_class_id"], r["skipped"], r["flagged"]) for r in rows}
    assert states[1] == (classes["normal"], False, False), states
    assert states[2] == (classes["fault"], False, False), states
    assert states[3] == (None, False, False) and states[4] == (None, False, False), states
    ok("ml_labeling_keys")

    # A version from the page, two versions' worth compared, a range rule and a validation's grade.
    d.get(f"{BASE}/ml/datasets/{dataset_id}")
    d.find_element(By.ID, "version-notes").send_keys("two rows labelled")
    d.find_element(By.CSS_SELECTOR, "#version-form button[type=submit]").click()
    wait(d, lambda: d.execute_script("return !!document.querySelector(\"#versions tr[data-version='1.0']\")"))
    assert "two rows labelled" in d.execute_script(TEXT_OF, "versions")
    d.find_element(By.CSS_SELECTOR, "#compare-form button[type=submit]").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#compare-summary tr[data-field='rows_added']"))
    assert d.find_element(By.CSS_SELECTOR, "#compare-summary tr[data-field='rows_added'] td").text == "0"
    d.find_element(By.ID, "rule-name").send_keys("temperature in range")
    Select(d.find_element(By.ID, "rule-type")).select_by_value("range")
    Select(d.find_element(By.ID, "rule-column")).select_by_value("temp")
    d.find_element(By.ID, "rule-min").send_keys("0")
    d.find_element(By.ID, "rule-max").send_keys("50")
    d.find_element(By.CSS_SELECTOR, "#rule-form button[type=submit]").click()
    wait(d, lambda: "temperature in range" in d.execute_script(TEXT_OF, "validation-rules"))
    d.find_element(By.ID, "validate-button").click()
    wait(d, lambda: d.execute_script("return !!(window.plantdDatasets && window.plantdDatasets.validations > 0)"))
    grade = d.find_element(By.CSS_SELECTOR, "#validation .grade").text
    assert grade == "B", grade
    assert d.find_element(By.CSS_SELECTOR, "#validation-issues td[data-violations]").text == "1"
    shot(d, "ml-validation")
    ok("ml_version_and_validation")

    # From telemetry (the form's default range: the last 24 hours, up to now): its labeling page
    # draws the trend around the row.
    d.get(BASE + "/ml/datasets")
    d.find_element(By.ID, "tm-name").send_keys("Browser check trend")
    d.find_element(By.ID, "tm-assets").send_keys("Pump_01")
    d.find_element(By.ID, "tm-tags").send_keys("Vibration_X")
    Select(d.find_element(By.ID, "tm-interval")).select_by_value("1m")
    d.find_element(By.CSS_SELECTOR, "#dataset-telemetry button[type=submit]").click()
    wait(d, lambda: d.find_elements(By.ID, "dataset-facts"))
    d.find_element(By.ID, "label-link").click()
    wait(d, lambda: d.execute_script("return !!(window.plantdLabel && window.plantdLabel.ready)"))
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#row-trend canvas"))
    shot(d, "ml-trend")
    ok("ml_telemetry_trend")
    return severe


def ml_models(d):
    """ML training and models: a dataset of 300 rows of three number columns (five rows far from
    the rest) uploaded from the datasets page; a model trained from the training page's form,
    its row followed live (no reload) to `completed`; the model's page with the score histogram,
    a far row tested as an anomaly; deployed to Pump_01 (its features read from the simulator's
    vibration tags), its live score chart drawing scores, and undeployed. One training request
    (the route allows 10 an hour)."""
    rng = random.Random(31)
    path = os.path.join(SHOTS, "vibration.csv")
    with open(path, "w") as f:
        f.write("vib_x,vib_y,vib_z\n")
        for i in range(300):
            far = i % 60 == 30
            f.write(",".join(f"{(9.0 if far else 2.0) + rng.uniform(-0.5, 0.5):.4f}" for _ in range(3)) + "\n")
    d.get(BASE + "/ml/datasets")
    d.find_element(By.ID, "ds-name").send_keys("Browser check vibration")
    d.find_element(By.ID, "ds-file").send_keys(path)
    d.find_element(By.CSS_SELECTOR, "#dataset-upload button[type=submit]").click()
    dataset_id = wait(d, lambda: d.execute_script(
        "const r = Array.from(document.querySelectorAll('#datasets tr[data-dataset-id]'))"
        ".filter(r => r.textContent.includes(arguments[0]));"
        "return r.length === 1 && r[0].dataset.rows === '300' ? r[0].dataset.datasetId : null",
        "Browser check vibration"))

    # Train from the form: the dataset's number columns come ticked; the job's row appears and
    # reaches `completed` without a reload (the page polls the job).
    d.get(BASE + "/ml/training")
    Select(d.find_element(By.ID, "train-dataset")).select_by_value(dataset_id)
    boxes = "#train-feature-boxes input[type=checkbox][name=features]"
    wait(d, lambda: sorted(b.get_attribute("value") for b in d.find_elements(By.CSS_SELECTOR, boxes))
         == ["vib_x", "vib_y", "vib_z"])
    assert all(b.is_selected() for b in d.find_elements(By.CSS_SELECTOR, boxes))
    d.find_element(By.ID, "train-name").send_keys("Browser check detector")
    d.execute_script("window.plantdStayed = true")
    d.find_element(By.CSS_SELECTOR, "#training-form button[type=submit]").click()
    job_id = wait(d, lambda: d.execute_script(
        "const r = Array.from(document.querySelectorAll('#training-jobs tr[data-job-id]'))"
        ".find(r => r.querySelector('td.name').textContent === arguments[0]);"
        "return r ? r.dataset.jobId : null", "Browser check detector"))
    row = f"#training-jobs tr[data-job-id='{job_id}']"
    wait(d, lambda: d.execute_script(
        "const r = document.querySelector(arguments[0]); return r && r.dataset.status", row) == "completed", timeout=90)
    assert d.execute_script("return window.plantdStayed === true"), "the page was reloaded"
    assert d.execute_script("return window.plantdModels.polls > 0 && window.plantdModels.finished > 0")
    assert float(d.find_element(By.CSS_SELECTOR, f"{row} td.progress progress").get_attribute("value")) == 1.0
    assert d.find_element(By.CSS_SELECTOR, f"{row} td.status .badge").get_attribute("data-status") == "completed"
    shot(d, "ml-training")
    ok("ml_training_live")

    # The model's page: the training rows' scores in 20 bins with the threshold; a far row tested.
    d.find_element(By.CSS_SELECTOR, f"{row} a.model-link").click()
    wait(d, lambda: "/ml/models/" in d.current_url and d.find_elements(By.ID, "model-facts"))
    model_id = d.current_url.rstrip("/").split("/ml/models/")[1]
    bars = d.find_elements(By.CSS_SELECTOR, "#score-histogram rect")
    assert len(bars) == 20, len(bars)
    assert sum(int(b.get_attribute("data-count")) for b in bars) == 300
    assert d.find_elements(By.CSS_SELECTOR, "#score-histogram line.threshold")
    assert d.find_element(By.CSS_SELECTOR, "#model-metrics [data-rows]").get_attribute("data-rows") == "300"
    for feature in ["vib_x", "vib_y", "vib_z"]:
        d.find_element(By.CSS_SELECTOR, f"#model-test input[data-feature='{feature}']").send_keys("40")
    d.find_element(By.CSS_SELECTOR, "#model-test button[type=submit]").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#test-result [data-anomaly]"))
    assert d.find_element(By.CSS_SELECTOR, "#test-result [data-anomaly]").get_attribute("data-anomaly") == "true"
    assert d.find_element(By.CSS_SELECTOR, "#test-result .is-anomaly").text == "true"
    assert d.execute_script("return window.plantdModels.tests") == 1
    shot(d, "ml-model")
    ok("ml_model_page")

    # Deployed to Pump_01 with the simulator's vibration tags: the live chart draws its scores.
    d.find_element(By.ID, "deploy-assets").send_keys("Pump_01")
    for feature, tag in [("vib_x", "Vibration_X"), ("vib_y", "Vibration_Y"), ("vib_z", "Vibration_Z")]:
        tag_input = d.find_element(By.CSS_SELECTOR, f"#model-deploy input[data-feature='{feature}']")
        assert tag_input.get_attribute("value") == feature
        tag_input.clear()
        tag_input.send_keys(tag)
    d.find_element(By.CSS_SELECTOR, "#model-deploy button[type=submit]").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#live-scores .score-asset[data-asset='Pump_01'] canvas"))
    stored = api(d, "GET", f"/v1/ml/models/{model_id}")["json"]["data"]
    assert stored["status"] == "deployed", stored
    assert stored["deployment"]["score_tag"] == f"anomaly_score:{model_id}", stored
    assert stored["deployment"]["feature_tags"]["vib_y"] == "Vibration_Y", stored
    wait(d, lambda: d.execute_script("return window.plantdModels.points > 0"), timeout=60)
    shot(d, "ml-model-deployed")
    d.execute_script("window.confirm = () => true")
    d.find_element(By.CSS_SELECTOR, "#undeploy button[type=submit]").click()
    wait(d, lambda: d.execute_script(
        "const b = document.querySelector('#model-facts .badge[data-status]');"
        "return !document.getElementById('live-scores') && b && b.dataset.status") == "ready")
    stored = api(d, "GET", f"/v1/ml/models/{model_id}")["json"]["data"]
    assert stored["status"] == "ready" and stored["deployment"] is None, stored
    ok("ml_model_deploy")


def sql_lab(d):
    """BI: SQL Lab runs the simulator's hourly averages with Ctrl+Enter and draws them as a table
    and a line chart; the query is saved and listed; a refused query names its position; a
    row-level-security rule created on its page limits what the member role sees in its test.
    Answers the browser's errors other than the refusal's own 400."""
    severe = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    d.get(BASE + "/bi")
    editor = d.find_element(By.ID, "sql-editor")
    editor.clear()
    editor.send_keys("SELECT date_trunc('minute', timestamp) AS minute, avg(value) AS vibration "
                     "FROM telemetry WHERE asset_id = 'Pump_01' AND tag_name = 'Vibration_X' "
                     "GROUP BY minute ORDER BY minute")
    editor.send_keys(Keys.CONTROL, Keys.ENTER)
    wait(d, lambda: d.execute_script("return window.plantdBi && window.plantdBi.answers") == 1)
    rows = d.find_elements(By.CSS_SELECTOR, "#sql-table tbody tr")
    assert rows, "the answer has rows"
    assert d.find_element(By.CSS_SELECTOR, "#sql-table thead").text.split() == ["minute", "vibration"]
    if len(rows) >= 2:
        wait(d, lambda: d.execute_script("return window.plantdBi.charts") == 1)
    d.find_element(By.ID, "save-name").send_keys("Pump 1 vibration by minute")
    d.find_element(By.CSS_SELECTOR, "#sql-save button[type=submit]").click()
    # Read in one script: the page reloads after the answer, so elements go stale.
    wait(d, lambda: "Pump 1 vibration by minute" in d.execute_script(SELECTED_TEXT, ".saved-queries"))
    shot(d, "sql-lab")
    editor = d.find_element(By.ID, "sql-editor")
    editor.clear()
    editor.send_keys("SELEC 1")
    d.find_element(By.CSS_SELECTOR, "#sql-run button[type=submit]").click()
    wait(d, lambda: "Line: 1, Column: 1" in d.find_element(By.CSS_SELECTOR, '[data-error-for="sql"]').text)
    severe += [e for e in d.get_log("browser") if e["level"] == "SEVERE" and "/v1/bi/query/execute" not in e["message"]]
    ok("sql_lab")

    d.get(BASE + "/bi/rls")
    d.find_element(By.ID, "rule-name").send_keys("members see pump 1")
    d.find_element(By.ID, "rule-clause").send_keys("asset_id = 'Pump_01'")
    for box in d.find_elements(By.CSS_SELECTOR, "input[name=roles]"):
        if box.get_attribute("value") != "member" and box.is_selected():
            box.click()
    d.find_element(By.CSS_SELECTOR, "form[data-action='/v1/bi/rls/rules'] button[type=submit]").click()
    wait(d, lambda: "members see pump 1" in d.execute_script(SELECTED_TEXT, "table.list"))
    d.find_element(By.CSS_SELECTOR, "#rls-test button[type=submit]").click()
    wait(d, lambda: d.execute_script("return window.plantdBi && window.plantdBi.answers") == 1)
    assert "asset_id = 'Pump_01'" in d.find_element(By.ID, "sql-summary").text
    assets = [r.text.split()[0] for r in d.find_elements(By.CSS_SELECTOR, "#sql-table tbody tr")]
    assert assets == ["Pump_01"], assets
    shot(d, "rls")
    ok("rls_page")
    return severe


def bi_admin(d):
    """BI administration: a report scheduled from its page and run by hand (recorded in its run
    history: `plantd up` has no SMTP relay, so the run fails and says why); embedding turned on,
    a guest token issued for a dashboard with a condition of its own, and the snippet's address
    opened: the kiosk page draws the dashboard's widgets from the token's data; the Regions page.
    Answers the browser's errors."""
    d.get(BASE + "/bi/reports")
    d.find_element(By.ID, "report-name").send_keys("Shift report")
    d.find_element(By.ID, "report-recipients").send_keys("ops@plant.example, lead@plant.example")
    d.find_element(By.CSS_SELECTOR, "form[data-action='/v1/bi/reports'] button[type=submit]").click()
    wait(d, lambda: "/bi/reports/" in d.current_url)
    assert "Shift report" in d.find_element(By.TAG_NAME, "h1").text
    d.find_element(By.CSS_SELECTOR, ".page-head form button[type=submit]").click()
    wait(d, lambda: "manual" in d.execute_script(SELECTED_TEXT, "#report-runs"))
    runs = d.execute_script(SELECTED_TEXT, "#report-runs")
    assert "error" in runs and "[smtp]" in runs, runs
    shot(d, "report")
    ok("reports_page")

    d.get(BASE + "/bi/embed")
    box = d.find_element(By.CSS_SELECTOR, "input[name=bi_embed_enabled]")
    if not box.is_selected():
        box.click()
    d.find_element(By.ID, "embed-origins").send_keys("https://portal.example.com")
    d.find_element(By.CSS_SELECTOR, "form[data-action='/v1/bi/config'] button[type=submit]").click()
    wait(d, lambda: d.execute_script("return !!document.getElementById('guest-token')"))
    d.find_element(By.ID, "embed-clause").send_keys("asset_id = 'Pump_01'")
    d.find_element(By.CSS_SELECTOR, "#guest-token button[type=submit]").click()
    wait(d, lambda: d.find_element(By.ID, "embed-snippet").is_displayed())
    code = d.find_element(By.ID, "embed-code").get_attribute("value")
    assert code.startswith('<iframe src="' + BASE + "/v1/bi-embed/embed/"), code
    shot(d, "embed-settings")
    url = d.find_element(By.ID, "embed-open").get_attribute("href")
    d.get(url)
    wait(d, lambda: d.execute_script("const e = document.getElementById('embed'); return e && e.dataset.loaded"))
    widgets = d.find_elements(By.CSS_SELECTOR, "#embed-grid .widget")
    assert widgets, "the embedded dashboard draws its widgets"
    if d.find_elements(By.CSS_SELECTOR, "#embed-grid .widget-line-chart"):
        wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#embed-grid .widget-line-chart .uplot"))
    assert not d.find_element(By.ID, "embed-error").is_displayed()
    # The framing page hands over a new token (postMessage): the next data request uses it.
    dash = d.find_element(By.ID, "embed").get_attribute("data-dashboard-id")
    fresh = api(d, "POST", "/v1/bi-embed/guest-token", {"dashboard_id": dash})
    assert fresh["status"] == 200, fresh
    loaded = d.execute_script("return document.getElementById('embed').dataset.loaded")
    d.execute_script("window.postMessage({type: 'plantd:guest-token', token: arguments[0]}, location.origin)",
                     fresh["json"]["data"]["token"])
    wait(d, lambda: d.execute_script("const e = document.getElementById('embed'); return e.dataset.loaded") != loaded)
    assert d.execute_script("return document.getElementById('embed').dataset.token") == fresh["json"]["data"]["token"]
    shot(d, "embedded-dashboard")
    ok("embed_page")

    # Regions: where the organization's data lives and the six regions (one instance: us-east).
    d.get(BASE + "/regions")
    assert d.find_element(By.ID, "primary-region").text == "us-east"
    rows = d.find_elements(By.CSS_SELECTOR, "#regions tbody tr")
    assert [r.get_attribute("data-region") for r in rows] == [
        "us-east", "us-west", "eu-west", "eu-central", "ap-southeast", "ap-northeast"], rows
    assert "this server" in rows[0].text and "healthy" in rows[0].text, rows[0].text
    assert "SOC 2, HIPAA, FedRAMP" in rows[0].text, rows[0].text
    assert d.find_element(By.ID, "no-replicas").is_displayed()
    shot(d, "regions")
    ok("regions_page")
    severe = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    return severe + provisioning(d)


def provisioning(d):
    """Provisioning: a CSV with a bad line is refused with the line named and nothing imported;
    the corrected file imports an asset, listed after the page reloads; a QR label's payload
    provisions another; a scan for devices says what it found. Returns the browser's severe log
    entries (the refused import's 400 aside)."""
    d.get(BASE + "/provisioning")
    bad = os.path.join(SHOTS, "twinbox_config.csv")
    with open(bad, "w") as f:
        f.write("asset_id,asset_type,protocol,host,port,sensors\n"
                "Tank_01,tank,modbus,127.0.0.1,502,Level:0\n"
                "Tank_02,tank,modbus,127.0.0.1,70000,Level:0\n")
    d.find_element(By.ID, "provision-file-input").send_keys(bad)
    d.find_element(By.CSS_SELECTOR, "#provision-file button[type=submit]").click()
    wait(d, lambda: d.find_element(By.CSS_SELECTOR, "#provision-file .upload-errors").is_displayed())
    errors = d.find_element(By.CSS_SELECTOR, "#provision-file .upload-errors").text
    assert "line 3.port" in errors, errors
    assert not d.find_elements(By.CSS_SELECTOR, "#provisioned tbody tr"), "nothing imported"
    shot(d, "provisioning-refused")
    severe = [e for e in d.get_log("browser")
              if e["level"] == "SEVERE" and "/v1/provisioning/import/csv" not in e["message"]]
    good = os.path.join(SHOTS, "plant.csv")
    with open(good, "w") as f:
        f.write("asset_id,asset_type,protocol,host,port,sensors\n"
                "Tank_01,tank,modbus,127.0.0.1,502,Level:0;Temperature:2\n")
    field = d.find_element(By.ID, "provision-file-input")
    field.clear()
    field.send_keys(good)
    d.find_element(By.CSS_SELECTOR, "#provision-file button[type=submit]").click()
    wait(d, lambda: "Imported 1 asset" in d.find_element(By.CSS_SELECTOR, "#provision-file output").text)
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#provisioned tbody tr")) == 1)
    row = d.find_element(By.CSS_SELECTOR, "#provisioned tbody tr").text
    assert "Tank_01" in row and "Level, Temperature" in row and "csv" in row, row
    d.find_element(By.ID, "provision-qr-payload").send_keys(
        '{"id": "Tank_07", "t": "tank", "h": "10.1.2.3", "s": [{"n": "Level", "a": 0}]}')
    d.find_element(By.CSS_SELECTOR, "#provision-qr button[type=submit]").click()
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#provisioned tbody tr")) == 2)
    assert "qr" in d.find_elements(By.CSS_SELECTOR, "#provisioned tbody tr")[1].text
    shot(d, "provisioning")
    # Discovery: a scan of loopback naming only the closed port 1 still finds the simulator's
    # OPC UA server, by its mDNS announcement (other simulators of this host may answer too).
    sim_port = SIM.rstrip("/").rsplit(":", 1)[1]
    d.find_element(By.ID, "discover-hosts").send_keys("127.0.0.1")
    d.find_element(By.ID, "discover-ports").send_keys("1")
    d.find_element(By.CSS_SELECTOR, "#discover button[type=submit]").click()
    wait(d, lambda: "among 1 address" in d.find_element(By.CSS_SELECTOR, "#discover output").text)
    rows = [r.text for r in d.find_elements(By.CSS_SELECTOR, "#discovered tbody tr")]
    assert any(f"127.0.0.1:{sim_port}" in r and "mdns_name" in r for r in rows), rows
    ok("provisioning_page")
    return severe + [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


def add_line_chart(d):
    """Adds a line chart through the editor's own controls and points it at Pump_01 / Vibration_X."""
    Select(d.find_element(By.ID, "editor-new-type")).select_by_value("line_chart")
    d.find_element(By.XPATH, "//button[normalize-space()='Add widget']").click()
    form = d.find_element(By.ID, "widget-form")
    title = form.find_element(By.CSS_SELECTOR, "[data-key='title']")
    title.clear()
    title.send_keys("Vibration X")
    asset = form.find_element(By.CSS_SELECTOR, "[data-key='query.asset_id']")
    asset.clear()
    asset.send_keys("Pump_01")
    tags = form.find_element(By.CSS_SELECTOR, "[data-key='query.tags']")
    tags.send_keys("Vibration_X\n")
    wait(d, lambda: "Vibration_X" in json.dumps(d.execute_script("return window.plantdEditor.model()")))
    # The first tag brings its unit and engineering range (the simulator publishes them).
    def chart_options():
        ws = d.execute_script("return window.plantdEditor.model()")["widgets"]
        return next((w.get("options", {}) for w in ws if w["type"] == "line_chart" and "Vibration_X" in w["query"]["tags"]), {})
    wait(d, lambda: chart_options().get("unit") == "mm/s")
    assert (chart_options().get("min"), chart_options().get("max")) == (0, 10), chart_options()
    wait(d, lambda: d.execute_script(
        "const u = document.querySelector(\"#widget-form [data-key='options.unit']\"); return u && u.value === 'mm/s'"))


if __name__ == "__main__":
    main()
