"""Circles as standing contacts (docs/PROTOCOL.md, "Circles as standing contacts"; issue 24
part 1) end to end: a real vigild on loopback, Python ``websockets`` clients.

The owner of a check-in circle starts a panic stream for the circle (`panic.start` with `circle`
and the circle's `owner_token`); every connection listening to the circle hears `checkin.panic`
at once when the stream starts, is escalated by its safety timer, or ends; a member watches the
stream with its member token (no watch token is handed around); revoking the member cuts that
watch too; a member who joins later finds the stream in the circle's `panics`; the link between
stream and circle survives `kill -9`.

One daemon is shared by most tests (each makes its own circles and streams). Escalation needs a
short timer and restarts a state directory: those get their own daemon. Events are awaited
(``event_of`` with a timeout); "nothing arrives" is ``quiet()``: a bounded wait plus a barrier.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

import pinclient as pc
from pinclient import PinClient
from test_checkin import CHECKIN_EVENTS, CheckinClient
from test_panic import PANIC_EVENTS

LATE_MS = 2000   # a timer's news arrives at most this long after its time (50 ms tick + a loaded CI)


def config(state_dir: Path | None = None) -> dict:
    cfg = pc.pins_config(
        session={"messages_per_second": 1000, "message_burst": 2000},
        pins={"writes_per_minute": 6000, "write_burst": 1000},
        panic={"history_events": 100, "stale_after_ms": 600000, "ended_grace_ms": 600000, "max_streams": 1000},
        checkin={"max_members": 8})
    cfg["limits"].update(circle_create_burst=100000, open_streams_per_address=10000)
    if state_dir is not None:
        cfg["state"] = {"directory": str(state_dir)}
    return cfg


_server_shared, _server = pc.pin_server_fixture("server", config())


class Client(CheckinClient):
    """A CheckinClient that takes the panic events too (and `checkin.panic`)."""

    EVENTS = CHECKIN_EVENTS | PANIC_EVENTS | {"checkin.panic"}
    _check_event = PinClient._check_event    # the envelope's check, with EVENTS

    def next_not(self, skip: tuple[str, ...], timeout: float | None = None) -> dict:
        """The next event not of a type in `skip` (the stream owner's `panic.watchers` counts)."""
        while True:
            ev = self.event(timeout)
            if ev["type"] not in skip:
                return ev

    def circle(self, members=("Mum", "Sam")) -> dict:
        created = self.ok("checkin.create", members=list(members))
        created["tokens"] = [m["member_token"] for m in created["members"]]
        return created

    def start_for(self, created: dict, **extra) -> dict:
        fields = {"status": "red", "lat": 52.52, "lon": 13.405, **extra}
        reply = self.ok("panic.start", circle=created["circle"], owner_token=created["owner_token"], **fields)
        assert reply["circle"] == created["circle"] and reply["seq"] == 1, reply
        assert isinstance(reply["owner_token"], str) and len(reply["watch_tokens"]) >= 1, reply
        return reply


@pytest.fixture
def clients(server):
    yield from pc.client_factory(Client, server.port)


def news(client: Client, circle: str, stream: str, event: str, timeout: float = 5.0,
         skip: tuple[str, ...] = ("panic.watchers",)) -> dict:
    ev = client.next_not(skip, timeout)
    assert ev["type"] == "checkin.panic", f"expected checkin.panic {event}, got {ev!r}\n{client.history()}"
    assert ev["circle"] == circle and ev["stream"] == stream and ev["event"] == event, ev
    assert isinstance(ev["at"], int) and ev["status"] in ("red", "amber"), ev
    return ev


def test_listening_members_hear_the_start_and_watch_with_their_member_tokens(clients):
    owner, mum, sam, phone = clients(4)
    created = owner.circle()
    circle = created["circle"]
    mum_token, sam_token = created["tokens"]
    assert mum.ok("checkin.join", circle=circle, member_token=mum_token)["state"]["panics"] == []
    sam.ok("checkin.join", circle=circle, member_token=sam_token)

    before = pc.now_ms()
    started = phone.start_for(created, note="walking home")
    stream = started["stream"]
    for c in (owner, mum, sam):     # the owner's app listens since checkin.create
        ev = news(c, circle, stream, "started")
        assert ev["status"] == "red" and before <= ev["at"] <= pc.now_ms(), ev
        assert set(ev) == {"type", "circle", "stream", "event", "status", "at"}, ev
    phone.quiet(0.1)                # the phone does not listen to the circle

    # A member watches with its member token, from the start (since 0: the start is replayed).
    state = mum.ok("panic.watch", stream=stream, member_token=mum_token, since=0)["state"]
    assert state["stream"] == stream and state["status"] == "red" and state["seq"] == 1, state
    first = mum.event_of("panic.location")
    assert first["seq"] == 1 and first["lat"] == pytest.approx(52.52)
    assert phone.event_of("panic.watchers")["count"] == 1
    phone.ok("panic.update", stream=stream, lat=52.53, lon=13.41)
    assert mum.event_of("panic.location")["seq"] == 2
    # A second member watches later with `since`: exactly what it missed, then live.
    sam.ok("panic.watch", stream=stream, member_token=sam_token, since=1)
    assert sam.event_of("panic.location")["seq"] == 2
    assert phone.event_of("panic.watchers")["count"] == 2
    phone.ok("panic.update", stream=stream, lat=52.54, lon=13.42)
    for c in (mum, sam):
        assert c.event_of("panic.location")["seq"] == 3
    # A location is the watchers' news, not the circle's: nothing for the owner's listening app.
    owner.quiet(0.2)
    # A watch token still works alongside.
    contact = clients()
    contact.ok("panic.watch", stream=stream, watch_token=started["watch_tokens"][0])
    assert phone.event_of("panic.watchers")["count"] == 3


def test_strangers_wrong_tokens_and_malformed_requests_are_refused(clients):
    owner, other, stranger = clients(3)
    created = owner.circle()
    foreign = other.circle()
    circle = created["circle"]
    fields = {"status": "red", "lat": 1, "lon": 2}
    # A start: wrong owner token (a member's, another circle's owner's), unknown or malformed circle.
    for token, c in ((created["tokens"][0], circle), (foreign["owner_token"], circle),
                     (created["owner_token"], foreign["circle"]), (created["owner_token"], "AAAAAAAAAAAAAAAAAAAAAA"),
                     (created["owner_token"], "not-an-id")):
        assert stranger.code("panic.start", circle=c, owner_token=token, **fields) == "forbidden"
    started = owner.start_for(created)
    stream = started["stream"]
    news(owner, circle, stream, "started")
    # A watch: another circle's member, the owner token, a watch token as a member token, a made-up one.
    for token in (foreign["tokens"][0], created["owner_token"], started["watch_tokens"][0], "x" * 43):
        assert stranger.code("panic.watch", stream=stream, member_token=token) == "forbidden"
    # A member token opens no stream of another circle, nor one of no circle.
    loose = other.ok("panic.start", **fields)
    assert stranger.code("panic.watch", stream=loose["stream"], member_token=created["tokens"][0]) == "forbidden"
    other_stream = other.start_for(foreign)["stream"]
    assert stranger.code("panic.watch", stream=other_stream, member_token=created["tokens"][0]) == "forbidden"
    # Pairs that must come together, or not together: named by field.
    for extra, code, field in (({"circle": circle}, "missing_field", "owner_token"),
                               ({"owner_token": created["owner_token"]}, "missing_field", "circle"),
                               ({"circle": 5, "owner_token": created["owner_token"]}, "invalid_circle", "circle")):
        reply = stranger.error("panic.start", **fields, **extra)
        assert (reply["code"], reply.get("field")) == (code, field), reply
    both = stranger.error("panic.watch", stream=stream, watch_token=started["watch_tokens"][0], member_token=created["tokens"][0])
    assert (both["code"], both.get("field")) == ("invalid_token", "member_token"), both
    neither = stranger.error("panic.watch", stream=stream)
    assert (neither["code"], neither.get("field")) == ("missing_field", "watch_token"), neither
    assert stranger.code("panic.watch", stream=stream, member_token=created["tokens"][0], circle=circle) == "unknown_field"
    # None of it started a stream for the circle: the owner heard only its own.
    owner.quiet(0.2)
    assert [p["stream"] for p in owner.ok("checkin.open", circle=circle, owner_token=created["owner_token"])["state"]["panics"]] == [stream]


def test_revoking_a_member_cuts_its_watch_and_its_token_opens_nothing_again(clients):
    owner, mum, sam, phone = clients(4)
    created = owner.circle()
    circle, owner_token = created["circle"], created["owner_token"]
    mum_token, sam_token = created["tokens"]
    mum.ok("checkin.join", circle=circle, member_token=mum_token)
    stream = phone.start_for(created)["stream"]
    news(mum, circle, stream, "started")
    news(owner, circle, stream, "started")
    mum.ok("panic.watch", stream=stream, member_token=mum_token)
    sam.ok("panic.watch", stream=stream, member_token=sam_token)   # watching without listening
    assert [phone.event_of("panic.watchers")["count"] for _ in range(2)] == [1, 2]

    owner.ok("checkin.revoke", circle=circle, owner_token=owner_token, member=1)
    told = {mum.event(5)["type"], mum.event(5)["type"]}
    assert told == {"checkin.revoked", "panic.revoked"}, mum.history()
    assert phone.event_of("panic.watchers")["count"] == 1
    phone.ok("panic.update", stream=stream, lat=52.6, lon=13.5)
    assert sam.event_of("panic.location")["seq"] == 2
    mum.quiet(0.2)                 # cut off: no location
    assert mum.code("panic.watch", stream=stream, member_token=mum_token) == "forbidden"
    assert mum.code("checkin.join", circle=circle, member_token=mum_token) == "forbidden"
    # Revoking again changes nothing and tells nobody.
    owner.ok("checkin.revoke", circle=circle, owner_token=owner_token, member=1)
    sam.quiet(0.2)


def test_closing_the_circle_leaves_its_streams_and_their_member_watchers(clients):
    owner, mum, phone = clients(3)
    created = owner.circle()
    circle = created["circle"]
    stream = phone.start_for(created)["stream"]
    news(owner, circle, stream, "started")
    mum.ok("panic.watch", stream=stream, member_token=created["tokens"][0])
    owner.ok("checkin.close", circle=circle, owner_token=created["owner_token"])
    assert owner.event_of("checkin.closed")["reason"] == "closed"
    phone.ok("panic.update", stream=stream, lat=52.6, lon=13.5)
    assert mum.event_of("panic.location")["seq"] == 2
    # No members any more: a new member watch is refused, the stream goes on.
    assert clients().code("panic.watch", stream=stream, member_token=created["tokens"][1]) == "forbidden"
    assert phone.ok("panic.end", stream=stream, reason="safe")["seq"] == 3
    assert mum.event_of("panic.ended")["reason"] == "safe"


def test_the_safety_timer_escalates_to_the_circle_and_the_end_is_told(vigild):
    d = vigild(config())
    with Client(d.port) as owner, Client(d.port) as mum, Client(d.port) as sam:
        created = owner.circle()
        circle = created["circle"]
        mum_token, sam_token = created["tokens"]
        mum.ok("checkin.join", circle=circle, member_token=mum_token)
        sam.ok("checkin.join", circle=circle, member_token=sam_token)
        due_at = pc.now_ms() + 1500
        started = owner.start_for(created, status="amber", due_at=due_at)
        stream = started["stream"]
        assert started["due_at"] == due_at
        for c in (owner, mum, sam):
            assert news(c, circle, stream, "started")["status"] == "amber"
        mum.ok("panic.watch", stream=stream, member_token=mum_token)

        # The deadline passes: the watching member gets the escalation as any watcher does, and
        # every connection listening to the circle gets the circle's news of it, at once.
        left = (due_at - pc.now_ms() + LATE_MS) / 1000
        escalation = mum.event_of("panic.status", timeout=max(0.1, left))
        assert escalation["reason"] == "missed_check_in" and escalation["status"] == "red" and escalation["at"] == due_at
        ev = news(mum, circle, stream, "escalated")
        assert ev["status"] == "red" and ev["at"] == due_at, ev
        arrived = pc.now_ms()
        assert arrived <= due_at + LATE_MS, f"told {arrived - due_at} ms after the deadline"
        for c in (owner, sam):
            # The owner's connection (which also owns the stream) hears the escalation itself first.
            ev = news(c, circle, stream, "escalated", skip=("panic.watchers", "panic.status"))
            assert ev["at"] == due_at and ev["status"] == "red", ev
        state = sam.ok("checkin.join", circle=circle, member_token=sam_token)["state"]
        assert state["panics"] == [{"stream": stream, "status": "red", "started_at": state["panics"][0]["started_at"],
                                    "escalated_at": due_at}], state

        # The end: told with its reason, and the stream is no longer listed.
        ended = owner.ok("panic.end", stream=stream, reason="safe")
        assert mum.event_of("panic.ended")["seq"] == ended["seq"]
        for c in (owner, mum, sam):
            ev = news(c, circle, stream, "ended")
            assert ev["reason"] == "safe" and ev["status"] == "red", ev
        assert sam.ok("checkin.join", circle=circle, member_token=sam_token)["state"]["panics"] == []
        for c in (owner, mum, sam):
            c.quiet(0.2)


def test_a_member_who_joins_later_finds_the_stream_in_the_circles_state(clients):
    owner, phone, late = clients(3)
    created = owner.circle(members=("Mum", "Sam", "Alex"))
    circle = created["circle"]
    before = pc.now_ms()
    first = phone.start_for(created, status="amber")["stream"]
    second = phone.start_for(created)["stream"]
    ended = phone.start_for(created)["stream"]
    phone.ok("panic.end", stream=ended, reason="cancelled")
    for stream in (first, second, ended):
        news(owner, circle, stream, "started")
    assert news(owner, circle, ended, "ended")["reason"] == "cancelled"
    state = late.ok("checkin.join", circle=circle, member_token=created["tokens"][2])["state"]
    panics = state["panics"]
    # Active only, oldest first (two starts in the same millisecond are in id order).
    assert sorted(p["stream"] for p in panics) == sorted([first, second]), panics
    assert [p["started_at"] for p in panics] == sorted(p["started_at"] for p in panics)
    assert {p["stream"]: p["status"] for p in panics} == {first: "amber", second: "red"}
    assert all(before <= p["started_at"] <= pc.now_ms() and "escalated_at" not in p for p in panics), panics
    # It watches what it found, with its member token.
    late.ok("panic.watch", stream=first, member_token=created["tokens"][2], since=0)
    assert late.event_of("panic.location")["seq"] == 1
    # The owner sees the same list when it opens the circle.
    opened = owner.ok("checkin.open", circle=circle, owner_token=created["owner_token"])["state"]
    assert opened["panics"] == panics


def test_kill_9_keeps_the_streams_circle(vigild, vigild_binary, tmp_path):
    state_dir = tmp_path / "state"
    d = vigild(config(state_dir))
    with Client(d.port) as owner, Client(d.port) as phone:
        created = owner.circle()
        circle = created["circle"]
        mum_token, sam_token = created["tokens"]
        timed = phone.start_for(created, status="amber", due_in_s=3600)
        stream, owner_stream_token = timed["stream"], timed["owner_token"]
        loose = phone.ok("panic.start", status="red", lat=1, lon=2)["stream"]
        owner.ok("checkin.revoke", circle=circle, owner_token=created["owner_token"], member=2)
    d.proc.send_signal(signal.SIGKILL)
    d.wait(10)
    d.reported = True

    # From the journal (record kind 11): the member still watches with its token, the revoked one does not.
    d2 = vigild(config(state_dir))
    with Client(d2.port) as mum, Client(d2.port) as phone, Client(d2.port) as sam:
        state = mum.ok("checkin.join", circle=circle, member_token=mum_token)["state"]
        assert [p["stream"] for p in state["panics"]] == [stream], state
        watched = mum.ok("panic.watch", stream=stream, member_token=mum_token, since=0)["state"]
        assert watched["timer"]["due_at"] == timed["due_at"]
        assert mum.event_of("panic.location")["seq"] == 1
        assert sam.code("panic.watch", stream=stream, member_token=sam_token) == "forbidden"
        assert sam.code("panic.watch", stream=loose, member_token=mum_token) == "forbidden"
        phone.ok("panic.resume", stream=stream, owner_token=owner_stream_token)
        phone.ok("panic.end", stream=stream, reason="safe")
        assert mum.event_of("panic.ended")["reason"] == "safe"
        assert news(mum, circle, stream, "ended")["reason"] == "safe"
    assert d2.stop(signal.SIGTERM) == 0      # its final snapshot (version 7 and later) holds the circle

    d3 = vigild(config(state_dir))
    with Client(d3.port) as mum:
        # Ended, in its grace: readable by the member, no longer listed as a panic.
        assert mum.ok("checkin.join", circle=circle, member_token=mum_token)["state"]["panics"] == []
        state = mum.ok("panic.watch", stream=stream, member_token=mum_token)["state"]
        assert state["ended"]["reason"] == "safe"
    d3.stop(signal.SIGTERM)

    # `vigild state inspect` shows the stream's circle (an id, as every id), never a token.
    out = subprocess.run([str(vigild_binary), "state", "inspect", str(state_dir)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    for secret in (mum_token, sam_token, created["owner_token"], owner_stream_token):
        assert secret not in out.stdout
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    streams = [line for line in lines if line["type"] == "stream" and line["id"] in (stream, loose)]
    assert {line["id"]: line.get("circle") for line in streams} == {stream: circle, loose: None}, streams
