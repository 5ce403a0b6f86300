"""The e2e byte scan (e2e_scan.py) finds a plaintext in each form it claims to, and nothing in a
sealed value. No daemon needed."""
import json
import struct

import e2e_scan
import e2e_vectors as ev

LAT, LON, NOTE = 48.858370, 2.294481, "under the tower"


def wanted():
    return e2e_scan.needles([LAT, LON], [NOTE], digits=["48.858370", "2.294481"])


def test_it_finds_the_plaintext_as_json_text_binary_and_utf16(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"lat": 48.858370}).replace("48.85837", "48.858370"))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.bin").write_bytes(b"\x00" + struct.pack("<d", LON) + b"\x01")
    (tmp_path / "c.bin").write_bytes(struct.pack(">f", LAT))
    (tmp_path / "d.txt").write_bytes(NOTE.encode("utf-16-le"))
    hits = e2e_scan.scan_tree(tmp_path, wanted())
    assert any("a.json" in h and "48.858370 as text" in h for h in hits)
    assert any("b.bin" in h and "float64 LE" in h for h in hits)
    assert any("c.bin" in h and "float32 BE" in h for h in hits)
    assert any("d.txt" in h and "UTF-16" in h for h in hits)


def test_it_finds_nothing_in_what_a_client_sealed(tmp_path):
    sealed = ev.seal(ev.KEY, ev.KID, 1, "red", {"lat": LAT, "lon": LON, "note": NOTE})
    (tmp_path / "journal").write_bytes(b"kind 33 " + sealed.encode() + ev.unb64u(sealed))
    assert e2e_scan.scan_tree(tmp_path, wanted()) == []
