"""/echo and /v1 through an independent client (Python ``websockets``), and graceful shutdown."""

from __future__ import annotations

import contextlib
import json
import signal
import time

import pytest

from conftest import shared_server_fixture
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

CONFIG = {"websocket": {"echo": True}}  # max_message_bytes stays at its 65536 default
MAX = 65536


_server_shared, _server = shared_server_fixture("server", CONFIG)


def ws(port: int, path: str = "/echo", **kw):
    # No proxy from the environment, no permessage-deflate, no client-side keepalive pings:
    # the server's behaviour alone is under test.
    opts = dict(proxy=None, compression=None, ping_interval=None, open_timeout=5, close_timeout=5,
                max_size=4 * MAX)
    opts.update(kw)
    return connect(f"ws://127.0.0.1:{port}{path}", **opts)


@pytest.mark.parametrize("message", [
    "hello",
    "",
    "ünïcödé ✓ 🛰",
    "x" * 125, "x" * 126, "x" * 65535,          # 7-bit / 16-bit length boundaries
    b"\x00\x01\xfe\xff",
    b"",
    bytes(range(256)) * 100,
], ids=["text", "empty-text", "utf8", "text-125", "text-126", "text-65535", "binary", "empty-binary",
        "binary-25600"])
def test_round_trip_keeps_type_and_bytes(server, message):
    with ws(server.port) as c:
        c.send(message)
        got = c.recv(timeout=5)
        assert type(got) is type(message), f"sent {type(message).__name__}, echoed {type(got).__name__}"
        assert got == message, f"echo differs: sent {len(message)}, got {len(got)}"


def test_many_messages_in_order(server):
    with ws(server.port) as c:
        msgs = [f"msg-{i}" if i % 2 else f"bin-{i}".encode() for i in range(200)]
        for m in msgs:
            c.send(m)
        got = [c.recv(timeout=5) for _ in msgs]
        assert got == msgs


@pytest.mark.parametrize("parts", [
    ["frag", "mented ", "text"],
    [b"\x01" * 1000, b"\x02" * 1000, b"\x03"],
    ["caf", "\u00e9", "!"],
], ids=["text", "binary", "utf8-across-fragments"])
def test_fragmented_message_is_reassembled(server, parts):
    with ws(server.port) as c:
        c.send(iter(parts))  # an iterable is sent as one fragmented message
        got = c.recv(timeout=5)
        whole = "".join(parts) if isinstance(parts[0], str) else b"".join(parts)
        assert got == whole


def test_utf8_codepoint_split_across_fragments(server):
    # The two bytes of "é" go in different frames; the message as a whole is valid UTF-8.
    from wsraw import OP_CONT, OP_TEXT, ws_connect
    c = ws_connect(server.port, "/echo")
    with c:
        c.send_frame(OP_TEXT, b"caf\xc3", fin=False)
        c.send_frame(OP_CONT, b"\xa9", fin=True)
        f = c.read_frame(5)
        assert (f.opcode, f.payload) == (OP_TEXT, "café".encode()), f


@pytest.mark.parametrize("kind", [str, bytes])
def test_exactly_max_message_accepted(server, kind):
    payload = "a" * MAX if kind is str else b"\xab" * MAX
    with ws(server.port) as c:
        c.send(payload)
        got = c.recv(timeout=10)
        assert len(got) == MAX and got == payload


@pytest.mark.parametrize("fragmented", [False, True], ids=["single-frame", "fragmented"])
def test_max_plus_one_closed_1009(server, fragmented):
    payload = b"\xcd" * (MAX + 1)
    with ws(server.port) as c:
        # The close may arrive while the (second fragment of the) message is still being
        # sent, so ConnectionClosed may come from send() as well as from recv().
        with pytest.raises(ConnectionClosed) as exc:
            c.send(iter([payload[:40000], payload[40000:]]) if fragmented else payload)
            c.recv(timeout=10)
        rcvd = exc.value.rcvd
        assert rcvd is not None, "server closed TCP without a close frame; expected close 1009"
        assert rcvd.code == 1009, f"expected close 1009 for a {MAX + 1}-byte message, got {rcvd.code}"


def test_ping_gets_pong_with_same_payload(server):
    with ws(server.port) as c:
        for payload in (b"", b"ping-payload", bytes(range(125))):
            pong = c.ping(payload)
            assert pong.wait(5), f"no pong for ping {payload[:20]!r} within 5 s"
        # Echo still works after the pings.
        c.send("after")
        assert c.recv(timeout=5) == "after"


def test_clean_close_1000_echoed(server):
    with ws(server.port) as c:
        c.send("bye?")
        assert c.recv(timeout=5) == "bye?"
        c.close(1000, "done")
        assert c.protocol.close_rcvd is not None, "server did not answer the close frame"
        assert c.protocol.close_rcvd.code == 1000, f"server answered close with {c.protocol.close_rcvd.code}"


def test_v1_selects_subprotocol_and_stays_open(server):
    with ws(server.port, "/v1", subprotocols=["vigil.v1"]) as c:
        assert c.subprotocol == "vigil.v1"
        # The connection stays open: a ping round trip still works after a while.
        assert c.ping(b"alive").wait(5)
    with ws(server.port, "/v1") as c:
        assert c.subprotocol is None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_graceful_shutdown_sends_1001(vigild, sig):
    d = vigild({"websocket": {"echo": True}, "server": {"shutdown_grace_ms": 3000}})
    with contextlib.ExitStack() as stack:
        clients = [stack.enter_context(ws(d.port, "/echo" if i % 2 else "/v1")) for i in range(3)]
        for i, c in enumerate(clients):  # all three are really connected and served
            if i % 2 == 0:  # /v1 greets every session first
                assert json.loads(c.recv(timeout=5))["type"] == "welcome"
            assert c.ping(str(i).encode()).wait(5)
        t0 = time.monotonic()
        d.signal(sig)
        for i, c in enumerate(clients):
            with pytest.raises(ConnectionClosed) as exc:
                c.recv(timeout=5)
            rcvd = exc.value.rcvd
            assert rcvd is not None, f"client {i}: TCP closed without a close frame"
            assert rcvd.code == 1001, f"client {i}: expected close 1001 (going away), got {rcvd.code}"
        rc = d.wait(5)
        elapsed = time.monotonic() - t0
        assert rc == 0, f"vigild exit code {rc} after {sig!r}\n{d.log_tail()}"
        # All clients answered the close, so the daemon need not wait out its 3 s grace.
        assert elapsed < 3.0, f"shutdown took {elapsed:.2f}s although every client closed promptly"


def test_shutdown_grace_bounds_exit_with_unresponsive_client(vigild):
    # A client that never answers the 1001 close frame must not hold the daemon past its grace.
    from wsraw import ws_connect
    grace = 1.0
    d = vigild({"websocket": {"echo": True, "close_timeout_ms": 10000},
                "server": {"shutdown_grace_ms": int(grace * 1000)}})
    c = ws_connect(d.port, "/echo")
    with c:
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        f = c.read_frame(5)
        assert f.close_code == 1001, f"expected close 1001, got {f}"
        rc = d.wait(grace + 5)
        elapsed = time.monotonic() - t0
        assert rc == 0, f"exit code {rc}\n{d.log_tail()}"
        assert elapsed < grace + 2.0, f"daemon took {elapsed:.2f}s to exit with a {grace}s grace"
