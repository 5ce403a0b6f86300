"""Many WebSocket clients at once from one thread: non-blocking sockets + epoll.

Two jobs, shared by ``test_idle.py``, ``test_hostile.py`` and
``benchmarks/idle_connections.py``:

* ``open_upgraded`` opens N connections, completes the upgrade on each and keeps them
  (idle test / benchmark);
* ``churn`` runs N short connect/disconnect cycles of several kinds (hostile test).

A bounded window of connections is in flight at a time so the daemon's listen backlog
never overflows (an overflowed SYN is retried after a second, which would only slow the
run).  Client source addresses rotate over 127.0.0.2-250 (``wsraw.SOURCE_HOSTS``) so
TIME_WAIT never exhausts one address's ephemeral ports.
"""

from __future__ import annotations

import errno
import selectors
import socket
import struct
import time
from dataclasses import dataclass, field

from wsraw import OP_CLOSE, SOURCE_HOSTS, accept_for, encode_frame, make_key, upgrade_request

# Cycle kinds for ``churn``.
TCP_ONLY = "tcp"          # connect, then close before sending anything
CLOSE_FRAME = "close"     # handshake, send close 1000, expect close 1000 back and EOF
ABORT = "abort"           # handshake, then RST (SO_LINGER 0)
DROP = "drop"             # handshake, then FIN without a close frame
KINDS = (TCP_ONLY, CLOSE_FRAME, ABORT, DROP)

_CONNECTING, _HANDSHAKE, _CLOSING = range(3)


@dataclass
class _Client:
    index: int
    sock: socket.socket
    kind: str
    key: str
    path: str
    stage: int = _CONNECTING
    inbuf: bytearray = field(default_factory=bytearray)
    outbuf: bytes = b""


@dataclass
class BulkResult:
    opened: list[socket.socket]
    failures: list[tuple[int, str]]
    elapsed: float
    kinds_done: dict[str, int] = field(default_factory=dict)

    def failure_summary(self, limit: int = 5) -> str:
        counts: dict[str, int] = {}
        for _, why in self.failures:
            counts[why.split(":")[0]] = counts.get(why.split(":")[0], 0) + 1
        sample = "; ".join(f"#{i}: {why}" for i, why in self.failures[:limit])
        return f"{len(self.failures)} failures {counts} e.g. {sample}"


def _linger_rst(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _run(port: int, kinds: list[str], *, path: str, keep: bool, window: int, timeout: float,
         host: str = "127.0.0.1",
         source_hosts: list[str] | None = None) -> BulkResult:
    sel = selectors.DefaultSelector()
    sources = source_hosts if source_hosts is not None else SOURCE_HOSTS
    n = len(kinds)
    opened: list[socket.socket] = []
    failures: list[tuple[int, str]] = []
    done: dict[str, int] = {}
    launched = 0
    inflight = 0
    t0 = time.monotonic()
    deadline = t0 + timeout

    def finish(c: _Client, *, ok: bool, why: str = "", keep_sock: bool = False) -> None:
        nonlocal inflight
        inflight -= 1
        try:
            sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        if ok:
            done[c.kind] = done.get(c.kind, 0) + 1
        else:
            failures.append((c.index, why))
        if keep_sock:
            opened.append(c.sock)
        else:
            c.sock.close()

    try:
        while launched < n or inflight:
            while launched < n and inflight < window:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                try:
                    if sources:
                        s.bind((sources[launched % len(sources)], 0))
                    err = s.connect_ex((host, port))
                except OSError as e:
                    s.close()
                    failures.append((launched, f"connect: {e}"))
                    launched += 1
                    continue
                if err not in (0, errno.EINPROGRESS):
                    s.close()
                    failures.append((launched, f"connect: {errno.errorcode.get(err, err)}"))
                    launched += 1
                    continue
                c = _Client(launched, s, kinds[launched], make_key(), path)
                sel.register(s, selectors.EVENT_WRITE, c)
                launched += 1
                inflight += 1
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for skey, mask in sel.select(min(left, 1.0)):
                c: _Client = skey.data
                try:
                    _step(c, mask, sel)
                except _Done as d:
                    finish(c, ok=d.ok, why=d.why, keep_sock=d.keep and keep)
                except OSError as e:
                    finish(c, ok=False, why=f"{['connect', 'handshake', 'closing'][c.stage]}: {e}")
        # Whatever is still in flight at the deadline counts as failed.
        for skey in list(sel.get_map().values()):
            c = skey.data
            finish(c, ok=False, why=f"timeout: stage {['connect', 'handshake', 'closing'][c.stage]}")
        for i in range(launched, n):
            failures.append((i, "timeout: never launched"))
    finally:
        sel.close()
    return BulkResult(opened, failures, time.monotonic() - t0, done)


class _Done(Exception):
    def __init__(self, ok: bool, why: str = "", keep: bool = False):
        self.ok, self.why, self.keep = ok, why, keep


def _step(c: _Client, mask: int, sel: selectors.BaseSelector) -> None:
    s = c.sock
    if c.stage == _CONNECTING:
        err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise _Done(False, f"connect: {errno.errorcode.get(err, err)}")
        if c.kind == TCP_ONLY:
            raise _Done(True)
        c.outbuf = upgrade_request(c.path, key=c.key)
        c.stage = _HANDSHAKE
    if c.outbuf and (mask & selectors.EVENT_WRITE or c.stage == _HANDSHAKE):
        sent = s.send(c.outbuf)
        c.outbuf = c.outbuf[sent:]
        sel.modify(s, selectors.EVENT_WRITE if c.outbuf else selectors.EVENT_READ, c)
        return
    if not mask & selectors.EVENT_READ:
        return
    try:
        chunk = s.recv(65536)
    except BlockingIOError:
        return
    except ConnectionResetError:
        if c.stage == _CLOSING:
            raise _Done(False, "closing: reset instead of close frame + FIN")
        raise _Done(False, "handshake: reset")
    if not chunk:
        if c.stage == _CLOSING:
            _check_close_reply(c)
            raise _Done(True)
        raise _Done(False, f"handshake: EOF after {bytes(c.inbuf[:80])!r}")
    c.inbuf += chunk
    if c.stage == _HANDSHAKE:
        end = c.inbuf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(c.inbuf[:end]).decode("latin-1")
        del c.inbuf[: end + 4]
        status = head.split(" ", 2)[1] if " " in head else "?"
        if status != "101":
            raise _Done(False, f"status {status}: {head.splitlines()[0]!r}")
        want = accept_for(c.key).lower()
        if f"sec-websocket-accept: {want}" not in head.lower():
            raise _Done(False, "accept: wrong or missing Sec-WebSocket-Accept")
        if c.kind == CLOSE_FRAME:
            c.stage = _CLOSING
            c.outbuf = encode_frame(OP_CLOSE, struct.pack("!H", 1000))
            sent = s.send(c.outbuf)
            c.outbuf = c.outbuf[sent:]
            if c.outbuf:
                sel.modify(s, selectors.EVENT_WRITE | selectors.EVENT_READ, c)
            return
        if c.kind == ABORT:
            _linger_rst(s)
        raise _Done(True, keep=True)


def _check_close_reply(c: _Client) -> None:
    b = bytes(c.inbuf)
    if len(b) < 2 or b[0] != 0x88:
        raise _Done(False, f"closing: expected a close frame before EOF, got {b[:16]!r}")
    length = b[1] & 0x7F
    if length < 2 or len(b) < 4 or struct.unpack("!H", b[2:4])[0] != 1000:
        raise _Done(False, f"closing: expected close code 1000, got {b[:16]!r}")


def open_upgraded(port: int, n: int, *, path: str = "/v1", window: int = 512, timeout: float = 60.0,
                  source_hosts: list[str] | None = None) -> BulkResult:
    """Open ``n`` WebSocket connections to ``path`` and keep them (``result.opened``)."""
    return _run(port, [DROP] * n, path=path, keep=True, window=window, timeout=timeout,
                source_hosts=source_hosts)


def churn(port: int, kinds: list[str], *, path: str = "/v1", window: int = 256,
          timeout: float = 60.0) -> BulkResult:
    """Run one short connect/disconnect cycle per entry of ``kinds``."""
    return _run(port, kinds, path=path, keep=False, window=window, timeout=timeout)


def close_all(socks: list[socket.socket]) -> None:
    for s in socks:
        try:
            s.close()
        except OSError:
            pass
