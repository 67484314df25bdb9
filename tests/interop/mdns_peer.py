"""An independent mDNS (DNS-SD) peer for plantd's OPC UA discovery, with python-zeroconf.

usage: mdns_peer.py announce PORT      announce an OPC UA server (_opcua-tcp._tcp, TXT path=/plc,
                                       caps=DA) at 127.0.0.1:PORT; prints "ready", runs until killed
       mdns_peer.py browse PORT        browse _opcua-tcp._tcp for up to 20 s; prints the first
                                       server announced at port PORT as JSON, or exits 1
"""

import json
import socket
import sys
import time

from zeroconf import ServiceBrowser, ServiceInfo, ServiceListener, Zeroconf

TYPE = "_opcua-tcp._tcp.local."


def announce(port):
    zc = Zeroconf(interfaces=["127.0.0.1"])
    info = ServiceInfo(
        TYPE,
        f"zeroconf plc {port}.{TYPE}",
        addresses=[socket.inet_aton("127.0.0.1")],
        port=port,
        properties={"path": "/plc", "caps": "DA"},
        server="zeroconf-peer.local.",
    )
    zc.register_service(info)
    print("ready", flush=True)
    try:
        while True:
            time.sleep(1)
    finally:
        zc.unregister_service(info)
        zc.close()


def browse(port):
    zc = Zeroconf(interfaces=["127.0.0.1"])
    found = {}

    class Listener(ServiceListener):
        def add_service(self, zc, type_, name):
            info = zc.get_service_info(type_, name, timeout=3000)
            if info and info.port == port:
                found["server"] = {
                    "name": name,
                    "port": info.port,
                    "addresses": info.parsed_addresses(),
                    "path": (info.properties.get(b"path") or b"").decode(),
                    "caps": (info.properties.get(b"caps") or b"").decode(),
                }

        def update_service(self, zc, type_, name):
            self.add_service(zc, type_, name)

        def remove_service(self, zc, type_, name):
            pass

    ServiceBrowser(zc, TYPE, Listener())
    deadline = time.time() + 20
    while time.time() < deadline and "server" not in found:
        time.sleep(0.2)
    zc.close()
    if "server" not in found:
        print(f"no OPC UA server announced at port {port}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(found["server"]), flush=True)


if __name__ == "__main__":
    mode, port = sys.argv[1], int(sys.argv[2])
    announce(port) if mode == "announce" else browse(port)
