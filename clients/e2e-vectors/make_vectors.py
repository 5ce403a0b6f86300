#!/usr/bin/env python3
"""Test vectors for Vigil's end-to-end encrypted panic streams, format version 1
(docs/design/e2e-streams.md, "The format" and "Member key boxes").

An implementation independent of both clients: Python `cryptography`'s AESGCM and HKDF, through
the one Python implementation of the format, Tests/e2e/e2e_vectors.py. Every key, kid, member secret and nonce below is FIXED so the output is
reproducible; the nonce is an input of the vector only (real sealing draws 12 random bytes).

    python3 clients/e2e-vectors/make_vectors.py > clients/e2e-vectors/vectors.json

The JS (clients/js/test/e2e.test.js) and Swift (Tests/VigilClientTests/E2ETests.swift) tests open
every vector and seal each one again with its nonce, expecting these bytes exactly.
"""
import json
import sys
from pathlib import Path

# The primitives come from one place: Tests/e2e/e2e_vectors.py (written from PROTOCOL.md's text
# alone, which also makes PROTOCOL.md's vector block). This file only picks the fixed inputs and
# the field order of vectors.json; Tests/e2e/test_e2e_vectors.py checks that running it gives
# vectors.json byte for byte.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "Tests" / "e2e"))
import e2e_vectors as ev  # noqa: E402

FIELDS = ["lat", "lon", "accuracy_m", "heading", "speed_mps", "note"]
b64url = ev.b64u


def fixed(start: int, count: int) -> bytes:
    """`count` bytes start, start+1, … (mod 256): fixed, visibly not random."""
    return bytes((start + i) % 256 for i in range(count))


def ordered(position: dict) -> dict:
    """The fields in FIELDS order, absent ones left out (the order the clients seal in)."""
    return {k: position[k] for k in FIELDS if k in position}


def seal_vector(name, key, kid_bytes, seq, status, nonce, position):
    kid = b64url(kid_bytes)
    pt = ev.pad(ev.location_plaintext(ordered(position)))
    return {
        "name": name,
        "key": b64url(key),
        "kid": kid,
        "seq": seq,
        "status": status,
        "nonce": b64url(nonce),
        "position": position,
        "plaintext": pt.decode("utf-8"),
        "plaintext_bytes": len(pt),
        "aad_hex": ev.aad(kid, seq, status).hex(),
        "sealed": ev.seal(key, kid, seq, status, ordered(position), nonce),
    }


def box_vector(name, member_secret, kid_bytes, member, stream_key, nonce):
    kid = b64url(kid_bytes)
    return {
        "name": name,
        "member_secret": b64url(member_secret),
        "kid": kid,
        "member": member,
        "stream_key": b64url(stream_key),
        "nonce": b64url(nonce),
        "wrap_key_hex": ev.wrap_key(member_secret).hex(),
        "aad_hex": ev.box_aad(kid, member).hex(),
        "box": ev.box(member_secret, kid, member, stream_key, nonce),
    }


def main():
    key = fixed(0x00, 32)
    kid = fixed(0xA0, 16)
    other_key = fixed(0x40, 32)
    other_kid = fixed(0xC0, 16)
    seals = [
        seal_vector("location update", key, kid, 7, "red", fixed(0x10, 12),
                    {"lat": 51.5007, "lon": -0.1246, "accuracy_m": 12.5, "heading": 270, "speed_mps": 1.25}),
        seal_vector("start with a multi-byte UTF-8 note", key, kid, 1, "amber", fixed(0x20, 12),
                    {"lat": 48.8584, "lon": 2.2945, "accuracy_m": 30,
                     "note": "Café on the 2nd floor — stuck in the lift, ça va 🙂 \"quoted\""}),
        seal_vector("minimal: lat and lon only, another key", other_key, other_kid, 1, "red", fixed(0x30, 12),
                    {"lat": -33.8568, "lon": 151.2153}),
    ]
    boxes = [
        box_vector("member box", fixed(0x80, 32), kid, 3, key, fixed(0x50, 12)),
        box_vector("member box, first member, other stream", fixed(0xE0, 32), other_kid, 1, other_key, fixed(0x60, 12)),
    ]
    out = {
        "format": "vigil e2e streams v1 (docs/design/e2e-streams.md)",
        "generator": "clients/e2e-vectors/make_vectors.py (Python cryptography: AESGCM, HKDF)",
        "seal": seals,
        "member_boxes": boxes,
    }
    json.dump(out, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
