"""Independent check of plantd license keys with python's `cryptography` (issue 16).

Usage: license_check.py PUBLIC_KEY_PEM KEY LICENSE_ID PRODUCT_ID EXPIRES_UNIX TAMPERED_KEY

Verifies the key's Ed25519 signature with the published PEM public key, reads the payload
(format in docs/api.md, "License keys") and checks that the altered key is refused. Prints
"ok <step>" per step; exits non-zero on the first failure.
"""

import base64
import struct
import sys
import uuid

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key

PREFIX = "pdl_"


def split(key):
    assert key.startswith(PREFIX), "a plantd license key starts with pdl_"
    body = key[len(PREFIX):]
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    return raw[:-64], raw[-64:]


def parse(payload):
    version, = struct.unpack_from(">B", payload, 0)
    assert version == 1, f"version {version}"
    license_id = uuid.UUID(bytes=payload[1:17])
    product_id = uuid.UUID(bytes=payload[17:33])
    expires, count = struct.unpack_from(">qB", payload, 33)
    at = 42
    features = []
    for _ in range(count):
        n = payload[at]
        features.append(payload[at + 1:at + 1 + n].decode())
        at += 1 + n
    assert at == len(payload), "no bytes after the features"
    return license_id, product_id, expires, features


def main():
    pem, key, license_id, product_id, expires, tampered = sys.argv[1:7]
    public = load_pem_public_key(pem.encode())
    assert isinstance(public, Ed25519PublicKey), type(public)
    payload, signature = split(key)
    public.verify(signature, payload)  # raises InvalidSignature
    print("ok signature")
    lid, pid, exp, features = parse(payload)
    assert str(lid) == license_id, (lid, license_id)
    assert str(pid) == product_id, (pid, product_id)
    assert exp == int(expires), (exp, expires)
    assert features == ["mqtt", "opcua", "modbus"], features
    print("ok payload")
    payload, signature = split(tampered)
    try:
        public.verify(signature, payload)
    except InvalidSignature:
        print("ok tampered_rejected")
    else:
        sys.exit("the tampered key verified")


if __name__ == "__main__":
    main()
