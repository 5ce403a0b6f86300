"""The e2e test vectors in docs/PROTOCOL.md ("End-to-end encrypted streams") are what the
independent implementation (e2e_vectors.py, Python `cryptography`) computes, and each value opens
with its own associated data and with no other. No daemon needed."""
import json
import re
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidTag

import e2e_vectors as ev

PROTOCOL = Path(__file__).resolve().parents[2] / "docs/PROTOCOL.md"


def documented() -> dict:
    text = PROTOCOL.read_text()
    block = re.search(r"<!-- e2e-vectors:begin -->\s*```json\n(.*?)\n```\s*<!-- e2e-vectors:end -->", text, re.S)
    assert block, "PROTOCOL.md has no e2e vector block"
    return json.loads(block.group(1))


def test_protocol_md_holds_the_vectors_the_independent_implementation_computes():
    assert documented() == ev.vectors()


def test_the_associated_data_is_laid_out_as_documented():
    a = ev.aad(ev.KID, 0x0102030405060708, "amber")
    assert len(a) == 45
    assert a[:13] == b"vigil-e2e-v1\x00" and a[13:35] == ev.KID.encode() and a[35:36] == b"\x00"
    assert a[36:44] == bytes([1, 2, 3, 4, 5, 6, 7, 8]) and a[44:] == b"a"
    assert ev.aad(ev.KID, 1, "red")[-1:] == b"r"
    b = ev.box_aad(ev.KID, 0x0102030405060708)
    assert len(b) == 48
    assert b[:17] == b"vigil-e2e-box-v1\x00" and b[17:39] == ev.KID.encode() and b[39:] == b"\x00\x01\x02\x03\x04\x05\x06\x07\x08"


def test_padding_reaches_the_next_multiple_of_64():
    assert len(ev.pad(b"x" * 1)) == 64
    assert len(ev.pad(b"x" * 64)) == 64
    assert len(ev.pad(b"x" * 65)) == 128
    assert ev.pad(b"ab").endswith(b" " * 62)


@pytest.mark.parametrize("index", [0, 1])
def test_each_sealed_vector_opens_with_its_own_seq_status_and_kid_only(index):
    v = documented()
    s = v["sealed"][index]
    key = ev.unb64u(v["key"])
    assert ev.open_sealed(key, v["kid"], s["seq"], s["status"], s["sealed"]) == json.loads(s["plaintext"])
    assert ev.aad(v["kid"], s["seq"], s["status"]).hex() == s["aad_hex"]
    other_status = {"red": "amber", "amber": "red"}[s["status"]]
    other_kid = ev.b64u(bytes(16))
    for seq, status, kid in [(s["seq"] + 1, s["status"], v["kid"]), (s["seq"], other_status, v["kid"]),
                             (s["seq"], s["status"], other_kid)]:
        with pytest.raises(InvalidTag):
            ev.open_sealed(key, kid, seq, status, s["sealed"])
    raw = bytearray(ev.unb64u(s["sealed"]))
    raw[20] ^= 1
    with pytest.raises(InvalidTag):
        ev.open_sealed(key, v["kid"], s["seq"], s["status"], ev.b64u(bytes(raw)))


def test_the_box_vector_opens_for_its_member_only():
    v = documented()
    b = v["box"]
    ms = ev.unb64u(b["member_secret"])
    assert ev.wrap_key(ms).hex() == b["wrap_key_hex"]
    assert ev.open_box(ms, v["kid"], b["member"], b["box"]) == ev.unb64u(v["key"])
    with pytest.raises(InvalidTag):
        ev.open_box(ms, v["kid"], b["member"] + 1, b["box"])
    with pytest.raises(InvalidTag):
        ev.open_box(bytes(32), v["kid"], b["member"], b["box"])


# The clients' vectors (clients/e2e-vectors/vectors.json, checked byte for byte by the JS and Swift
# tests) come from the same primitives: make_vectors.py imports this directory's e2e_vectors.py.
CLIENT_VECTORS = Path(__file__).resolve().parents[2] / "clients/e2e-vectors"


def test_the_clients_vectors_json_is_what_make_vectors_computes_with_these_primitives():
    import subprocess
    import sys
    made = subprocess.run([sys.executable, str(CLIENT_VECTORS / "make_vectors.py")], capture_output=True, check=True).stdout
    assert made == (CLIENT_VECTORS / "vectors.json").read_bytes()


def test_every_client_vector_opens_here_with_its_own_associated_data_only():
    v = json.loads((CLIENT_VECTORS / "vectors.json").read_text())
    assert len(v["seal"]) == 3 and len(v["member_boxes"]) == 2
    for s in v["seal"]:
        key = ev.unb64u(s["key"])
        assert ev.aad(s["kid"], s["seq"], s["status"]).hex() == s["aad_hex"]
        assert ev.open_sealed(key, s["kid"], s["seq"], s["status"], s["sealed"]) == s["position"]
        assert ev.pad(ev.location_plaintext(json.loads(s["plaintext"]))) == s["plaintext"].encode()
        with pytest.raises(InvalidTag):
            ev.open_sealed(key, s["kid"], s["seq"] + 1, s["status"], s["sealed"])
    for b in v["member_boxes"]:
        ms = ev.unb64u(b["member_secret"])
        assert ev.wrap_key(ms).hex() == b["wrap_key_hex"]
        assert ev.box_aad(b["kid"], b["member"]).hex() == b["aad_hex"]
        assert ev.open_box(ms, b["kid"], b["member"], b["box"]) == ev.unb64u(b["stream_key"])
        with pytest.raises(InvalidTag):
            ev.open_box(ms, b["kid"], b["member"] + 1, b["box"])
