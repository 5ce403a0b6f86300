"""Panic-location streams (docs/PROTOCOL.md, "Panic-location streams") end to end:
a real vigild on loopback, Python ``websockets`` clients (``pinclient.PinClient``).

One daemon (history window of 5 events, a long stale timer) is shared by most tests;
every test starts its own streams, so they never see each other's events.  The stale
signal needs a 1 s timer and gets its own daemon, so that it cannot fire in the other
tests.

"No event arrives" is checked by ``quiet()``: a bounded wait plus a barrier request on
the same connection (the server replies before the events a request causes, and
processes a connection's messages in order).
"""

from __future__ import annotations

import base64
import os
import time

import pytest

import pinclient as pc
from pinclient import PinClient, ProtocolViolation

PANIC_EVENTS = {"panic.location", "panic.status", "panic.ended", "panic.stale",
                "panic.watchers", "panic.revoked", "panic.timer"}
HISTORY = 5

CONFIG = pc.pins_config(
    session={"messages_per_second": 1000, "message_burst": 2000},
    pins={"writes_per_minute": 6000, "write_burst": 1000},
    panic={"history_events": HISTORY, "stale_after_ms": 600000, "ended_grace_ms": 600000,
           "max_streams": 10000, "max_watch_tokens": 32, "max_watchers_on_start": 16},
)
STALE_CONFIG = pc.pins_config(
    session={"messages_per_second": 1000, "message_burst": 2000},
    pins={"writes_per_minute": 6000, "write_burst": 1000},
    panic={"history_events": 100, "stale_after_ms": 1000, "ended_grace_ms": 600000,
           "max_streams": 100, "max_watch_tokens": 32, "max_watchers_on_start": 16},
)

_server_shared, _server = pc.pin_server_fixture("server", CONFIG)


class PanicClient(PinClient):
    """A PinClient whose events are the panic ones."""

    @staticmethod
    def _check_event(msg: dict) -> None:
        if "ref" in msg:
            raise ProtocolViolation(f"an event carries a ref: {msg!r}")
        if msg["type"] not in PANIC_EVENTS:
            raise ProtocolViolation(f"unexpected message type: {msg!r}")

    def start(self, lat=52.52, lon=13.405, status="red", **extra) -> dict:
        reply = self.ok("panic.start", status=status, lat=lat, lon=lon, **extra)
        assert isinstance(reply.get("stream"), str) and reply["stream"], reply
        assert reply["seq"] == 1, reply
        assert isinstance(reply.get("owner_token"), str) and reply["owner_token"], reply
        return reply

    def watch(self, stream, token, **extra) -> dict:
        return self.ok("panic.watch", stream=stream, watch_token=token, **extra)

    def event_of(self, etype: str, timeout: float | None = None) -> dict:
        ev = self.event(timeout)
        assert ev["type"] == etype, f"expected {etype}, got {ev!r}\n{self.history()}"
        return ev

    def watchers_count(self, timeout: float | None = None) -> int:
        return self.event_of("panic.watchers", timeout)["count"]

    def drain(self) -> list[dict]:
        """Events queued so far plus those arriving before a barrier reply."""
        self.request(pc.BARRIER_OP)
        out = list(self.events)
        self.events.clear()
        return out


def rand_id(nbytes: int) -> str:
    return base64.urlsafe_b64encode(os.urandom(nbytes)).rstrip(b"=").decode()


@pytest.fixture
def clients(server):
    opened: list[PanicClient] = []

    def make(n: int = 1):
        new = [PanicClient(server.port) for _ in range(n)]
        opened.extend(new)
        return new[0] if n == 1 else new

    yield make
    for c in opened:
        c.close()


def expect_error(client: PanicClient, code: str, op: str, **fields) -> dict:
    reply = client.error(op, **fields)
    assert reply.get("code") == code, f"{op} {fields!r}: expected {code}, got {reply!r}"
    return reply


def assert_location(ev, stream, seq, lat, lon):
    assert ev["type"] == "panic.location", ev
    assert ev["stream"] == stream and ev["seq"] == seq, ev
    assert ev["lat"] == pytest.approx(lat) and ev["lon"] == pytest.approx(lon), ev
    assert isinstance(ev["at"], int), ev


# ---------------------------------------------------------------------------------------
def test_owner_and_two_watchers_get_every_event_in_order(clients):
    owner, w1, w2 = clients(3)
    st = owner.start(lat=10.0, lon=20.0, accuracy_m=8, note="walking home", watchers=2)
    s, tokens = st["stream"], st["watch_tokens"]
    assert isinstance(tokens, list) and len(tokens) == 2 and tokens[0] != tokens[1], st

    r1 = w1.watch(s, tokens[0])
    state = r1["state"]
    assert state["stream"] == s and state["status"] == "red" and state["seq"] == 1, r1
    assert state["note"] == "walking home", r1
    assert state["last"]["lat"] == pytest.approx(10.0) and state["last"]["lon"] == pytest.approx(20.0), r1
    assert [p["seq"] for p in state["trail"]] == [1], r1
    assert "ended" not in state, r1
    assert owner.watchers_count() == 1
    w2.watch(s, tokens[1])
    assert owner.watchers_count() == 2

    assert owner.ok("panic.update", stream=s, lat=10.001, lon=20.001, heading=90, speed_mps=1.5)["seq"] == 2
    assert owner.ok("panic.status", stream=s, status="amber")["seq"] == 3
    # the same status again: no new event, the current seq
    assert owner.ok("panic.status", stream=s, status="amber")["seq"] == 3
    assert owner.ok("panic.update", stream=s, lat=10.002, lon=20.002)["seq"] == 4
    assert owner.ok("panic.end", stream=s, reason="safe")["seq"] == 5

    for w in (w1, w2):
        ev = w.event()
        assert_location(ev, s, 2, 10.001, 20.001)
        assert ev["heading"] == pytest.approx(90.0), ev
        ev = w.event()
        assert ev["type"] == "panic.status" and ev["seq"] == 3 and ev["status"] == "amber" and ev["stream"] == s, ev
        assert_location(w.event(), s, 4, 10.002, 20.002)
        ev = w.event()
        assert ev["type"] == "panic.ended" and ev["seq"] == 5 and ev["reason"] == "safe" and ev["stream"] == s, ev
        w.quiet()
    # the owner is no watcher: at most watcher counts, never the stream's events
    assert all(e["type"] == "panic.watchers" for e in owner.drain())


def test_wrong_token_and_unknown_stream_are_forbidden(clients):
    owner, other, w = clients(3)
    s = owner.start()["stream"]
    st2 = other.start(lat=1.0, lon=1.0)
    good = st2["watch_tokens"][0]
    expect_error(w, "forbidden", "panic.watch", stream=s, watch_token=rand_id(32))
    expect_error(w, "forbidden", "panic.watch", stream=s, watch_token=good)  # another stream's token
    expect_error(w, "forbidden", "panic.watch", stream=s, watch_token=st2["owner_token"])
    expect_error(w, "forbidden", "panic.watch", stream=rand_id(16), watch_token=good)
    # the owner token of a stream does not steer an unknown stream either
    expect_error(w, "forbidden", "panic.update", stream=rand_id(16), lat=1, lon=1,
                 owner_token=st2["owner_token"])
    owner.ok("panic.update", stream=s, lat=52.5, lon=13.4)
    w.quiet()
    # nothing leaked to the owner: nobody watches
    assert owner.drain() == []


def test_revoked_token(clients):
    owner, w1, w2, late = clients(4)
    st = owner.start(watchers=2)
    s, (t1, t2) = st["stream"], st["watch_tokens"]
    w1.watch(s, t1)
    w2.watch(s, t2)
    assert owner.ok("panic.revoke", stream=s, watch_token=t1)["type"] == "ok"
    ev = w1.event_of("panic.revoked")
    assert ev["stream"] == s, ev

    assert owner.ok("panic.update", stream=s, lat=52.6, lon=13.5)["seq"] == 2
    assert_location(w2.event(), s, 2, 52.6, 13.5)
    w1.quiet()
    expect_error(late, "forbidden", "panic.watch", stream=s, watch_token=t1)
    expect_error(w1, "forbidden", "panic.watch", stream=s, watch_token=t1)
    # the other token still opens the stream
    assert late.watch(s, t2)["state"]["seq"] == 2
    assert owner.ok("panic.status", stream=s, status="amber")["seq"] == 3
    for w in (w2, late):
        ev = w.event()
        assert ev["type"] == "panic.status" and ev["seq"] == 3, ev
        w.quiet()
    w1.quiet()


def test_reconnect_with_since_replays_exactly_the_missed_events(clients):
    owner, w = clients(2)
    st = owner.start(lat=0.0, lon=0.0)
    s, tok = st["stream"], st["watch_tokens"][0]
    w.watch(s, tok)
    assert owner.ok("panic.update", stream=s, lat=0.1, lon=0.1)["seq"] == 2
    assert owner.ok("panic.status", stream=s, status="amber")["seq"] == 3
    assert_location(w.event(), s, 2, 0.1, 0.1)
    assert w.event()["seq"] == 3
    w.close()
    assert owner.ok("panic.update", stream=s, lat=0.4, lon=0.4)["seq"] == 4
    assert owner.ok("panic.update", stream=s, lat=0.5, lon=0.5)["seq"] == 5

    w = clients()
    r = w.watch(s, tok, since=3)
    assert not r.get("gap", False), r
    assert r["state"]["seq"] == 5, r
    assert_location(w.event(), s, 4, 0.4, 0.4)
    assert_location(w.event(), s, 5, 0.5, 0.5)
    w.quiet()
    assert owner.ok("panic.update", stream=s, lat=0.6, lon=0.6)["seq"] == 6
    assert_location(w.event(), s, 6, 0.6, 0.6)
    w.quiet()

    # since = the current seq: nothing to replay, no gap
    w2 = clients()
    r = w2.watch(s, tok, since=6)
    assert not r.get("gap", False), r
    w2.quiet()

    for i in range(7, 11):
        assert owner.ok("panic.update", stream=s, lat=i / 10, lon=i / 10)["seq"] == i
    # the window now holds seqs 6..10 (HISTORY = 5)
    w3 = clients()
    r = w3.watch(s, tok, since=5)
    assert not r.get("gap", False), r
    assert [p["seq"] for p in r["state"]["trail"]] == [6, 7, 8, 9, 10], r
    for i in range(6, 11):
        assert_location(w3.event(), s, i, i / 10, i / 10)
    w3.quiet()

    # one event further back than the window: gap, state is the truth, no replay
    for current, since, status in ((10, 4, "red"), (11, 1, "amber")):
        w4 = clients()
        r = w4.watch(s, tok, since=since)
        assert r.get("gap") is True, r
        assert r["state"]["seq"] == current, r
        assert r["state"]["last"]["lat"] == pytest.approx(1.0), r
        w4.quiet()
        assert owner.ok("panic.status", stream=s, status=status)["seq"] == current + 1
        ev = w4.event()
        assert ev["type"] == "panic.status" and ev["seq"] == current + 1 and ev["status"] == status, ev
        w4.close()


def test_owner_disconnect_and_resume(clients):
    owner, w = clients(2)
    st = owner.start(watchers=1)
    s, otok = st["stream"], st["owner_token"]
    w.watch(s, st["watch_tokens"][0])
    assert owner.watchers_count() == 1
    owner.close()
    w.quiet(0.4)  # no ended, no revoked: the stream stays active

    phone = clients()
    expect_error(phone, "forbidden", "panic.update", stream=s, lat=1, lon=1)  # not the owner yet
    r = phone.ok("panic.resume", stream=s, owner_token=otok)
    assert r["state"]["stream"] == s and r["state"]["seq"] == 1 and "ended" not in r["state"], r
    assert phone.watchers_count() == 1
    assert phone.ok("panic.update", stream=s, lat=2.0, lon=3.0)["seq"] == 2
    assert_location(w.event(), s, 2, 2.0, 3.0)
    assert phone.ok("panic.end", stream=s, reason="cancelled")["seq"] == 3
    ev = w.event()
    assert ev["type"] == "panic.ended" and ev["reason"] == "cancelled" and ev["seq"] == 3, ev

    wrong = clients()
    expect_error(wrong, "forbidden", "panic.resume", stream=rand_id(16), owner_token=otok)


def test_resume_with_wrong_token_is_forbidden(clients):
    owner, other = clients(2)
    st = owner.start()
    expect_error(other, "forbidden", "panic.resume", stream=st["stream"], owner_token=rand_id(32))
    expect_error(other, "forbidden", "panic.resume", stream=st["stream"], owner_token=st["watch_tokens"][0])


def test_other_connection_with_owner_token(clients):
    owner, other, w = clients(3)
    st = owner.start()
    s, otok = st["stream"], st["owner_token"]
    w.watch(s, st["watch_tokens"][0])
    expect_error(other, "forbidden", "panic.update", stream=s, lat=5.0, lon=5.0)
    expect_error(other, "forbidden", "panic.status", stream=s, status="amber")
    expect_error(other, "forbidden", "panic.update", stream=s, lat=5.0, lon=5.0, owner_token=rand_id(32))
    w.quiet()
    assert other.ok("panic.update", stream=s, lat=5.0, lon=6.0, owner_token=otok)["seq"] == 2
    assert_location(w.event(), s, 2, 5.0, 6.0)
    assert other.ok("panic.status", stream=s, status="amber", owner_token=otok)["seq"] == 3
    assert w.event()["seq"] == 3
    # the owner connection still steers without a token
    assert owner.ok("panic.update", stream=s, lat=5.1, lon=6.1)["seq"] == 4
    assert_location(w.event(), s, 4, 5.1, 6.1)
    w.quiet()


def test_ended_stream(clients):
    owner, w, late = clients(3)
    st = owner.start(watchers=2)
    s = st["stream"]
    w.watch(s, st["watch_tokens"][0])
    assert owner.ok("panic.end", stream=s, reason="safe")["seq"] == 2
    ev = w.event()
    assert ev["type"] == "panic.ended" and ev["seq"] == 2 and ev["reason"] == "safe", ev
    assert isinstance(ev["at"], int), ev

    r = late.watch(s, st["watch_tokens"][1])
    ended = r["state"].get("ended")
    assert isinstance(ended, dict) and ended.get("reason") == "safe" and isinstance(ended.get("at"), int), r
    assert r["state"]["seq"] == 2, r
    late.quiet()

    expect_error(owner, "stream_ended", "panic.update", stream=s, lat=1, lon=1)
    expect_error(owner, "stream_ended", "panic.status", stream=s, status="amber")
    expect_error(late, "stream_ended", "panic.update", stream=s, lat=1, lon=1, owner_token=st["owner_token"])
    w.quiet()
    late.quiet()


def test_watcher_counts(clients):
    owner, w1, w2 = clients(3)
    st = owner.start(watchers=2)
    s, (t1, t2) = st["stream"], st["watch_tokens"]
    w1.watch(s, t1)
    assert owner.watchers_count() == 1
    w2.watch(s, t2)
    assert owner.watchers_count() == 2
    assert w1.ok("panic.unwatch", stream=s)["type"] == "ok"
    assert owner.watchers_count() == 1
    assert w1.ok("panic.unwatch", stream=s)["type"] == "ok"  # not watching: still ok
    owner.quiet()
    assert owner.ok("panic.update", stream=s, lat=1.0, lon=1.0)["seq"] == 2
    assert_location(w2.event(), s, 2, 1.0, 1.0)
    w1.quiet()
    w2.close()
    assert owner.watchers_count() == 0
    w1.watch(s, t1)
    assert owner.watchers_count() == 1
    owner.quiet()


def test_validation_errors(clients):
    c, w = clients(2)
    expect_error(c, "invalid_status", "panic.start", status="purple", lat=1, lon=1)
    expect_error(c, "missing_field", "panic.start", status="red", lon=1)
    expect_error(c, "invalid_watchers", "panic.start", status="red", lat=1, lon=1, watchers=0)
    expect_error(c, "invalid_watchers", "panic.start", status="red", lat=1, lon=1, watchers=17)
    expect_error(c, "invalid_lat", "panic.start", status="red", lat=91, lon=1)
    st = c.start(lat=1.0, lon=1.0)
    s = st["stream"]
    expect_error(c, "invalid_status", "panic.status", stream=s, status="green")
    expect_error(c, "invalid_reason", "panic.end", stream=s, reason="bored")
    expect_error(c, "missing_field", "panic.update", stream=s, lon=1)
    expect_error(w, "invalid_since", "panic.watch", stream=s, watch_token=st["watch_tokens"][0], since=-1)
    expect_error(w, "invalid_since", "panic.watch", stream=s, watch_token=st["watch_tokens"][0], since=2)
    # none of it changed the stream
    r = w.watch(s, st["watch_tokens"][0])
    assert r["state"]["seq"] == 1 and r["state"]["status"] == "red" and "ended" not in r["state"], r
    w.quiet()


# ---------------------------------------------------------------------------------------
def test_stale_signal(vigild):
    d = pc.start_daemon(vigild, STALE_CONFIG)
    with PanicClient(d.port) as owner, PanicClient(d.port) as w:
        st = owner.start()
        s = st["stream"]
        w.watch(s, st["watch_tokens"][0])
        for round_ in range(2):
            sent = time.monotonic()
            seq = owner.ok("panic.update", stream=s, lat=3.0 + round_, lon=4.0)["seq"]
            loc = w.event()
            assert_location(loc, s, seq, 3.0 + round_, 4.0)
            stale = w.event(timeout=3.0)
            arrived = time.monotonic() - sent
            assert stale["type"] == "panic.stale" and stale["stream"] == s, stale
            assert "seq" not in stale, stale
            assert stale["last_location_at"] == loc["at"], (stale, loc)
            assert isinstance(stale["at"], int) and stale["at"] - loc["at"] >= 1000, (stale, loc)
            assert 1.0 <= arrived <= 2.5, f"stale after {arrived:.3f}s"
            # once: no second stale while no location arrives
            w.quiet(1.3)
