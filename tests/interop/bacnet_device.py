"""An independent BACnet/IP device (bacpypes3) for plantd's discovery: it answers Who-Is with
I-Am. Arguments: address (e.g. 127.0.0.2/8:47808), device instance. Prints "ready" once bound."""

import asyncio
import os
import sys

from bacpypes3.app import Application
from bacpypes3.argparse import SimpleArgumentParser


async def main():
    # What goes wrong shows in the test's message: stderr joins stdout, which the test reads.
    os.dup2(1, 2)
    address, instance = sys.argv[1], sys.argv[2]
    args = SimpleArgumentParser().parse_args(
        ["--name", "Boiler_AHU", "--instance", instance, "--address", address]
    )
    Application.from_args(args)
    print("ready", flush=True)
    await asyncio.Future()


asyncio.run(main())
