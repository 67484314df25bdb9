"""An independent MQTT device (paho-mqtt) against plantd's device channel (issue 28).

Usage: mqtt_device.py API_BASE ADMIN_KEY HOST PORT TLS_PORT CA_FILE

Enrolls two devices with a token (no API key), then as device A over MQTT 3.1.1 and 5, plain
and TLS: logs in, subscribes to its command topic (granted) and B's (refused), publishes
telemetry and a heartbeat with QoS 1, receives a command created over HTTP and answers it.
A wrong password is refused. Prints one "ok ..." line per step; the Rust test checks them and
what plantd stored.
"""

import json
import queue
import sys
import time
import urllib.request

import paho.mqtt.client as mqtt

API, KEY, HOST, PORT, TLS_PORT, CA = sys.argv[1:7]
PORT, TLS_PORT = int(PORT), int(TLS_PORT)


def http(method, path, body=None, key=KEY):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(API + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)["data"]


token = http("POST", "/fleet/enrollment/token", {"tags": ["paho"]})["token"]
a = http("POST", "/fleet/devices", {"name": "paho A", "serial_number": "PAHO-A", "enrollment_token": token}, key=None)
b = http("POST", "/fleet/devices", {"name": "paho B", "serial_number": "PAHO-B", "enrollment_token": token}, key=None)
assert a["tags"] == ["paho"], a
print("ok enrolled", a["id"], b["id"])
creds, topics = a["mqtt"], a["mqtt"]["topics"]


def client(protocol, tls, password):
    events = queue.Queue()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=creds["client_id"], protocol=protocol)
    c.username_pw_set(creds["username"], password)
    if tls:
        c.tls_set(ca_certs=CA)
    c.on_connect = lambda c, u, flags, rc, props: events.put(("connack", rc))
    c.on_subscribe = lambda c, u, mid, rcs, props: events.put(("suback", rcs))
    c.on_message = lambda c, u, msg: events.put(("message", msg))
    c.connect(HOST, TLS_PORT if tls else PORT, keepalive=30)
    c.loop_start()
    return c, events


def wait(events, kind, secs=15):
    deadline = time.time() + secs
    while time.time() < deadline:
        try:
            k, v = events.get(timeout=max(0.1, deadline - time.time()))
        except queue.Empty:
            break
        if k == kind:
            return v
    raise SystemExit(f"no {kind} within {secs} s")


for protocol, pname in ((mqtt.MQTTv311, "3.1.1"), (mqtt.MQTTv5, "5")):
    for tls in (False, True):
        step = f"{pname} {'tls' if tls else 'plain'}"
        c, events = client(protocol, tls, creds["password"])
        rc = wait(events, "connack")
        assert not rc.is_failure, f"{step}: {rc}"
        c.subscribe("plantd/devices/%s/commands" % b["id"], qos=1)
        refused = wait(events, "suback")
        assert refused[0].is_failure, f"{step}: subscribing to B's commands was granted"
        c.subscribe(topics["commands"], qos=1)
        granted = wait(events, "suback")
        assert not granted[0].is_failure, f"{step}: {granted}"
        tag = "paho_" + pname.replace(".", "") + ("_tls" if tls else "")
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = {"data": [{"tag_name": tag, "value": 1.5, "timestamp": now}]}
        c.publish(topics["telemetry"], json.dumps(body), qos=1).wait_for_publish(15)
        c.publish(topics["heartbeat"], json.dumps({"cpu_percent": 33, "firmware_version": "2.0.0"}), qos=1).wait_for_publish(15)
        cmd = http("POST", f"/fleet/devices/{a['id']}/command", {"command": "blink", "params": {"step": step}})
        msg = wait(events, "message")
        got = json.loads(msg.payload)
        assert got["id"] == cmd["id"] and got["params"]["step"] == step, got
        answer = {"id": got["id"], "status": "succeeded", "result": {"step": step}}
        c.publish(topics["command_results"], json.dumps(answer), qos=1).wait_for_publish(15)
        c.disconnect()
        c.loop_stop()
        print("ok", step)

c, events = client(mqtt.MQTTv5, False, "pdm_wrong")
rc = wait(events, "connack")
assert rc.is_failure and rc.value == 0x86, rc
c.loop_stop()
print("ok refused", rc)
