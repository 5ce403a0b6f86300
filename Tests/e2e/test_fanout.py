"""The fan-out under slow consumers, over real TCP: a watcher or subscriber that stops reading is
dropped when its queue passes ``websocket.max_output_buffer_bytes``, and nobody else notices.

Before the glue was rebuilt (issue 18), dropping a watcher in the middle of a panic fan-out
re-entered the fan-out and sent the batch again: the other watcher got the same seq twice. The
watcher test fails on that code and passes since; the subscriber test guards the map's side.

Loopback TCP lets the kernel buffer a few MB for a client that does not read, so the bursts
are large; the readers parse frames in bulk to keep up.
"""

from __future__ import annotations

import json
import re
import select
import socket
import struct
import time

from wsraw import OP_TEXT, encode_frame, http_get, make_key, upgrade_request

CONFIG = {
    # No conflation (it keeps a slow watcher under its budget, test_slow_consumers.py checks it),
    # and a short close timeout: the stalled client never answers the close it is sent.
    "websocket": {"max_output_buffer_bytes": 1048576, "ping_interval_ms": 600000, "close_timeout_ms": 200},
    "panic": {"conflate_above_bytes": 1073741824},
    "session": {"messages_per_second": 100000, "message_burst": 100000},
    "pins": {"writes_per_minute": 1000000, "write_burst": 100000},
    "limits": {"pin_create_burst": 1000000, "pin_creates_per_hour": 10000000, "live_pins_per_address": 10000000},
}
TYPE = re.compile(rb'"type":"([a-z.]+)"')


class Client:
    """A /v1 client that reads whole frames in bulk (server frames are unmasked)."""

    def __init__(self, port: int, *, rcvbuf: int | None = None):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:  # set before connecting, so the window stays small
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.connect(("127.0.0.1", port))
        self.sock = s
        self.buf = bytearray()
        s.sendall(upgrade_request("/v1", key=make_key()))
        while b"\r\n\r\n" not in self.buf:
            self._recv(5.0)
        head, _, rest = bytes(self.buf).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101"), head
        self.buf = bytearray(rest)
        assert json.loads(self.next_message())["type"] == "welcome"

    def _recv(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return False
        data = self.sock.recv(1 << 20)
        assert data, "the server closed this client"
        self.buf += data
        return True

    def messages(self) -> list[bytes]:
        """Every complete text message in the buffer (pings and pongs skipped)."""
        out = []
        i = 0
        buf = self.buf
        while len(buf) - i >= 2:
            b0, b1 = buf[i], buf[i + 1]
            n, h = b1 & 0x7F, 2
            if n == 126:
                if len(buf) - i < 4:
                    break
                n, h = struct.unpack_from("!H", buf, i + 2)[0], 4
            elif n == 127:
                if len(buf) - i < 10:
                    break
                n, h = struct.unpack_from("!Q", buf, i + 2)[0], 10
            if len(buf) - i < h + n:
                break
            if b0 & 0x0F == OP_TEXT:
                out.append(bytes(buf[i + h:i + h + n]))
            i += h + n
        del buf[:i]
        return out

    def next_message(self, timeout: float = 5.0) -> bytes:
        deadline = time.monotonic() + timeout
        while True:
            got = self.messages()
            if got:
                # Put back what follows the first message.
                rest = b"".join(encode_frame(OP_TEXT, m, mask=False) for m in got[1:])
                self.buf[:0] = rest
                return got[0]
            assert self._recv(max(0.0, deadline - time.monotonic())), "no message in time"

    def request(self, body: dict) -> dict:
        self.sock.sendall(encode_frame(OP_TEXT, json.dumps(body).encode()))
        while True:
            m = json.loads(self.next_message())
            if m["type"] in ("ok", "error"):
                return m

    def collect(self, into: list[bytes], until, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not until():
            assert time.monotonic() < deadline, f"only {len(into)} messages in {timeout} s"
            self._recv(0.2)
            into.extend(self.messages())

    def close(self) -> None:
        self.sock.close()


def open_websockets(d) -> int:
    """Open WebSocket sessions, from the admin listener's /stats."""
    return json.loads(http_get(d.admin_port, "/stats").body)["websockets"]


def count(messages: list[bytes], kind: bytes) -> int:
    return sum(1 for m in messages if TYPE.search(m).group(1) == kind)


def test_a_watcher_dropped_during_the_fan_out_costs_the_other_watcher_nothing(vigild):
    d = vigild(CONFIG)
    owner = Client(d.port)
    started = owner.request({"op": "panic.start", "status": "red", "lat": 52.5, "lon": 13.4, "watchers": 2})
    stream, tokens = started["stream"], started["watch_tokens"]
    stalled = Client(d.port, rcvbuf=4096)
    reader = Client(d.port)
    for c, token in ((stalled, tokens[0]), (reader, tokens[1])):
        assert c.request({"op": "panic.watch", "stream": stream, "watch_token": token})["type"] == "ok"
    owner_got: list[bytes] = []
    owner.collect(owner_got, lambda: any(b'"count":2' in m for m in owner_got))
    owner_got.clear()
    got: list[bytes] = []
    sent = 0
    # Bursts of pipelined updates until the stalled watcher is dropped (the owner hears the watcher
    # count fall to 1); the reader keeps reading all along.
    while not any(b'"type":"panic.watchers"' in m and b'"count":1' in m for m in owner_got):
        assert sent < 200000, "the stalled watcher was never dropped"
        owner.sock.sendall(b"".join(
            encode_frame(OP_TEXT, json.dumps({"op": "panic.update", "ref": i, "stream": stream, "lat": 52.5,
                                              "lon": 13.4 + i * 1e-6, "accuracy_m": 8, "heading": 90}).encode())
            for i in range(sent, sent + 2000)))
        sent += 2000
        reader.collect(got, lambda: len(got) >= sent)
        owner.collect(owner_got, lambda: count(owner_got, b"ok") >= sent)
    seqs = [json.loads(m)["seq"] for m in got]
    assert seqs == list(range(2, sent + 2)), "a watcher saw a seq twice or missed one"
    assert [json.loads(m)["seq"] for m in owner_got if b'"type":"ok"' in m] == list(range(2, sent + 2))
    assert open_websockets(d) == 2
    for c in (owner, stalled, reader):
        c.close()


def test_a_subscriber_dropped_during_the_fan_out_costs_the_other_subscriber_nothing(vigild):
    d = vigild(CONFIG)
    stalled = Client(d.port, rcvbuf=4096)
    reader = Client(d.port)
    publisher = Client(d.port)
    for c in (stalled, reader):
        assert c.request({"op": "subscribe", "area": {"bbox": [52.0, 13.0, 53.0, 14.0]}})["type"] == "ok"
    got: list[bytes] = []
    acks: list[bytes] = []
    sent = 0
    while open_websockets(d) == 3:
        assert sent < 100000, "the stalled subscriber was never dropped"
        publisher.sock.sendall(b"".join(
            encode_frame(OP_TEXT, json.dumps({"op": "pin.create", "ref": i,
                                              "pin": {"lat": 52.5, "lon": 13.4, "title": f"pin {i}"}}).encode())
            for i in range(sent, sent + 1000)))
        sent += 1000
        reader.collect(got, lambda: len(got) >= sent)
        publisher.collect(acks, lambda: len(acks) >= sent)
    titles = [json.loads(m)["pin"]["title"] for m in got]
    assert titles == [f"pin {i}" for i in range(sent)], "a subscriber saw a pin twice or missed one"
    for c in (stalled, reader, publisher):
        c.close()
