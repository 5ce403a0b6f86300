"""Hostile clients cannot deny service to people in danger (issue 11): budgets that a reconnect
does not reset, counted per client address (each client here binds its own loopback address),
the reserved share of stream capacity, trusted proxies' X-Forwarded-For, operations that change
nothing journal nothing, and every request getting exactly one reply.
"""

from __future__ import annotations

import itertools
import json
import socket
import time
from pathlib import Path

import pytest

import pinclient as pc
from pinclient import PinClient

_ADDRESSES = itertools.count(1)


def address() -> str:
    """A fresh loopback address (127.1.x.y): a different client network for the daemon."""
    n = next(_ADDRESSES)
    return f"127.1.{n // 250}.{n % 250 + 1}"


class Panic(PinClient):
    @staticmethod
    def _check_event(msg: dict) -> None:
        pass


def config(**sections) -> dict:
    base = pc.pins_config(session={"messages_per_second": 1000, "message_burst": 2000},
                          pins={"writes_per_minute": 6000, "write_burst": 1000})
    for name, values in sections.items():
        base.setdefault(name, {}).update(values)
    return base


def start(c: PinClient) -> dict:
    return c.request("panic.start", status="red", lat=52.5, lon=13.4, watchers=1)


def test_panic_starts_per_address_survive_reconnects(vigild):
    d = vigild(config(limits={"panic_start_burst": 3, "panic_starts_per_hour": 1}))
    mine = address()
    for _ in range(3):
        with Panic(d.port, source=mine) as c:  # a new connection each time: a new session
            assert start(c)["type"] == "ok"
    with Panic(d.port, source=mine) as c:
        refused = start(c)
        assert refused["code"] == "rate_limited" and refused["retry_after_ms"] > 0
    with Panic(d.port, source=address()) as other:
        assert start(other)["type"] == "ok", "another network is not affected"


def test_open_streams_per_address_are_capped_and_freed_by_an_end(vigild):
    d = vigild(config(limits={"open_streams_per_address": 2}))
    with Panic(d.port, source=address()) as c:
        first, second = start(c), start(c)
        assert first["type"] == second["type"] == "ok"
        assert start(c)["code"] == "capacity_exceeded"
        c.ok("panic.end", stream=first["stream"], reason="safe")
        assert start(c)["type"] == "ok"


def test_pins_per_address_rate_and_live_count(vigild):
    d = vigild(config(limits={"pin_create_burst": 4, "pin_creates_per_hour": 1, "live_pins_per_address": 3}))
    mine = address()
    with PinClient(d.port, source=mine) as c:
        made = [c.create(1.0, 1.0 + i / 100, f"p{i}") for i in range(3)]
        assert c.request("pin.create", pin={"lat": 1, "lon": 1, "title": "fourth"})["code"] == "capacity_exceeded"
        c.ok("pin.delete", id=made[0][0]["id"], edit_token=made[0][1])
        assert c.request("pin.create", pin={"lat": 1, "lon": 1, "title": "again"})["type"] == "ok"
    with PinClient(d.port, source=mine) as c:  # reconnected: the hourly rate is spent
        refused = c.request("pin.create", pin={"lat": 1, "lon": 1, "title": "fifth"})
        assert refused["code"] in ("rate_limited", "capacity_exceeded")


def test_subscribe_is_rate_limited_per_connection_and_per_address(vigild):
    d = vigild(config(session={"subscribes_per_second": 1, "subscribe_burst": 2},
                      limits={"subscribes_per_second": 1, "subscribe_burst": 3}))
    mine = address()
    area = {"bbox": [0, 0, 1, 1]}
    with PinClient(d.port, source=mine) as a, PinClient(d.port, source=mine) as b:
        assert [a.request("subscribe", area=area)["type"] for _ in range(2)] == ["ok", "ok"]
        per_connection = a.request("subscribe", area=area)
        assert per_connection["code"] == "rate_limited" and per_connection["retry_after_ms"] > 0
        assert b.request("subscribe", area=area)["type"] == "ok"  # the address's third
        per_address = b.request("subscribe", area=area)
        assert per_address["code"] == "rate_limited"


def test_the_reserve_is_closed_to_an_address_with_idle_streams(vigild):
    """max 10 streams, 20 % reserved: 8 anyone may take; the last 2 only an address with no idle
    stream (one whose last location is older than the stale time)."""
    d = vigild(config(panic={"max_streams": 10, "reserved_percent": 20, "stale_after_ms": 1000}))
    hoarder, person = address(), address()
    with Panic(d.port, source=hoarder) as h, Panic(d.port) as watcher:
        streams = [start(h) for _ in range(8)]
        assert all(s["type"] == "ok" for s in streams)
        # Wait for the hoarder's streams to go silent: the stale notice is the event to await.
        watcher.ok("panic.watch", stream=streams[-1]["stream"], watch_token=streams[-1]["watch_tokens"][0])
        deadline = time.monotonic() + 10
        while True:
            event = watcher.event(timeout=max(0.1, deadline - time.monotonic()))
            if event["type"] == "panic.stale":
                break
        assert start(h)["code"] == "capacity_exceeded", "idle streams keep an address out of the reserve"
        with Panic(d.port, source=person) as p:
            assert start(p)["type"] == "ok" and start(p)["type"] == "ok", "a person in danger gets the reserve"
            assert start(p)["code"] == "capacity_exceeded", "the server-wide limit still holds"


def test_x_forwarded_for_from_a_trusted_proxy_names_the_client(vigild):
    d = vigild(config(server={"trusted_proxies": ["127.0.0.1"]},
                      limits={"panic_start_burst": 1, "panic_starts_per_hour": 1}))

    def proxied(client: str, peer: str = "127.0.0.1") -> dict:
        s = socket.create_connection(("127.0.0.1", d.port), timeout=5, source_address=(peer, 0))
        s.sendall(("GET /v1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   f"X-Forwarded-For: {client}\r\n\r\n").encode())
        from wsraw import OP_TEXT, RawConn
        c = RawConn(s)
        assert c.read_response().status == 101
        c.read_frame()  # welcome
        c.send_frame(OP_TEXT, json.dumps({"op": "panic.start", "ref": 1, "status": "red", "lat": 1, "lon": 1, "watchers": 1}).encode())
        reply = json.loads(c.read_frame().payload)
        c.close()
        return reply

    assert proxied("198.51.100.1")["type"] == "ok"
    assert proxied("198.51.100.1")["code"] == "rate_limited", "the same client behind the proxy"
    assert proxied("198.51.100.2")["type"] == "ok", "another client behind the same proxy"
    # From a peer that is not a trusted proxy the header is ignored: the peer itself is counted.
    untrusted = address()
    assert proxied("203.0.113.9", peer=untrusted)["type"] == "ok"
    assert proxied("203.0.113.10", peer=untrusted)["code"] == "rate_limited"


def journal_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("journal-*"))


def test_operations_that_change_nothing_journal_nothing(vigild, tmp_path):
    """A status set to the status a stream has, and a revoke of a token that is not live, used to
    journal a record (and fsync it: both are critical) though nothing changed."""
    state = tmp_path / "state"
    d = vigild(config(state={"directory": str(state), "fsync": "always"}))
    with Panic(d.port) as owner:
        started = start(owner)
        stream = started["stream"]
        before = journal_bytes(state)
        for _ in range(20):
            assert owner.ok("panic.status", stream=stream, status="red")["seq"] == 1
            owner.ok("panic.revoke", stream=stream, watch_token="A" * 43)
        assert journal_bytes(state) == before
        owner.ok("panic.status", stream=stream, status="amber")
        assert journal_bytes(state) > before, "a real change is still journaled"


@pytest.mark.parametrize("op,fields", [
    ("panic.update", {"lat": 1, "lon": 1}),
    ("panic.status", {"status": "amber"}),
    ("panic.end", {"reason": "safe"}),
    ("panic.resume", {"owner_token": "t" * 43}),
    ("panic.watch", {"watch_token": "t" * 43}),
    ("panic.unwatch", {}),
    ("panic.invite", {}),
    ("panic.revoke", {"watch_token": "t" * 43}),
])
@pytest.mark.parametrize("stream", ["short", "A" * 23, "!" * 22, "AAAAAAAAAAAAAAAAAAAAAB"],
                         ids=["short", "too-long", "not-base64url", "unused-bits-set"])
def test_a_malformed_stream_id_gets_exactly_one_reply(vigild_module, op, stream, fields):
    """Before issue 11's fix these got no reply at all; the answer is the same as for a wrong
    token, so a stream's existence cannot be probed."""
    d = vigild_module(config())
    with Panic(d.port) as c:
        reply = c.request(op, stream=stream, **fields)
        if op == "panic.unwatch":
            assert reply["type"] == "ok"
        else:
            assert reply["type"] == "error" and reply["code"] == "forbidden"
        c.quiet(0.1)
