"""A small client for the Vigil v1 pin protocol (docs/PROTOCOL.md), for the pin tests.

Built on Python ``websockets`` (sync client) so the server is checked against an
independent implementation of RFC 6455.  Every read has a deadline.

* ``PinClient``  -- one connection = one session: reads the welcome, sends requests with
  fresh refs, separates replies from events (events that arrive while waiting for a reply
  are queued, in order, for ``event()``), and offers ``quiet()``: "no event arrives",
  checked by a bounded wait *and* a barrier (a request on the same connection whose reply
  must come with no event before it: the server processes a connection's messages in
  order and sends a reply before the events the request causes).
* ``write_config`` (from vigilproc) writes the pin tests' configs, lists included, and
  the path goes to the launcher.
* ``geohash``, ``haversine_m``, ``offset_north`` / ``offset_east`` -- geometry for the
  circle tests.
"""

from __future__ import annotations

import itertools
import socket
import json
import math
import time
from collections import deque
from pathlib import Path

import privacy

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

import transport
from vigilproc import write_config  # noqa: F401  (re-exported for the pin tests)

PIN_KEYS = {"id", "lat", "lon", "title", "description", "category", "created_at", "updated_at",
            "expires_at", "up", "down"}
EVENT_TYPES = {"pin.added", "pin.updated", "pin.removed", "pin.expired", "clusters.changed"}
BARRIER_OP = "e2e.barrier"  # not an operation: its reply is an unknown_op error, any reply will do

_AUTO = object()


# ---------------------------------------------------------------------------------------
# config
# ---------------------------------------------------------------------------------------
# Per-address budgets high enough that a module's tests, all from 127.0.0.1, never meet them;
# test_abuse.py tests the budgets themselves.
GENEROUS_LIMITS = {"panic_start_burst": 100000, "panic_starts_per_hour": 1000000, "pin_create_burst": 100000,
                   "pin_creates_per_hour": 10000000, "subscribe_burst": 100000, "subscribes_per_second": 100000}


def pins_config(**overrides) -> dict:
    """The full pins/session config of the contract, with ``overrides`` as
    ``{"pins": {...}, "session": {...}, ...}`` merged in per section."""
    cfg = {
        "limits": dict(GENEROUS_LIMITS),
        "server": {"shutdown_grace_ms": 2000},
        "pins": {
            "default_ttl_s": 14400, "min_ttl_s": 60, "max_ttl_s": 86400,
            "categories": ["general", "sighting", "hazard", "help", "social"],
            "vote_flag_threshold": 5, "writes_per_minute": 30, "write_burst": 30,
            "max_pins": 1000000, "max_subscribe_pins": 10000,
            "cell_precision_min": 1, "cell_precision_max": 7, "cover_cell_budget": 32,
        },
        "session": {"messages_per_second": 50, "message_burst": 100, "subscribes_per_second": 1000, "subscribe_burst": 1000},
    }
    for section, values in overrides.items():
        cfg.setdefault(section, {}).update(values)
    return cfg


def now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------------------------------
# client
# ---------------------------------------------------------------------------------------
class ProtocolViolation(AssertionError):
    pass


class PinClient:
    def __init__(self, port: int, *, timeout: float = 5.0, subprotocol: bool = True, source: str | None = None,
                 compression: str | None = None, rcvbuf: int | None = None):
        """``source`` binds the client to a loopback address (127.x.y.z): budgets that the daemon
        keeps per client address then see a different client. ``compression="deflate"`` offers
        permessage-deflate (``compressed`` then says whether the server agreed). ``rcvbuf`` sets
        the socket's receive buffer before it connects (a small one makes a client that does not
        read back up the server quickly)."""
        self.timeout = timeout
        opts = dict(proxy=None, compression=compression, ping_interval=None, open_timeout=5,
                    close_timeout=3, max_size=16 * 1024 * 1024)
        if subprotocol:
            opts["subprotocols"] = ["vigil.v1"]
        url, tls = transport.ws_url(port)  # ws:// or wss:// (VIGIL_E2E_SCHEME)
        opts.update(tls)
        if source is not None or rcvbuf is not None:
            port_of_url = int(url.split(":")[2].split("/")[0])
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if rcvbuf is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.settimeout(5)
            sock.bind((source or "127.0.0.1", 0))
            sock.connect(("127.0.0.1", port_of_url))
            opts["sock"] = sock
        try:
            self.ws = connect(url, legacy=True, **opts)
        except TypeError:  # websockets without the legacy flag: connect() returns the connection
            self.ws = connect(url, **opts)
        self.events: deque[dict] = deque()
        self.log: list[tuple[str, object]] = []  # ("sent"/"recv", payload) for failure messages
        self._refs = itertools.count(1)
        self.welcome = self.recv_json()
        if self.welcome.get("type") != "welcome":
            raise ProtocolViolation(f"first message is not a welcome: {self.welcome!r}")

    # -- context manager ----------------------------------------------------------------
    def __enter__(self) -> "PinClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:
            pass

    @property
    def compressed(self) -> bool:
        """Whether the server agreed to permessage-deflate."""
        return "permessage-deflate" in (self.ws.response.headers.get("Sec-WebSocket-Extensions") or "")

    @property
    def session(self) -> str:
        return self.welcome["session"]

    # -- raw I/O ------------------------------------------------------------------------
    def send_raw(self, data: str | bytes) -> None:
        self.log.append(("sent", data))
        self.ws.send(data)

    def send_json(self, obj: dict) -> None:
        self.send_raw(json.dumps(obj, ensure_ascii=False, allow_nan=False))

    def recv_json(self, timeout: float | None = None) -> dict:
        raw = self.ws.recv(timeout=self.timeout if timeout is None else timeout)
        self.log.append(("recv", raw))
        if not isinstance(raw, str):
            raise ProtocolViolation(f"server sent a binary message: {raw[:100]!r}")
        msg = json.loads(raw)
        privacy.record(raw)
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            raise ProtocolViolation(f"server message is not an object with a string type: {raw!r}")
        return msg

    def history(self, n: int = 12) -> str:
        return "\n".join(f"  {d}: {p[:300]!r}" for d, p in self.log[-n:])

    # -- requests -----------------------------------------------------------------------
    def next_ref(self) -> int:
        return next(self._refs)

    def send_request(self, op, *, ref=_AUTO, **fields) -> object:
        """Send without waiting; returns the ref used (None when ref=None)."""
        msg = {"op": op}
        if ref is _AUTO:
            ref = self.next_ref()
        if ref is not None:
            msg["ref"] = ref
        msg.update(fields)
        self.send_json(msg)
        return ref

    def await_reply(self, ref, timeout: float | None = None, *, check_ref: bool = True) -> dict:
        """Read until the next reply (type ok/error); events before it are queued.  The
        reply must carry ``ref`` (absent when ``ref`` is None) unless check_ref is False."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply to ref {ref!r} within the deadline\n{self.history()}")
            try:
                msg = self.recv_json(left)
            except TimeoutError:
                raise TimeoutError(f"no reply to ref {ref!r} within the deadline\n{self.history()}")
            if msg["type"] in ("ok", "error"):
                if not check_ref:
                    return msg
                if ref is None:
                    if "ref" in msg:
                        raise ProtocolViolation(f"reply has a ref but the request had none: {msg!r}")
                elif msg.get("ref") != ref or type(msg.get("ref")) is not type(ref):
                    raise ProtocolViolation(f"expected the reply to ref {ref!r}, got {msg!r}\n{self.history()}")
                return msg
            self._check_event(msg)
            self.events.append(msg)

    def request(self, op, *, ref=_AUTO, **fields) -> dict:
        ref = self.send_request(op, ref=ref, **fields)
        return self.await_reply(ref)

    def ok(self, op, **fields) -> dict:
        reply = self.request(op, **fields)
        if reply["type"] != "ok":
            raise AssertionError(f"{op} {fields!r} -> expected ok, got {reply!r}")
        return reply

    def error(self, op, **fields) -> dict:
        reply = self.request(op, **fields)
        if reply["type"] != "error":
            raise AssertionError(f"{op} {fields!r} -> expected an error, got {reply!r}")
        return reply

    # -- convenience operations ---------------------------------------------------------
    def subscribe_bbox(self, south, west, north, east, categories=None) -> list[dict]:
        fields = {"area": {"bbox": [south, west, north, east]}}
        if categories is not None:
            fields["categories"] = categories
        return self.ok("subscribe", **fields)["pins"]

    def subscribe_circle(self, lat, lon, radius_m, categories=None) -> list[dict]:
        fields = {"area": {"center": {"lat": lat, "lon": lon}, "radius_m": radius_m}}
        if categories is not None:
            fields["categories"] = categories
        return self.ok("subscribe", **fields)["pins"]

    def create(self, lat, lon, title="pin", **extra) -> tuple[dict, str]:
        reply = self.ok("pin.create", pin={"lat": lat, "lon": lon, "title": title, **extra})
        return reply["pin"], reply["edit_token"]

    # -- events -------------------------------------------------------------------------
    #: The event types this client takes: a subclass names its own here (or overrides
    #: ``_check_event``, as the older ones do).
    EVENTS = EVENT_TYPES

    def _check_event(self, msg: dict) -> None:
        if "ref" in msg:
            raise ProtocolViolation(f"an event carries a ref: {msg!r}")
        if msg["type"] not in self.EVENTS:
            raise ProtocolViolation(f"unexpected message type: {msg!r}")

    def event(self, timeout: float | None = None) -> dict:
        if self.events:
            return self.events.popleft()
        try:
            msg = self.recv_json(timeout)
        except TimeoutError:
            raise AssertionError(f"no event within {self.timeout if timeout is None else timeout}s\n"
                                 f"{self.history()}") from None
        if msg["type"] in ("ok", "error"):
            raise ProtocolViolation(f"expected an event, got a reply: {msg!r}")
        self._check_event(msg)
        return msg

    def barrier(self) -> dict:
        """One request/reply round trip; asserts no event arrived before the reply."""
        before = len(self.events)
        reply = self.request(BARRIER_OP)
        if len(self.events) > before:
            extra = list(self.events)[before:]
            raise AssertionError(f"unexpected event(s) before the barrier reply: {extra!r}")
        return reply

    def quiet(self, wait: float = 0.25) -> None:
        """Assert that no event is pending or arrives: a bounded wait, then a barrier."""
        if self.events:
            raise AssertionError(f"unexpected queued event(s): {list(self.events)!r}")
        try:
            msg = self.recv_json(wait)
        except TimeoutError:
            msg = None
        if msg is not None:
            raise AssertionError(f"expected no event, got {msg!r}")
        self.barrier()

    def closed_with(self, timeout: float = 5.0) -> int | None:
        """Read (discarding) until the server closes; returns its close code."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.ws.recv(timeout=max(0.01, deadline - time.monotonic()))
            except ConnectionClosed as e:
                return e.rcvd.code if e.rcvd is not None else None
            except TimeoutError:
                break
        raise AssertionError(f"the server did not close the connection within {timeout}s")


# ---------------------------------------------------------------------------------------
# geometry
# ---------------------------------------------------------------------------------------
EARTH_R = 6371008.8  # mean radius (IUGG); the tests keep a margin of 1.5 % for other choices
_B32 = "0123456789bcdefghjkmnpqrstuvwxyz"


def geohash(lat: float, lon: float, precision: int) -> str:
    lat_lo, lat_hi, lon_lo, lon_hi = -90.0, 90.0, -180.0, 180.0
    out, bits, ch, even = [], 0, 0, True
    while len(out) < precision:
        if even:
            mid = (lon_lo + lon_hi) / 2
            bit = lon >= mid
            lon_lo, lon_hi = (mid, lon_hi) if bit else (lon_lo, mid)
        else:
            mid = (lat_lo + lat_hi) / 2
            bit = lat >= mid
            lat_lo, lat_hi = (mid, lat_hi) if bit else (lat_lo, mid)
        ch = (ch << 1) | int(bit)
        bits += 1
        even = not even
        if bits == 5:
            out.append(_B32[ch])
            bits, ch = 0, 0
    return "".join(out)


def geohash_box(lat: float, lon: float, precision: int) -> tuple[float, float, float, float]:
    """(lat_lo, lat_hi, lon_lo, lon_hi) of the geohash cell holding the point (bisection)."""
    lat_lo, lat_hi, lon_lo, lon_hi = -90.0, 90.0, -180.0, 180.0
    even = True
    for _ in range(precision * 5):
        if even:
            mid = (lon_lo + lon_hi) / 2
            lon_lo, lon_hi = (mid, lon_hi) if lon >= mid else (lon_lo, mid)
        else:
            mid = (lat_lo + lat_hi) / 2
            lat_lo, lat_hi = (mid, lat_hi) if lat >= mid else (lat_lo, mid)
        even = not even
    return lat_lo, lat_hi, lon_lo, lon_hi


def haversine_m(lat1, lon1, lat2, lon2) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_R * math.asin(math.sqrt(a))


def deg_lat(metres: float) -> float:
    """Degrees of latitude for ``metres`` along a meridian (sphere)."""
    return math.degrees(metres / EARTH_R)


# ---------------------------------------------------------------------------------------
# daemons
# ---------------------------------------------------------------------------------------


def client_factory(cls, port: int):
    """For a fixture (``yield from``): a function that opens ``n`` clients of ``cls`` on ``port``
    (one, or a list of them), every one closed after the test."""
    opened = []

    def make(n: int = 1):
        new = [cls(port) for _ in range(n)]
        opened.extend(new)
        return new[0] if n == 1 else new

    yield make
    for c in opened:
        c.close()


def start_daemon(launcher, config: dict):
    """Start a daemon through a conftest launcher (``vigild`` / ``vigild_module``), which writes
    the config (and adds the TLS listener in a wss run)."""
    return launcher(config)


class _SharedPinDaemon:
    def __init__(self, launcher, config: dict):
        self.launcher, self.config, self.current = launcher, config, None

    def get(self):
        if self.current is None or not self.current.running():
            self.current = start_daemon(self.launcher, self.config)
        return self.current


def pin_server_fixture(name: str, config: dict):
    """Like conftest.shared_server_fixture, for pin configs: a function-scoped fixture
    ``name`` backed by one module-scoped daemon (restarted if a test killed it), checked
    alive after every test.  Assign both results to module globals."""
    import pytest
    from conftest import check_alive

    shared_name = f"_{name}_shared"

    @pytest.fixture(scope="module", name=shared_name)
    def _shared(vigild_module):
        return _SharedPinDaemon(vigild_module, config)

    @pytest.fixture(name=name)
    def _server(request):
        d = request.getfixturevalue(shared_name).get()
        yield d
        check_alive(d)

    return _shared, _server
