"""A Sparkplug B edge node whose payloads are encoded by pysparkplug, published with paho-mqtt
to a broker a plantd MQTT data source (payload_format sparkplug_b) subscribes to (issue 28).

Usage: sparkplug_node.py HOST PORT GROUP

Births with aliases, data by alias only, signed integers (pysparkplug zero-extends them), a
sequence gap after which plantd must ask for a rebirth (NCMD "Node Control/Rebirth"), a rebirth,
and a death. Prints "ok ..." per step.
"""

import queue
import sys
import time

import paho.mqtt.client as mqtt
import pysparkplug as sp

HOST, PORT, GROUP = sys.argv[1], int(sys.argv[2]), sys.argv[3]
NODE, DEVICE = "edge1", "pump"
D = sp.DataType


def now():
    return sp.get_current_timestamp()


def m(name, dtype, value, alias=None):
    return sp.Metric(timestamp=now(), name=name, datatype=dtype, value=value, alias=alias)


commands = queue.Queue()
c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"sp-{GROUP}")
c.on_message = lambda c, u, msg: commands.put(msg)
c.connect(HOST, PORT, keepalive=30)
c.loop_start()
c.subscribe(f"spBv1.0/{GROUP}/NCMD/{NODE}", qos=1)
time.sleep(0.5)


def publish(kind, payload, device=False):
    topic = f"spBv1.0/{GROUP}/{kind}/{NODE}" + (f"/{DEVICE}" if device else "")
    c.publish(topic, payload.encode(), qos=1).wait_for_publish(10)


def births(temperature):
    publish("NBIRTH", sp.NBirth(timestamp=now(), seq=0, metrics=(
        m("bdSeq", D.UINT64, 1),
        m("Node Control/Rebirth", D.BOOLEAN, False),
        m("Temperature", D.DOUBLE, temperature, alias=1),
        m("Offset", D.INT16, -2, alias=2),
        m("Running", D.BOOLEAN, True, alias=3),
    )))
    publish("DBIRTH", sp.DBirth(timestamp=now(), seq=1, metrics=(m("Pressure", D.INT8, -1, alias=10),)), device=True)


births(21.5)
publish("NDATA", sp.NData(timestamp=now(), seq=2, metrics=(m(None, D.DOUBLE, 22.5, alias=1),)))
publish("DDATA", sp.DData(timestamp=now(), seq=3, metrics=(m(None, D.INT8, -128, alias=10),)), device=True)
print("ok data", flush=True)

# A gap: seq 9 where 4 is due. plantd asks for a rebirth.
publish("NDATA", sp.NData(timestamp=now(), seq=9, metrics=(m(None, D.DOUBLE, 99.0, alias=1),)))
msg = commands.get(timeout=15)
cmd = sp.NCmd.decode(msg.payload)
assert any(x.name == "Node Control/Rebirth" and x.value for x in cmd.metrics), cmd
print("ok rebirth requested", flush=True)
births(30.0)
print("ok reborn", flush=True)
time.sleep(1)
publish("NDEATH", sp.NDeath(timestamp=now(), bd_seq_metric=m("bdSeq", D.UINT64, 1)))
print("ok death", flush=True)
c.loop_stop()
