"""An independent BACnet/IP device (bacpypes3) for plantd's discovery: it answers Who-Is with
I-Am. Arguments: address (e.g. 127.0.0.2/8:47808), device instance. Prints "ready" once bound."""

import asyncio
import sys

from bacpypes3.app import Application
from bacpypes3.argparse import SimpleArgumentParser


async def main():
    address, instance = sys.argv[1], sys.argv[2]
    args = SimpleArgumentParser().parse_args(
        ["--name", "Boiler_AHU", "--instance", instance, "--address", address]
    )
    Application.from_args(args)
    print("ready", flush=True)
    await asyncio.Future()


asyncio.run(main())
