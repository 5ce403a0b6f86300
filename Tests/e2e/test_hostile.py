"""Hostile and broken clients over raw sockets: framing violations, garbage, slow-loris,
vanishing and half-closed peers, 10k connect/disconnect churn, idle ping/drop.

The module shares one daemon with short timeouts (handshake 500 ms, ping 300 ms, pong
300 ms, close 500 ms).  Tests that must tell "closed because of EOF" from "closed by a
timer" use a second daemon (``calm``) whose timers are all long.
"""

from __future__ import annotations

import random
import select
import socket
import struct
import time

import pytest

import wsbulk
from conftest import FAST_TIMEOUTS, check_alive, settle_baseline, shared_server_fixture
from wsraw import (OP_BINARY, OP_CLOSE, OP_CONT, OP_PING, OP_PONG, OP_TEXT, Closed, RawConn, Timeout,
                   close_payload, encode_frame, http_get, upgrade_request, ws_connect)

HANDSHAKE_S = FAST_TIMEOUTS["http"]["handshake_timeout_ms"] / 1000
PING_S = FAST_TIMEOUTS["websocket"]["ping_interval_ms"] / 1000
PONG_S = FAST_TIMEOUTS["websocket"]["pong_timeout_ms"] / 1000
CLOSE_S = FAST_TIMEOUTS["websocket"]["close_timeout_ms"] / 1000
MAX = 65536

CALM = {"http": {"handshake_timeout_ms": 30000},
        "websocket": {"echo": True, "ping_interval_ms": 60000, "pong_timeout_ms": 60000, "close_timeout_ms": 30000}}
# A close that takes this long cannot come from a CALM timer, only from the server seeing EOF.
EOF_REACTION_S = 3.0


_server_shared, _server = shared_server_fixture("server", FAST_TIMEOUTS)
_calm_shared, _calm = shared_server_fixture("calm", CALM)


def is_sendable_close_code(code: int | None) -> bool:
    # RFC 6455 §7.4: 1005/1006/1015 are never sent; 1004 and 1012+ are unassigned here.
    return code is None or (1000 <= code <= 1011 and code not in (1004, 1005, 1006)) or 3000 <= code <= 4999


def assert_healthy(d) -> None:
    check_alive(d)
    try:
        resp = http_get(d.port, "/healthz")
    except OSError:
        d.wait(10)  # a crashing daemon may still be writing its backtrace
        check_alive(d)
        raise
    assert resp.status == 200, f"/healthz after the abuse: {resp.status}"
    assert not d.crash_lines(), d.crash_report()


def assert_fds_back(d, timeout: float = 10.0) -> None:
    n = d.wait_fds_at_most(d.baseline_fds, timeout)
    assert n <= d.baseline_fds, (f"fd leak: vigild holds {n} fds, baseline {d.baseline_fds} "
                                 f"(still above after {timeout}s)")


def expect_close(conn: RawConn, codes: set[int], *, what: str, timeout: float = 5.0) -> None:
    """The server must send a close frame with one of ``codes`` and then close TCP
    (after our close reply, which we send, or its close timeout)."""
    frames, close, eof = conn.read_until_close(timeout, reply_close=True)
    assert close is not None, (f"{what}: no close frame (frames seen: {frames}, eof={eof}, "
                               f"reset={conn.reset}, unparsed={bytes(conn.buf[:32])!r})")
    assert close.close_code in codes, f"{what}: close code {close.close_code}, expected one of {sorted(codes)}"
    assert not close.masked, f"{what}: server frames must not be masked"
    assert eof, f"{what}: server sent close {close.close_code} but did not close TCP within {timeout}s"


# -- framing violations -------------------------------------------------------------------

VIOLATIONS_1002 = {
    "unmasked-text": lambda: encode_frame(OP_TEXT, b"hi", mask=False),
    "unmasked-ping": lambda: encode_frame(OP_PING, b"", mask=False),
    "reserved-opcode-3": lambda: encode_frame(0x3, b"x"),
    "reserved-opcode-7": lambda: encode_frame(0x7, b""),
    "reserved-opcode-B": lambda: encode_frame(0xB, b"x"),
    "reserved-opcode-F": lambda: encode_frame(0xF, b""),
    "rsv1": lambda: encode_frame(OP_TEXT, b"x", rsv=0b100),
    "rsv2": lambda: encode_frame(OP_BINARY, b"x", rsv=0b010),
    "rsv3": lambda: encode_frame(OP_PING, b"", rsv=0b001),
    "close-code-1005": lambda: encode_frame(OP_CLOSE, close_payload(1005)),
    "close-code-1006": lambda: encode_frame(OP_CLOSE, close_payload(1006)),
    "close-code-999": lambda: encode_frame(OP_CLOSE, close_payload(999)),
    "close-code-1015": lambda: encode_frame(OP_CLOSE, close_payload(1015)),
    "close-code-5000": lambda: encode_frame(OP_CLOSE, close_payload(5000)),
    "close-1-byte-payload": lambda: encode_frame(OP_CLOSE, b"\x03"),
    # RFC 6455 §5.4/§5.5: control frames are ≤125 bytes and never fragmented; a
    # continuation needs a message to continue; a new data frame cannot interrupt one.
    "ping-126-bytes": lambda: encode_frame(OP_PING, b"p" * 126),
    "fragmented-ping": lambda: encode_frame(OP_PING, b"p", fin=False),
    "orphan-continuation": lambda: encode_frame(OP_CONT, b"x"),
    "text-inside-fragmented-text": lambda: encode_frame(OP_TEXT, b"a", fin=False) + encode_frame(OP_TEXT, b"b"),
}


@pytest.mark.parametrize("name", list(VIOLATIONS_1002))
def test_protocol_violation_closes_1002(server, name):
    with ws_connect(server.port, "/echo") as c:
        c.send(VIOLATIONS_1002[name]())
        expect_close(c, {1002}, what=name)


@pytest.mark.parametrize("name, data", [
    ("text-invalid-byte", encode_frame(OP_TEXT, b"ok \xff")),
    ("text-overlong", encode_frame(OP_TEXT, b"\xc0\xaf")),
    ("text-surrogate", encode_frame(OP_TEXT, b"\xed\xa0\x80")),
    ("text-truncated-at-end", encode_frame(OP_TEXT, b"caf\xc3")),
    ("fragmented-invalid", encode_frame(OP_TEXT, b"ok", fin=False) + encode_frame(OP_CONT, b"\xff")),
    ("close-reason-invalid", encode_frame(OP_CLOSE, close_payload(1000, b"\xff\xfe"))),
])
def test_invalid_utf8_closes_1007(server, name, data):
    with ws_connect(server.port, "/echo") as c:
        c.send(data)
        expect_close(c, {1007}, what=name)


@pytest.mark.parametrize("how", ["header-only", "fragments"])
def test_oversize_message_closes_1009(server, how):
    with ws_connect(server.port, "/echo") as c:
        if how == "header-only":
            # The header alone announces MAX+1 bytes; the server need not wait for them.
            c.send(encode_frame(OP_BINARY, b"", declared_length=MAX + 1))
        else:
            c.send(encode_frame(OP_BINARY, b"a" * MAX, fin=False) + encode_frame(OP_CONT, b"b"))
        expect_close(c, {1009}, what=how)


def test_ping_answered_with_same_payload(server):
    with ws_connect(server.port, "/echo") as c:
        for payload in (b"", b"abc", bytes(range(125))):
            c.send_frame(OP_PING, payload)
            f = c.read_frame(2)
            assert (f.opcode, f.payload) == (OP_PONG, payload), f
            assert not f.masked


def test_ping_between_fragments_is_answered(server):
    with ws_connect(server.port, "/echo") as c:
        c.send_frame(OP_TEXT, b"frag-", fin=False)
        c.send_frame(OP_PING, b"mid")
        c.send_frame(OP_CONT, b"ment", fin=True)
        f1, f2 = c.read_frame(2), c.read_frame(2)
        assert (f1.opcode, f1.payload) == (OP_PONG, b"mid"), f1
        assert (f2.opcode, f2.payload) == (OP_TEXT, b"frag-ment"), f2


@pytest.mark.parametrize("payload", [close_payload(1000, b"bye"), b"", close_payload(3000), close_payload(4999)],
                         ids=["1000-reason", "empty", "3000", "4999"])
def test_client_close_is_echoed_then_tcp_closed(server, payload):
    with ws_connect(server.port, "/echo") as c:
        c.send_frame(OP_CLOSE, payload)
        frames, close, eof = c.read_until_close(3.0)
        assert close is not None, f"no close reply; frames {frames}"
        # RFC 6455 §5.5.1: the reply typically echoes the code; an empty close may be
        # answered empty or with 1000.
        want = {None, 1000} if not payload else {struct.unpack("!H", payload[:2])[0]}
        assert close.close_code in want, f"sent close {payload!r}, server answered {close}"
        assert eof, "server did not close TCP after the close handshake"


def test_close_handshake_without_client_reply_ends_at_close_timeout(server):
    # After its own close frame (here: 1002 for an unmasked frame), the server waits at
    # most close_timeout_ms for our close before it closes TCP.
    with ws_connect(server.port, "/echo") as c:
        c.send(encode_frame(OP_TEXT, b"x", mask=False))
        t0 = time.monotonic()
        frames, close, eof = c.read_until_close(CLOSE_S * 6, reply_close=False)
        assert close is not None and close.close_code == 1002, (frames, close)
        assert eof, f"TCP still open {CLOSE_S * 6:.1f}s after the server's close frame (close_timeout {CLOSE_S}s)"
        assert time.monotonic() - t0 < CLOSE_S * 4


# -- garbage ------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_random_bytes_before_handshake(server, seed):
    rng = random.Random(seed)
    data = rng.randbytes(rng.randint(1, 4096))
    if seed % 2:
        data += b"\r\n\r\n"  # make the "head" end, so the parser has to judge it
    with RawConn.connect(server.port) as c:
        try:
            c.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            resp = c.read_response(HANDSHAKE_S * 6)
        except (Closed, ConnectionResetError):
            resp = None  # closed without an answer: allowed
        except Timeout:
            pytest.fail(f"seed {seed}: no answer and no close {HANDSHAKE_S * 6:.1f}s after {len(data)} garbage bytes")
        if resp is not None:
            assert resp.status in (400, 408, 431), f"seed {seed}: answered {resp.status} to garbage: {resp.raw_head!r}"
            assert c.wait_eof(3.0), f"seed {seed}: connection left open after {resp.status}"
    assert_healthy(server)


@pytest.mark.parametrize("seed", range(8))
def test_random_bytes_after_handshake(server, seed):
    rng = random.Random(1000 + seed)
    with ws_connect(server.port, "/echo") as c:
        try:
            c.send(rng.randbytes(rng.randint(1, 8192)))
        except (BrokenPipeError, ConnectionResetError):
            pass
        # Random bytes may happen to form valid frames (then echoes and pings arrive) or a
        # frame that never completes (then the idle timers end it): read until the end.
        frames, close, eof = c.read_until_close(PING_S + PONG_S + 5.0, reply_close=True)
        assert eof, f"seed {seed}: connection still open; frames {frames[:5]}, close {close}"
        if close is not None:
            assert is_sendable_close_code(close.close_code), f"seed {seed}: close {close}"
    assert_healthy(server)


# -- slow and broken peers ----------------------------------------------------------------

@pytest.mark.parametrize("trickle", [False, True], ids=["silent", "trickle"])
def test_slow_loris_closed_at_handshake_timeout(server, trickle):
    """Headers that never finish: 408 (or a bare close) at handshake_timeout_ms, measured
    from the connection start even if the client keeps dribbling bytes."""
    head = upgrade_request("/echo")[:-2]  # never the final CRLF
    limit = HANDSHAKE_S * 5
    with RawConn.connect(server.port) as c:
        t0 = time.monotonic()
        sent = 0 if trickle else len(head) // 2
        if not trickle:
            c.send(head[:sent])
        resp = None
        while time.monotonic() - t0 < limit:
            if trickle and sent < len(head):
                try:
                    c.send(head[sent:sent + 1])
                except (BrokenPipeError, ConnectionResetError):
                    c.eof = True
                    break
                sent += 1
            try:
                # Wait for the server (an answer or EOF); in trickle mode this also paces
                # the next byte at 50 ms.
                resp = c.read_response(0.05 if trickle else limit)
                break
            except Timeout:
                continue
            except (Closed, ConnectionResetError):
                break
        elapsed = time.monotonic() - t0
        assert resp is not None or c.eof, f"still open after {elapsed:.2f}s (handshake timeout {HANDSHAKE_S}s)"
        if resp is not None:
            assert resp.status == 408, f"expected 408 Request Timeout, got {resp.status}: {resp.raw_head!r}"
        assert elapsed >= HANDSHAKE_S * 0.95, f"closed after {elapsed:.3f}s, before the {HANDSHAKE_S}s timeout"
        assert elapsed < limit, f"closed after {elapsed:.3f}s, >5x the {HANDSHAKE_S}s timeout"
        if resp is not None:
            assert c.wait_eof(2.0), "408 sent but connection left open"


def test_client_vanishes_mid_frame(server):
    conns = []
    for i in range(20):
        c = ws_connect(server.port, "/echo")
        frame = encode_frame(OP_BINARY, b"z" * 1000)
        c.send(frame[: 1 + i * 50])  # cut at a different point each time (header, key, payload)
        conns.append(c)
    assert server.fd_count() >= server.baseline_fds + 20
    for i, c in enumerate(conns):
        c.abort() if i % 2 else c.close()
    assert_fds_back(server)
    assert_healthy(server)


@pytest.mark.parametrize("when", ["mid-request", "after-handshake", "mid-frame"])
def test_half_closed_client_is_closed(calm, when):
    """shutdown(SHUT_WR) from the client: the server must notice the EOF and close (the
    calm daemon's timers are all ≥30 s, so only the EOF can explain a prompt close)."""
    conns = []
    for _ in range(10):
        if when == "mid-request":
            c = RawConn.connect(calm.port)
            c.send(upgrade_request("/echo")[:40])
        else:
            c = ws_connect(calm.port, "/echo")
            if when == "mid-frame":
                c.send(encode_frame(OP_TEXT, b"hello world")[:6])
        conns.append(c)
    for c in conns:
        c.sock.shutdown(socket.SHUT_WR)
    for i, c in enumerate(conns):
        with c:
            t0 = time.monotonic()
            if when == "mid-request":
                closed = c.wait_eof(EOF_REACTION_S)  # a 400 before the close is fine
            else:
                _, _, closed = c.read_until_close(EOF_REACTION_S)  # a close frame first is fine
            assert closed, f"#{i} ({when}): server kept a half-closed connection open for {EOF_REACTION_S}s"
            assert time.monotonic() - t0 < EOF_REACTION_S
    assert_fds_back(calm)
    assert_healthy(calm)


# -- idle ---------------------------------------------------------------------------------

def test_idle_client_pinged_then_dropped(server):
    with ws_connect(server.port, "/echo") as c:
        t0 = time.monotonic()
        ping = c.read_frame(PING_S * 10)
        t_ping = time.monotonic() - t0
        assert ping.opcode == OP_PING, f"expected a ping after {PING_S}s idle, got {ping}"
        assert t_ping >= PING_S * 0.9, f"pinged after {t_ping:.3f}s, before ping_interval {PING_S}s"
        # No pong: the server must drop us pong_timeout_ms later.
        frames, close, eof = c.read_until_close(PONG_S * 10)
        t_drop = time.monotonic() - t0
        assert eof, f"not dropped {t_drop:.2f}s after connecting (ping {PING_S}s + pong timeout {PONG_S}s)"
        assert all(f.opcode == OP_PING for f in frames), frames
        assert t_drop >= t_ping + PONG_S * 0.9, f"dropped {t_drop - t_ping:.3f}s after the ping, before pong_timeout"
        assert t_drop < (PING_S + PONG_S) * 5


def test_client_answering_pings_stays(server):
    with ws_connect(server.port, "/echo") as c:
        pings = 0
        t_end = time.monotonic() + (PING_S + PONG_S) * 4
        while time.monotonic() < t_end:
            try:
                f = c.read_frame(max(0.01, t_end - time.monotonic()))
            except Timeout:
                break
            except Closed:
                pytest.fail(f"dropped after {pings} pings although every ping was answered")
            assert f.opcode == OP_PING, f"unexpected frame {f}"
            pings += 1
            c.send_frame(OP_PONG, f.payload)
        assert pings >= 2, f"only {pings} pings in {(PING_S + PONG_S) * 4:.1f}s with ping_interval {PING_S}s"
        # Still fully alive: echo works.
        c.send_frame(OP_TEXT, b"still here")
        while True:
            f = c.read_frame(2)
            if f.opcode == OP_PING:
                c.send_frame(OP_PONG, f.payload)
                continue
            assert (f.opcode, f.payload) == (OP_TEXT, b"still here"), f
            break


# -- slow consumer -----------------------------------------------------------------------

def test_slow_consumer_is_bounded(vigild):
    """A client that sends to /echo and never reads must not make the daemon buffer without
    bound: it either stops reading from that client (TCP backpressure) or drops it.  Other
    clients keep being served meanwhile."""
    out_max = 1 << 20
    d = vigild({"websocket": {"echo": True, "max_output_buffer_bytes": out_max,
                              "ping_interval_ms": 60000, "pong_timeout_ms": 60000}})
    d.baseline_fds = settle_baseline(d, "/echo")
    rss0 = d.rss_kib()
    frame = encode_frame(OP_BINARY, b"s" * 60000, mask_key=b"\x01\x02\x03\x04")
    budget = 64 << 20
    hog = ws_connect(d.port, "/echo")
    other = ws_connect(d.port, "/echo")
    with hog, other:
        hog.sock.setblocking(False)
        sent, stalled, dropped = 0, False, False
        pending = memoryview(frame)
        deadline = time.monotonic() + 20
        while sent < budget and time.monotonic() < deadline:
            # Writable within 0.5 s, or the server has stopped reading from us.
            _, w, _ = select.select([], [hog.sock], [], 0.5)
            if not w:
                stalled = True
                break
            try:
                n = hog.sock.send(pending)
            except BlockingIOError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                dropped = True
                break
            sent += n
            pending = pending[n:] or memoryview(frame)
        growth = d.rss_kib() - rss0
        # The well-behaved client is still served while the hog is stuck or gone.
        other.send_frame(OP_TEXT, b"not starved")
        f = other.read_frame(3)
        assert (f.opcode, f.payload) == (OP_TEXT, b"not starved"), f
        assert stalled or dropped, f"sent {sent >> 20} MiB without reading and the server neither pushed back nor dropped"
        assert growth < (out_max >> 10) + 16 * 1024, (
            f"daemon RSS grew {growth} KiB while a non-reading client sent {sent >> 20} MiB "
            f"(max_output_buffer_bytes {out_max >> 10} KiB)")
    assert_fds_back(d)
    assert_healthy(d)


# -- churn --------------------------------------------------------------------------------

@pytest.mark.slow
def test_10k_connect_disconnect_cycles(calm):
    n = 10_000
    kinds = [wsbulk.KINDS[i % len(wsbulk.KINDS)] for i in range(n)]
    random.Random(42).shuffle(kinds)
    res = wsbulk.churn(calm.port, kinds, path="/echo", window=256, timeout=90)
    assert not res.failures, f"{res.failure_summary()} ({res.elapsed:.1f}s, done {res.kinds_done})"
    print(f"\n10k churn: {res.elapsed:.1f}s, {res.kinds_done}")
    assert_healthy(calm)
    assert_fds_back(calm, timeout=15)
