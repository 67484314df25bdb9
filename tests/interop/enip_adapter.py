"""An independent EtherNet/IP adapter (cpppo's server) for plantd's discovery: it answers List
Identity over UDP and TCP. Argument: address (e.g. 127.0.0.1:44818). Prints "ready" before it
binds: the test scans again until it answers."""

import os
import sys

# What goes wrong shows in the test's message: stderr joins stdout, which the test reads.
os.dup2(1, 2)

from cpppo.server.enip.main import main

print("ready", flush=True)
sys.exit(main(argv=["--address", sys.argv[1], "Tag=INT"]))
