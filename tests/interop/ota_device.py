"""An independent OTA device (paho-mqtt, requests, cryptography) against plantd (issue 29).

Usage: ota_device.py API_BASE ADMIN_KEY HOST PORT

As an operator (the admin key): registers a device in a group, uploads a 3 MiB package as
multipart, releases it and deploys it to the group. As the device (its own credentials only):
receives the update command over MQTT 3.1.1, downloads the package with its password as the
bearer token, interrupted after the first MiB and resumed with `Range: bytes=N-` (206), checks
the SHA-256 against the command and the manifest, verifies the manifest's Ed25519 signature
with the organization's public key (PEM) using `cryptography`, and reports each step of SPEC 3
rule 2 on its ota topic. Then waits for the deployment to complete. Prints one "ok ..." line
per step; the Rust test checks them and what plantd stored.
"""

import base64
import hashlib
import json
import os
import queue
import sys
import time

import paho.mqtt.client as mqtt
import requests
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import load_pem_public_key

API, KEY, HOST, PORT = sys.argv[1:5]
PORT = int(PORT)
ADMIN = {"Authorization": "Bearer " + KEY}


def call(method, path, **kw):
    r = requests.request(method, API + path, headers=ADMIN, timeout=30, **kw)
    assert r.status_code < 300, (path, r.status_code, r.text)
    return r.json()["data"]


group = call("POST", "/fleet/groups", json={"name": "paho OTA"})
device = call("POST", "/fleet/devices", json={"name": "paho OTA device", "serial_number": "PAHO-OTA-1", "group_ids": [group["id"]]})
dev_id, password = device["id"], device["mqtt"]["password"]
topics = device["mqtt"]["topics"]
DEVICE = {"Authorization": "Bearer " + password}

firmware = os.urandom(3 * 1024 * 1024)
package = call(
    "POST",
    "/ota/packages",
    data={"version": "9.1.0", "device_type": "paho", "release_notes": "from python"},
    files={"file": ("paho-fw.bin", firmware, "application/octet-stream")},
)
assert package["sha256"] == hashlib.sha256(firmware).hexdigest(), package
assert package["size_bytes"] == len(firmware)
call("POST", f"/ota/packages/{package['id']}/release")
print("ok uploaded and released", package["id"])

commands = queue.Queue()
client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=dev_id, protocol=mqtt.MQTTv311)
client.username_pw_set(dev_id, password)
client.on_message = lambda c, u, m: commands.put(json.loads(m.payload))
client.connect(HOST, PORT)
client.loop_start()
result, _ = client.subscribe(topics["commands"], qos=1)
assert result == mqtt.MQTT_ERR_SUCCESS
time.sleep(0.5)


def report(deployment, state, message=None):
    body = {"deployment_id": deployment, "state": state}
    if message:
        body["message"] = message
    client.publish(topics["ota"], json.dumps(body), qos=1).wait_for_publish(10)


deployment = call(
    "POST",
    "/ota/deployments",
    json={"name": "paho rollout", "package_id": package["id"], "targets": {"type": "group", "group_id": group["id"]}, "strategy": "phased", "rollback_enabled": True},
)
command = commands.get(timeout=30)
assert command["command"] == "ota.update", command
params = command["params"]
assert params["deployment_id"] == deployment["id"]
print("ok update command received")

report(deployment["id"], "downloading")
url = params["download_url"]
# The first attempt breaks off after 1 MiB (a lost connection); the rest is asked for by range.
first = bytearray()
with requests.get(url, headers=DEVICE, stream=True, timeout=30) as r:
    assert r.status_code == 200, r.status_code
    assert r.headers.get("Accept-Ranges") == "bytes", r.headers
    for chunk in r.iter_content(64 * 1024):
        first.extend(chunk)
        if len(first) >= 1024 * 1024:
            break
first = bytes(first[: 1024 * 1024])
resumed = requests.get(url, headers={**DEVICE, "Range": f"bytes={len(first)}-"}, timeout=30)
assert resumed.status_code == 206, resumed.status_code
assert resumed.headers["Content-Range"] == f"bytes {len(first)}-{len(firmware) - 1}/{len(firmware)}", resumed.headers
data = first + resumed.content
print("ok resumed range", len(first), len(resumed.content))

report(deployment["id"], "verifying")
pkg = params["package"]
assert hashlib.sha256(data).hexdigest() == pkg["sha256"], "sha256 mismatch"
manifest = pkg["manifest"]
assert f"sha256={pkg['sha256']}\n" in manifest and f"size_bytes={len(data)}\n" in manifest, manifest
assert f"package_id={pkg['id']}\n" in manifest and "version=9.1.0\n" in manifest, manifest
print("ok sha256")
key = requests.get(params["public_key_url"], headers=DEVICE, timeout=30).json()["data"]
public = load_pem_public_key(key["public_key_pem"].encode())
signature = base64.b64decode(pkg["signature"])
public.verify(signature, manifest.encode())
try:
    public.verify(signature, manifest.replace("9.1.0", "9.1.1").encode())
    raise SystemExit("a forged manifest verified")
except InvalidSignature:
    pass
print("ok signature")

for step in ("backing_up", "installing", "health_check", "succeeded"):
    report(deployment["id"], step)

deadline = time.time() + 30
while True:
    d = call("GET", f"/ota/deployments/{deployment['id']}")
    if d["status"] == "completed":
        break
    assert time.time() < deadline, d
    time.sleep(0.3)
assert d["device_counts"]["succeeded"] == 1, d
print("ok deployment completed")
client.loop_stop()
client.disconnect()
