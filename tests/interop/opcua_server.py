"""An independent OPC UA server (python asyncua) for plantd's browse: an object `Boiler` under
Objects with a Double `Temperature`, a String `Label` and an object `Burner` holding a Boolean
`Flame`.

Usage: python3 opcua_server.py PORT
Prints "ready" once it listens, then serves until it is killed.
"""

import asyncio
import sys

from asyncua import Server, ua


async def main(port):
    server = Server()
    await server.init()
    server.set_endpoint(f"opc.tcp://127.0.0.1:{port}/")
    server.set_security_policy([ua.SecurityPolicyType.NoSecurity])
    ns = await server.register_namespace("urn:plantd:interop:boiler")
    boiler = await server.nodes.objects.add_object(ua.NodeId("Boiler", ns), ua.QualifiedName("Boiler", ns))
    await boiler.add_variable(ua.NodeId("Boiler.Temperature", ns), ua.QualifiedName("Temperature", ns),
                              71.5, ua.VariantType.Double)
    await boiler.add_variable(ua.NodeId("Boiler.Label", ns), ua.QualifiedName("Label", ns),
                              "north boiler", ua.VariantType.String)
    burner = await boiler.add_object(ua.NodeId("Boiler.Burner", ns), ua.QualifiedName("Burner", ns))
    await burner.add_variable(ua.NodeId("Boiler.Burner.Flame", ns), ua.QualifiedName("Flame", ns),
                              True, ua.VariantType.Boolean)
    async with server:
        print("ready", flush=True)
        while True:
            await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
