"""Hand-made HTTP/1.1 and RFC 6455 bytes over plain sockets, for the hostile tests.

Nothing here is clever on purpose: every request and frame is built byte by byte so a
test can break exactly one rule at a time (an unmasked frame, a bad key, a reserved
opcode).  Every read takes a deadline; nothing blocks forever.

Shared with ``benchmarks/idle_connections.py`` (it imports this module), so the
handshake used by the idle test and by the benchmark is the same code.
"""

from __future__ import annotations

import base64
import hashlib
import os
import select
import socket
import struct
import time
from dataclasses import dataclass, field

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT, OP_TEXT, OP_BINARY = 0x0, 0x1, 0x2
OP_CLOSE, OP_PING, OP_PONG = 0x8, 0x9, 0xA

# Client source addresses used by the bulk tests: loopback is a /8 on Linux, so every
# 127.0.0.N is a distinct local address with its own ephemeral port range.
SOURCE_HOSTS = [f"127.0.0.{n}" for n in range(2, 251)]


def make_key(rng=None) -> str:
    """A fresh Sec-WebSocket-Key: base64 of 16 random bytes."""
    raw = rng.randbytes(16) if rng is not None else os.urandom(16)
    return base64.b64encode(raw).decode("ascii")


def accept_for(key: str) -> str:
    """The Sec-WebSocket-Accept a server must answer to ``key`` (RFC 6455 §4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + WS_GUID).digest()).decode("ascii")


def upgrade_request(path: str = "/echo", *, host: str = "127.0.0.1", key: str | None = None,
                    protocols: str | None = None, method: str = "GET", version: str = "HTTP/1.1",
                    headers: dict[str, str | None] | None = None) -> bytes:
    """A WebSocket upgrade request.  ``headers`` overrides (or, with None, removes) the
    standard headers, so a test can drop or alter exactly one of them."""
    std: dict[str, str | None] = {
        "Host": host,
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": key if key is not None else make_key(),
        "Sec-WebSocket-Version": "13",
    }
    if protocols is not None:
        std["Sec-WebSocket-Protocol"] = protocols
    for name, value in (headers or {}).items():
        # Case-insensitive override of a standard header.
        for existing in list(std):
            if existing.lower() == name.lower():
                del std[existing]
        std[name] = value
    lines = [f"{method} {path} {version}"]
    lines += [f"{k}: {v}" for k, v in std.items() if v is not None]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def plain_request(path: str = "/healthz", *, method: str = "GET", host: str | None = "127.0.0.1",
                  extra: str = "") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\n"
    if host is not None:
        head += f"Host: {host}\r\n"
    return (head + extra + "\r\n").encode("latin-1")


def encode_frame(opcode: int, payload: bytes = b"", *, fin: bool = True, rsv: int = 0,
                 mask: bool = True, mask_key: bytes | None = None,
                 declared_length: int | None = None) -> bytes:
    """One frame.  ``rsv`` is the 3-bit RSV1..3 field; ``declared_length`` lies about the
    payload length (for oversize headers whose payload is never sent)."""
    length = len(payload) if declared_length is None else declared_length
    b0 = (0x80 if fin else 0) | ((rsv & 0x7) << 4) | (opcode & 0xF)
    m = 0x80 if mask else 0
    if length < 126:
        head = struct.pack("!BB", b0, m | length)
    elif length < 1 << 16:
        head = struct.pack("!BBH", b0, m | 126, length)
    else:
        head = struct.pack("!BBQ", b0, m | 127, length)
    if not mask:
        return head + payload
    key = mask_key if mask_key is not None else os.urandom(4)
    return head + key + apply_mask(payload, key)


def apply_mask(payload: bytes, key: bytes) -> bytes:
    if not payload:
        return b""
    n = len(payload)
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")


def close_payload(code: int | None, reason: bytes = b"") -> bytes:
    return b"" if code is None else struct.pack("!H", code) + reason


@dataclass
class Frame:
    fin: bool
    rsv: int
    opcode: int
    payload: bytes
    masked: bool

    @property
    def close_code(self) -> int | None:
        if self.opcode != OP_CLOSE or len(self.payload) < 2:
            return None
        return struct.unpack("!H", self.payload[:2])[0]

    def __repr__(self) -> str:
        body = self.payload if len(self.payload) <= 40 else self.payload[:40] + b"..."
        return f"Frame(op={self.opcode:#x} fin={self.fin} rsv={self.rsv} len={len(self.payload)} {body!r})"


@dataclass
class Response:
    status: int
    reason: str
    headers: dict[str, str]  # lower-cased names; repeated headers joined with ", "
    body: bytes
    raw_head: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


class Closed(Exception):
    """The peer closed (EOF or reset) before the expected bytes arrived."""


class Timeout(Exception):
    """The deadline passed before the expected bytes arrived."""


@dataclass
class RawConn:
    """A blocking client socket plus a read buffer; every read has a deadline."""

    sock: socket.socket
    buf: bytearray = field(default_factory=bytearray)
    eof: bool = False
    reset: bool = False

    # -- connecting -------------------------------------------------------------------
    @classmethod
    def connect(cls, port: int, host: str = "127.0.0.1", *, source: str | None = None,
                timeout: float = 5.0) -> "RawConn":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if source is not None:
            s.bind((source, 0))
        s.settimeout(timeout)
        s.connect((host, port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(s)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def abort(self) -> None:
        """Close with RST (SO_LINGER 0): the client vanishes without a FIN."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close()

    def __enter__(self) -> "RawConn":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writing ----------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, opcode: int, payload: bytes = b"", **kw) -> None:
        self.sock.sendall(encode_frame(opcode, payload, **kw))

    # -- reading ----------------------------------------------------------------------
    def _fill(self, deadline: float) -> bool:
        """Read once into the buffer.  False on EOF/reset; raises Timeout at the deadline."""
        if self.eof:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Timeout()
        r, _, _ = select.select([self.sock], [], [], remaining)
        if not r:
            raise Timeout()
        try:
            chunk = self.sock.recv(65536)
        except (ConnectionResetError, ConnectionAbortedError):
            self.eof = self.reset = True
            return False
        except (BlockingIOError, InterruptedError, socket.timeout):
            return True
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def read_exact(self, n: int, timeout: float = 5.0) -> bytes:
        deadline = time.monotonic() + timeout
        while len(self.buf) < n:
            if not self._fill(deadline):
                raise Closed(f"peer closed after {len(self.buf)} of {n} bytes")
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_until(self, marker: bytes, timeout: float = 5.0) -> bytes:
        deadline = time.monotonic() + timeout
        while True:
            i = self.buf.find(marker)
            if i >= 0:
                out = bytes(self.buf[: i + len(marker)])
                del self.buf[: i + len(marker)]
                return out
            if not self._fill(deadline):
                raise Closed(f"peer closed before {marker!r}; got {bytes(self.buf[:200])!r}")

    def read_response(self, timeout: float = 5.0) -> Response:
        """An HTTP/1.1 response head plus its body (Content-Length, or to EOF for
        Connection: close without a length; a 101 has no body)."""
        deadline = time.monotonic() + timeout
        head = self.read_until(b"\r\n\r\n", timeout)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise AssertionError(f"not an HTTP status line: {lines[0]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            name, _, value = line.partition(":")
            key = name.strip().lower()
            headers[key] = (headers[key] + ", " if key in headers else "") + value.strip()
        body = b""
        if status != 101 and status >= 200 and status not in (204, 304):
            if "content-length" in headers:
                body = self.read_exact(int(headers["content-length"]), max(0.0, deadline - time.monotonic()))
            else:
                self.wait_eof(max(0.0, deadline - time.monotonic()))
                body, self.buf = bytes(self.buf), bytearray()
        return Response(status, parts[2] if len(parts) > 2 else "", headers, body, head)

    def read_frame(self, timeout: float = 5.0) -> Frame:
        deadline = time.monotonic() + timeout
        left = lambda: max(0.0, deadline - time.monotonic())  # noqa: E731
        b0, b1 = self.read_exact(2, left())
        length = b1 & 0x7F
        if length == 126:
            length = struct.unpack("!H", self.read_exact(2, left()))[0]
        elif length == 127:
            length = struct.unpack("!Q", self.read_exact(8, left()))[0]
        key = self.read_exact(4, left()) if b1 & 0x80 else None
        payload = self.read_exact(length, left())
        if key:
            payload = apply_mask(payload, key)
        return Frame(bool(b0 & 0x80), (b0 >> 4) & 7, b0 & 0xF, payload, key is not None)

    def wait_eof(self, timeout: float = 5.0) -> bool:
        """Wait for the peer to close TCP, discarding nothing (bytes stay in ``buf``).
        True if EOF/reset arrived before the deadline."""
        deadline = time.monotonic() + timeout
        try:
            while self._fill(deadline):
                pass
        except Timeout:
            return False
        return True

    def read_until_close(self, timeout: float = 5.0, *, answer_pings: bool = False,
                         reply_close: bool = False) -> tuple[list[Frame], Frame | None, bool]:
        """Read frames until the server's close frame and TCP EOF (or the deadline).
        Returns (frames before the close, the close frame or None, eof seen).
        With ``reply_close`` the close frame is echoed back as the RFC asks."""
        deadline = time.monotonic() + timeout
        frames: list[Frame] = []
        close = None
        try:
            while close is None:
                f = self.read_frame(max(0.0, deadline - time.monotonic()))
                if f.opcode == OP_CLOSE:
                    close = f
                    if reply_close:
                        try:
                            self.send_frame(OP_CLOSE, f.payload[:2])
                        except OSError:
                            pass
                else:
                    frames.append(f)
                    if answer_pings and f.opcode == OP_PING:
                        self.send_frame(OP_PONG, f.payload)
        except (Closed, Timeout):
            pass
        except (ValueError, struct.error):
            pass
        eof = self.wait_eof(max(0.0, deadline - time.monotonic()))
        return frames, close, eof


def ws_connect(port: int, path: str = "/echo", *, source: str | None = None, protocols: str | None = None,
               timeout: float = 5.0) -> RawConn:
    """Open a raw WebSocket connection and check the 101 answer (status and accept key)."""
    conn = RawConn.connect(port, source=source, timeout=timeout)
    key = make_key()
    conn.send(upgrade_request(path, key=key, protocols=protocols))
    resp = conn.read_response(timeout)
    if resp.status != 101:
        conn.close()
        raise AssertionError(f"expected 101 on {path}, got {resp.status} {resp.reason}: {resp.raw_head!r}")
    if resp.header("sec-websocket-accept") != accept_for(key):
        conn.close()
        raise AssertionError(f"bad Sec-WebSocket-Accept {resp.header('sec-websocket-accept')!r} for key {key!r}")
    return conn


def http_get(port: int, path: str = "/healthz", timeout: float = 5.0) -> Response:
    with RawConn.connect(port, timeout=timeout) as c:
        c.send(plain_request(path))
        return c.read_response(timeout)
