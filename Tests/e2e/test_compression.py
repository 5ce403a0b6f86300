"""permessage-deflate (RFC 7692) end to end: the negotiation answers, compressed frames both ways
(checked with Python's zlib, not our own code), the zip-bomb bound, and the map and panic
traffic over compressed connections with the independent ``websockets`` client.
"""

from __future__ import annotations

import json
import zlib

import pytest
from websockets.sync.client import connect

from wsraw import OP_CLOSE, OP_TEXT, RawConn, close_payload, encode_frame, upgrade_request

MAX_MESSAGE = 65536
CONFIG = {
    "websocket": {"echo": True, "max_message_bytes": MAX_MESSAGE},
    "compression": {"enabled": True, "client_max_window_bits": 12, "min_message_bytes": 64},
    "session": {"messages_per_second": 1000, "message_burst": 2000},
}
NEGOTIATED = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"


@pytest.fixture(scope="module")
def server(vigild_module):
    return vigild_module(CONFIG)


def handshake(port: int, offer: str | list[str] | None, path: str = "/echo"):
    """(response, connection) for an upgrade offering ``offer`` (one header per list item)."""
    c = RawConn.connect(port)
    request = upgrade_request(path)
    if offer is not None:
        lines = [offer] if isinstance(offer, str) else offer
        extra = "".join(f"Sec-WebSocket-Extensions: {o}\r\n" for o in lines)
        request = request[:-2] + extra.encode() + b"\r\n"
    c.send(request)
    return c.read_response(), c


@pytest.mark.parametrize("offer,answer", [
    ("permessage-deflate", NEGOTIATED),
    # A client that allows us to limit its window gets the configured limit (12).
    ("permessage-deflate; client_max_window_bits", NEGOTIATED + "; client_max_window_bits=12"),
    ("permessage-deflate; client_max_window_bits=10", NEGOTIATED + "; client_max_window_bits=10"),
    ("permessage-deflate; server_max_window_bits=10", NEGOTIATED + "; server_max_window_bits=10"),
    ('permessage-deflate; server_max_window_bits="11"', NEGOTIATED + "; server_max_window_bits=11"),
    # Invalid offers are declined (RFC 7692 §7: the next acceptable offer wins, or none).
    ("permessage-deflate; mystery=1", None),
    ("permessage-deflate; server_max_window_bits=16", None),
    ("permessage-deflate; server_max_window_bits=010", None),
    ("permessage-deflate; server_no_context_takeover=1", None),
    ("permessage-deflate; server_no_context_takeover; server_no_context_takeover", None),
    ("permessage-deflate; mystery, permessage-deflate; server_max_window_bits=12", NEGOTIATED + "; server_max_window_bits=12"),
    (["x-webkit-deflate-frame", "permessage-deflate"], NEGOTIATED),
    ("x-webkit-deflate-frame", None),
])
def test_negotiation_answers(server, offer, answer):
    response, c = handshake(server.port, offer)
    with c:
        assert response.status == 101
        assert response.header("sec-websocket-extensions") == answer


def test_a_malformed_extensions_header_fails_the_handshake(server):
    response, c = handshake(server.port, "permessage-deflate; =oops")
    with c:
        assert response.status == 400


def test_nothing_is_negotiated_when_compression_is_off(vigild):
    d = vigild(dict(CONFIG, compression={"enabled": False}))
    response, c = handshake(d.port, "permessage-deflate")
    with c:
        assert response.status == 101 and response.header("sec-websocket-extensions") is None


def deflate(message: bytes) -> bytes:
    """RFC 7692 §7.2.1 with Python's zlib: raw deflate, sync flush, the 4-byte tail removed."""
    z = zlib.compressobj(wbits=-12)
    out = z.compress(message) + z.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


def inflate(payload: bytes) -> bytes:
    return zlib.decompressobj(wbits=-15).decompress(payload + b"\x00\x00\xff\xff")


def test_compressed_messages_both_ways_checked_with_pythons_zlib(server):
    response, c = handshake(server.port, "permessage-deflate; client_max_window_bits")
    with c:
        assert response.status == 101
        text = json.dumps({"message": "the same words again and again " * 40}).encode()
        c.send(encode_frame(OP_TEXT, deflate(text), rsv=0b100))  # RSV1: compressed
        f = c.read_frame()
        assert f.opcode == OP_TEXT and f.rsv & 0b100, "a long echo comes back compressed"
        assert len(f.payload) < len(text) // 4
        assert inflate(f.payload) == text
        # A short message is not worth compressing: it comes back plain.
        c.send(encode_frame(OP_TEXT, deflate(b"hi"), rsv=0b100))
        f = c.read_frame()
        assert not f.rsv & 0b100 and f.payload == b"hi"
        # An uncompressed message on a compressing connection is fine too.
        c.send(encode_frame(OP_TEXT, b"plain " * 40))
        f = c.read_frame()
        assert inflate(f.payload) == b"plain " * 40


def test_a_zip_bomb_closes_with_1009_after_at_most_the_message_limit(server):
    response, c = handshake(server.port, "permessage-deflate")
    with c:
        assert response.status == 101
        bomb = deflate(b"\x00" * (50 * MAX_MESSAGE))  # 3.2 MB of zeros in a few KiB
        assert len(bomb) < MAX_MESSAGE
        c.send(encode_frame(OP_TEXT, bomb, rsv=0b100))
        frames, close, eof = c.read_until_close(5)
        assert close is not None and close.close_code == 1009
        assert not frames


def test_corrupt_compressed_data_closes_with_1007(server):
    response, c = handshake(server.port, "permessage-deflate")
    with c:
        assert response.status == 101
        c.send(encode_frame(OP_TEXT, b"\xff\xfe\xfd not deflate", rsv=0b100))
        _, close, _ = c.read_until_close(5)
        assert close is not None and close.close_code == 1007


def test_rsv1_without_the_extension_is_a_protocol_error(server):
    response, c = handshake(server.port, None)
    with c:
        assert response.status == 101
        c.send(encode_frame(OP_TEXT, deflate(b"hello hello hello"), rsv=0b100))
        _, close, _ = c.read_until_close(5)
        assert close is not None and close.close_code == 1002


def test_map_and_panic_traffic_over_compressed_connections_with_websockets(server):
    """The independent client negotiates deflate itself and sees the same protocol."""
    opts = dict(compression="deflate", subprotocols=["vigil.v1"], open_timeout=5)
    url = f"ws://127.0.0.1:{server.port}/v1"
    with connect(url, **opts) as sub, connect(url, **opts) as pub, connect(url, **opts) as owner, connect(url, **opts) as watcher:
        for ws in (sub, pub, owner, watcher):
            assert json.loads(ws.recv(timeout=5))["type"] == "welcome"
            assert "permessage-deflate" in (ws.response.headers.get("Sec-WebSocket-Extensions") or "")

        def request(ws, body):
            ws.send(json.dumps(body))
            while True:
                m = json.loads(ws.recv(timeout=5))
                if m.get("type") in ("ok", "error"):
                    return m

        assert request(sub, {"op": "subscribe", "ref": 1, "area": {"bbox": [-10, -10, 10, 10]}})["type"] == "ok"
        created = request(pub, {"op": "pin.create", "ref": 1, "pin": {"lat": 1, "lon": 2, "title": "compressed",
                                                                        "description": "x" * 300}})
        event = json.loads(sub.recv(timeout=5))
        assert event["type"] == "pin.added" and event["pin"]["id"] == created["pin"]["id"]
        started = request(owner, {"op": "panic.start", "ref": 1, "status": "red", "lat": 1, "lon": 2, "watchers": 1})
        assert request(watcher, {"op": "panic.watch", "ref": 1, "stream": started["stream"],
                                 "watch_token": started["watch_tokens"][0]})["type"] == "ok"
        for i in range(5):
            request(owner, {"op": "panic.update", "ref": 2 + i, "stream": started["stream"], "lat": 1 + i / 100, "lon": 2})
        seqs = [json.loads(watcher.recv(timeout=5))["seq"] for _ in range(5)]
        assert seqs == [2, 3, 4, 5, 6]
