"""An SMTP server (aiosmtpd) for plantd's email notification test.

Usage: smtp_sink.py PORT CERT KEY USER PASSWORD OUT [accept-first]

Listens on 127.0.0.1:PORT, requires STARTTLS (with CERT/KEY) and AUTH as USER/PASSWORD, and
appends every message it accepts to OUT as one JSON line: mail_from, rcpt_tos, data, tls,
authenticated. The first message is answered "451 try again later" (a transient failure the
sender must retry), unless "accept-first" is given; later ones are accepted. Prints "ready"
once it listens.
"""

import json
import ssl
import sys
import threading

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

port, cert, key, user, password, out = sys.argv[1:7]
accept_first = sys.argv[7:8] == ["accept-first"]


class Sink:
    def __init__(self):
        self.seen = 0

    async def handle_DATA(self, server, session, envelope):
        self.seen += 1
        if self.seen == 1 and not accept_first:
            return "451 4.3.0 try again later"
        with open(out, "a", encoding="utf-8") as f:
            f.write(
                json.dumps(
                    {
                        "mail_from": envelope.mail_from,
                        "rcpt_tos": envelope.rcpt_tos,
                        "data": envelope.content.decode("utf-8", "replace"),
                        "tls": session.ssl is not None,
                        "authenticated": bool(session.authenticated),
                    }
                )
                + "\n"
            )
        return "250 OK"


def authenticate(server, session, envelope, mechanism, auth_data):
    ok = (
        isinstance(auth_data, LoginPassword)
        and auth_data.login.decode() == user
        and auth_data.password.decode() == password
    )
    return AuthResult(success=ok)


context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
context.load_cert_chain(cert, key)
controller = Controller(
    Sink(),
    hostname="127.0.0.1",
    port=int(port),
    tls_context=context,
    require_starttls=True,
    authenticator=authenticate,
    auth_required=True,
)
controller.start()
print("ready", flush=True)
threading.Event().wait()
