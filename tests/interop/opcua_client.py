"""An independent OPC UA client (python asyncua) against `plantd sim start`.

Usage: python3 opcua_client.py opc.tcp://127.0.0.1:PORT/ [None|Sign|SignAndEncrypt]
Checks browsing of Objects/Simulation/<asset>/<Variable>, reads with data types, the EURange and
EngineeringUnits properties, and a subscription with sampling and publishing intervals.
Prints one line per check and exits non-zero at the first failure.
"""

import asyncio
import sys
import tempfile

from asyncua import Client, ua


class Collect:
    def __init__(self):
        self.changes = []

    def datachange_notification(self, node, value, data):
        self.changes.append((node.nodeid.to_string(), value))


def check(ok, message):
    if not ok:
        print(f"FAIL: {message}")
        sys.exit(1)
    print(f"ok: {message}")


async def main(url, mode):
    client = Client(url=url, timeout=10)
    if mode != "None":
        tmp = tempfile.mkdtemp()
        from asyncua.crypto.cert_gen import setup_self_signed_certificate
        from cryptography.x509.oid import ExtendedKeyUsageOID
        from pathlib import Path
        cert, key = Path(tmp) / "cert.der", Path(tmp) / "key.pem"
        await setup_self_signed_certificate(
            key, cert, "urn:plantd:interop-client", "localhost",
            [ExtendedKeyUsageOID.CLIENT_AUTH], {"commonName": "interop"},
        )
        client.application_uri = "urn:plantd:interop-client"
        await client.set_security_string(f"Basic256Sha256,{mode},{cert},{key}")
    async with client:
        ns = await client.get_namespace_index("urn:plantd:sim")
        check(ns >= 1, f"namespace urn:plantd:sim has index {ns}")
        objects = client.nodes.objects
        sim = await objects.get_child([f"{ns}:Simulation"])
        assets = {(await a.read_browse_name()).Name for a in await sim.get_children()}
        for expected in ["Pump_01", "Motor_01", "HVAC_01", "Temperature_01", "Pressure_01",
                         "Level_01", "Flow_01", "Vibration_01"]:
            check(expected in assets, f"browse finds Objects/Simulation/{expected}")
        pump = await sim.get_child([f"{ns}:Pump_01"])
        names = {(await v.read_browse_name()).Name for v in await pump.get_children()}
        check({"Vibration_X", "Motor_Speed", "Run_Status", "Flow_Rate"} <= names,
              f"Pump_01 has its variables ({len(names)})")
        vib = client.get_node(f"ns={ns};s=Pump_01.Vibration_X")
        value = await vib.read_value()
        check(isinstance(value, float) and 0 <= value <= 10, f"Pump_01.Vibration_X = {value} (Double, 0-10)")
        speed = await client.get_node(f"ns={ns};s=Pump_01.Motor_Speed").read_data_type_as_variant_type()
        check(speed == ua.VariantType.Int32, f"Motor_Speed is {speed}")
        status = await client.get_node(f"ns={ns};s=Pump_01.Run_Status").read_value()
        check(isinstance(status, bool), f"Run_Status is a Boolean ({status})")
        rng = await (await vib.get_child(["0:EURange"])).read_value()
        check((rng.Low, rng.High) == (0.0, 10.0), f"EURange {rng.Low}..{rng.High}")
        eu = await (await vib.get_child(["0:EngineeringUnits"])).read_value()
        check(eu.DisplayName.Text == "mm/s", f"EngineeringUnits {eu.DisplayName.Text}")
        handler = Collect()
        sub = await client.create_subscription(200, handler)
        nodes = [client.get_node(f"ns={ns};s=Pump_01.{n}") for n in
                 ("Vibration_X", "Flow_Rate", "Motor_Current")]
        await sub.subscribe_data_change(nodes, sampling_interval=100)
        await asyncio.sleep(3.5)
        await sub.delete()
        seen = {n for n, _ in handler.changes}
        check(len(seen) == 3 and len(handler.changes) >= 6,
              f"subscription delivered {len(handler.changes)} data changes for {len(seen)} items")
    print("all OPC UA interop checks passed")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "None"))
