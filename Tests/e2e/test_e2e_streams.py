"""End-to-end encrypted panic streams (issue 26; docs/PROTOCOL.md, "End-to-end encrypted
streams") against a real vigild: the client seals with ``e2e_vectors.seal`` (AES-256-GCM, the
format's associated data) exactly as an app would, the daemon only stores and forwards opaque
bytes.

What is checked: sealed updates reach the watchers byte for byte (and open with the stream's key
for the seq and status they carry); the seq/status rule (``seq_mismatch`` with ``current_seq``
and ``status``); the kinds do not mix (``sealed_required``, ``not_e2e``); bad sealed values;
``since`` replays the sealed trail; the escalation says ``position_known`` false and carries the
last sealed point; stale and deletion after the grace as for clear streams; a circle member's
watch gets its own box only; a rekey tells each watcher its own new box.

And the byte scan (``e2e_scan``): the plaintext coordinates and note are nowhere in the state
directory, the daemon's log, the admin endpoints, or any frame sent to a connection that does not
watch the stream: during the stream, after a clean restart and after ``kill -9`` (restored
streams still replay the sealed values). ``vigild state inspect`` shows sizes only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

import e2e_scan
import e2e_vectors as ev
import pinclient as pc
from pinclient import PinClient
from test_circle_panic import config as circle_config
from test_panic import PANIC_EVENTS, PanicClient
from wsraw import http_get

E2E_EVENTS = PANIC_EVENTS | {"panic.rekeyed", "checkin.panic", "checkin.state", "checkin.request", "checkin.answer",
                             "checkin.home", "checkin.members"}

# Coordinates and a note no other test or daemon output would hold, as text and as numbers.
POINTS = [
    {"lat": 51.5007193, "lon": -0.1246377, "accuracy_m": 12, "note": "by the bridge, e2e-note-7f3a"},
    {"lat": 51.5011847, "lon": -0.1252961, "accuracy_m": 8.5, "heading": 270, "speed_mps": 1.4},
    {"lat": 51.5019311, "lon": -0.1261583, "note": "second note e2e-9c1d"},
]
COORDS = [p[k] for p in POINTS for k in ("lat", "lon")]
NOTES = [p["note"] for p in POINTS if "note" in p]
WANTED = e2e_scan.needles(COORDS, NOTES)


def config(state_dir: Path | None = None, **panic) -> dict:
    """test_circle_panic's daemon (circles of 8), with `panic` settings changed."""
    cfg = circle_config(state_dir)
    cfg["panic"].update(panic)
    return cfg


_server_shared, _server = pc.pin_server_fixture("server", config())


class Client(PanicClient):
    """A PanicClient that also takes the rekey notice and the circle's news."""

    EVENTS = E2E_EVENTS
    _check_event = PinClient._check_event    # the envelope's check, with EVENTS

    def next_not(self, skip: tuple[str, ...] = ("panic.watchers",), timeout: float | None = None) -> dict:
        while True:
            e = self.event(timeout)
            if e["type"] not in skip:
                return e

    def frames(self) -> bytes:
        """Every frame this connection received, as the raw bytes of their text."""
        return b"\n".join((p if isinstance(p, bytes) else p.encode()) for d, p in self.log if d == "recv")


class Sealer:
    """The owner's device: one stream key and its id, and the seq and status it seals for."""

    def __init__(self) -> None:
        self.key = os.urandom(32)
        self.kid = ev.b64u(os.urandom(16))

    def seal(self, seq: int, status: str, point: dict) -> str:
        return ev.seal(self.key, self.kid, seq, status, point)

    def opens(self, seq: int, status: str, sealed: str, kid: str | None = None) -> dict:
        return ev.open_sealed(self.key, kid or self.kid, seq, status, sealed)


def start_e2e(owner: Client, sealer: Sealer, status: str = "red", point: dict = POINTS[0], **extra) -> dict:
    e2e = {"v": 1, "kid": sealer.kid, "sealed": sealer.seal(1, status, point), **extra.pop("e2e_extra", {})}
    reply = owner.ok("panic.start", status=status, e2e=e2e, **extra)
    assert reply["seq"] == 1 and reply["owner_token"] and reply["watch_tokens"], reply
    reply["sealed"] = e2e["sealed"]
    return reply


def update(owner: Client, sealer: Sealer, stream: str, seq: int, status: str, point: dict) -> str:
    sealed = sealer.seal(seq, status, point)
    assert owner.ok("panic.update", stream=stream, sealed=sealed, kid=sealer.kid, seq=seq, status=status)["seq"] == seq
    return sealed


def assert_sealed_event(e: dict, stream: str, seq: int, sealed: str, sealer: Sealer, status: str, point: dict) -> None:
    assert e["type"] == "panic.location" and e["stream"] == stream and e["seq"] == seq, e
    assert e["sealed"] == sealed and e["kid"] == sealer.kid and e["status"] == status, e
    assert not {"lat", "lon", "accuracy_m", "note"} & e.keys(), e
    opened = sealer.opens(seq, status, e["sealed"])
    assert opened["lat"] == point["lat"] and opened["lon"] == point["lon"], opened


@pytest.fixture
def clients(server):
    yield from pc.client_factory(Client, server.port)


# ---------------------------------------------------------------------------------------
def test_sealed_updates_reach_watchers_byte_for_byte_and_the_seq_rule_holds(clients):
    owner, w1, w2, stranger = clients(4)
    sealer = Sealer()
    st = start_e2e(owner, sealer, watchers=2)
    s = st["stream"]
    state = w1.watch(s, st["watch_tokens"][0])["state"]
    assert state["e2e"] is True and state["kid"] == sealer.kid and state["seq"] == 1, state
    assert state["trail"] == [{"seq": 1, "sealed": st["sealed"], "kid": sealer.kid, "status": "red", "at": state["started_at"]}]
    assert state["last"]["sealed"] == st["sealed"] and state["last"]["seq"] == 1 and state["position_known"] is False, state
    assert not {"lat", "lon", "note"} & state.keys() and "lat" not in state["last"], state
    w2.watch(s, st["watch_tokens"][1])

    sealed2 = update(owner, sealer, s, 2, "red", POINTS[1])
    for w in (w1, w2):
        assert_sealed_event(w.next_not(), s, 2, sealed2, sealer, "red", POINTS[1])

    # Sealed for another seq or status: refused with what to seal for, and nothing is sent.
    for seq, status in ((2, "red"), (4, "red"), (3, "amber")):
        r = owner.error("panic.update", stream=s, sealed=sealer.seal(seq, status, POINTS[2]), kid=sealer.kid, seq=seq, status=status)
        assert (r["code"], r["current_seq"], r["status"]) == ("seq_mismatch", 2, "red"), r
    # A status change takes a seq: the client seals for it.
    assert owner.ok("panic.status", stream=s, status="amber")["seq"] == 3
    r = owner.error("panic.update", stream=s, sealed=sealer.seal(4, "red", POINTS[2]), kid=sealer.kid, seq=4, status="red")
    assert (r["code"], r["current_seq"], r["status"]) == ("seq_mismatch", 3, "amber"), r
    sealed4 = update(owner, sealer, s, 4, "amber", POINTS[2])
    assert w1.next_not()["type"] == "panic.status"
    assert_sealed_event(w1.next_not(), s, 4, sealed4, sealer, "amber", POINTS[2])

    # A stranger learns nothing: the same forbidden whatever the seq, never the current one.
    for seq in (1, 5, 99):
        r = stranger.error("panic.update", stream=s, owner_token="x" * 43, sealed=sealer.seal(seq, "red", POINTS[2]),
                           kid=sealer.kid, seq=seq, status="red")
        assert r["code"] == "forbidden" and "current_seq" not in r, r


def test_the_kinds_do_not_mix_and_bad_sealed_values_are_refused(clients):
    owner = clients()
    sealer = Sealer()
    s = start_e2e(owner, sealer)["stream"]
    clear = owner.start(lat=1.0, lon=2.0)["stream"]
    assert owner.error("panic.update", stream=s, lat=1.0, lon=2.0)["code"] == "sealed_required"
    assert owner.error("panic.update", stream=clear, sealed=sealer.seal(2, "red", POINTS[1]), kid=sealer.kid, seq=2,
                       status="red")["code"] == "not_e2e"
    assert owner.error("panic.rekey", stream=clear, kid=sealer.kid)["code"] == "not_e2e"
    good = sealer.seal(2, "red", POINTS[1])
    cases = [
        (dict(sealed="not base64!", kid=sealer.kid, seq=2, status="red"), "invalid_sealed", "sealed"),
        (dict(sealed=ev.b64u(b"\0" * 27), kid=sealer.kid, seq=2, status="red"), "invalid_sealed", "sealed"),
        (dict(sealed=ev.b64u(os.urandom(1025)), kid=sealer.kid, seq=2, status="red"), "sealed_too_large", "sealed"),
        (dict(sealed=good, kid="short", seq=2, status="red"), "invalid_kid", "kid"),
        (dict(sealed=good, kid=sealer.kid, seq=0, status="red"), "invalid_seq", "seq"),
        (dict(sealed=good, kid=sealer.kid, seq=2, status="red", lat=1.0), "invalid_e2e", "lat"),
        (dict(sealed=good, kid=sealer.kid, seq=2, status="red", note="x"), "unknown_field", "note"),  # no update has a note
    ]
    for fields, code, field in cases:
        r = owner.error("panic.update", stream=s, **fields)
        assert (r["code"], r.get("field")) == (code, field), (fields, r)
        assert good not in json.dumps(r) and sealer.kid not in json.dumps(r), "an error never echoes a sealed value or kid"
    r = owner.error("panic.start", status="red", lat=1.0, lon=2.0, e2e={"v": 1, "kid": sealer.kid, "sealed": good})
    assert r["code"] == "invalid_e2e", r
    assert owner.error("panic.start", status="red", e2e={"v": 2, "kid": sealer.kid, "sealed": good})["code"] == "unsupported_e2e_version"
    assert owner.error("panic.start", status="red", e2e={"v": 1, "kid": sealer.kid, "sealed": good,
                                                         "boxes": [{"member": 1, "box": good}]})["code"] == "invalid_boxes"
    # A write that is safe to retry: the same idem gets the same answer, applied once.
    sealed = sealer.seal(2, "red", POINTS[1])
    first = owner.ok("panic.update", stream=s, sealed=sealed, kid=sealer.kid, seq=2, status="red", idem="e2e-idem-0123456789")
    again = owner.ok("panic.update", stream=s, sealed=sealed, kid=sealer.kid, seq=2, status="red", idem="e2e-idem-0123456789")
    assert first["seq"] == 2 and again["seq"] == 2 and again.get("repeat") is True, (first, again)


def test_since_replays_the_sealed_trail_and_the_escalation_says_the_position_is_unknown(clients):
    owner, watcher, late = clients(3)
    sealer = Sealer()
    st = start_e2e(owner, sealer, status="amber", due_in_s=60)
    s = st["stream"]
    sealed = {1: st["sealed"], 2: update(owner, sealer, s, 2, "amber", POINTS[1])}
    replayed = late.watch(s, st["watch_tokens"][0], since=0)
    assert replayed["state"]["seq"] == 2
    events = [late.next_not() for _ in range(2)]
    for e in events:
        assert_sealed_event(e, s, e["seq"], sealed[e["seq"]], sealer, "amber", POINTS[e["seq"] - 1])
    assert [e["seq"] for e in events] == [1, 2]
    # The timer set at the start: moved to now + 1 s, then left to pass.
    watcher.watch(s, st["watch_tokens"][0])
    assert owner.ok("panic.timer", stream=s, due_at=pc.now_ms() + 1000)["seq"] == 3
    assert watcher.next_not()["type"] == "panic.timer"
    esc = watcher.next_not(timeout=5.0)
    assert esc["type"] == "panic.status" and esc["reason"] == "missed_check_in" and esc["seq"] == 4, esc
    assert esc["position_known"] is False and "lat" not in esc["last"], esc
    assert esc["last"] == {"sealed": sealed[2], "kid": sealer.kid, "status": "amber", "seq": 2, "at": esc["last"]["at"]}, esc
    assert sealer.opens(2, "amber", esc["last"]["sealed"])["lat"] == POINTS[1]["lat"]
    # The owner seals the next update for the escalation's seq and the red it set.
    r = owner.error("panic.update", stream=s, sealed=sealer.seal(5, "amber", POINTS[2]), kid=sealer.kid, seq=5, status="amber")
    assert (r["code"], r["current_seq"], r["status"]) == ("seq_mismatch", 4, "red"), r
    update(owner, sealer, s, 5, "red", POINTS[2])


def test_stale_and_deletion_after_the_grace_as_for_clear_streams(vigild):
    d = vigild(config(stale_after_ms=1000, ended_grace_ms=1000))
    with Client(d.port) as owner, Client(d.port) as watcher:
        sealer = Sealer()
        st = start_e2e(owner, sealer)
        s = st["stream"]
        watcher.watch(s, st["watch_tokens"][0])
        stale = watcher.next_not(timeout=5.0)
        assert stale["type"] == "panic.stale" and stale["stream"] == s, stale
        sealed = update(owner, sealer, s, 2, "red", POINTS[1])
        assert_sealed_event(watcher.next_not(), s, 2, sealed, sealer, "red", POINTS[1])
        assert owner.ok("panic.end", stream=s, reason="safe")["seq"] == 3
        assert watcher.next_not()["type"] == "panic.ended"
        # Gone after the grace: the watch token opens nothing (the tick removes it within a second).
        with Client(d.port) as again:
            for _ in range(60):
                r = again.request("panic.watch", stream=s, watch_token=st["watch_tokens"][0])
                if r["type"] == "error":
                    break
                again.quiet(0.1)
            assert r["type"] == "error" and r["code"] == "forbidden", r


def test_a_members_watch_gets_its_own_box_and_a_rekey_tells_each_its_new_one(clients):
    owner, mum, sam, direct, listener = clients(5)
    created = owner.ok("checkin.create", members=["Mum", "Sam"])
    tokens = {m["member"]: m["member_token"] for m in created["members"]}
    secrets = {n: os.urandom(32) for n in tokens}
    sealer = Sealer()
    boxes = [{"member": n, "box": ev.box(secrets[n], sealer.kid, n, sealer.key)} for n in sorted(tokens)]
    listener.ok("checkin.join", circle=created["circle"], member_token=tokens[2])   # hears the circle's news, does not watch
    st = start_e2e(owner, sealer, circle=created["circle"], owner_token=created["owner_token"], e2e_extra={"boxes": boxes})
    s = st["stream"]
    for client, n in ((mum, 1), (sam, 2)):
        reply = client.ok("panic.watch", stream=s, member_token=tokens[n])
        assert reply["box"] == boxes[n - 1]["box"], reply
        other = boxes[2 - n]["box"]
        assert other not in json.dumps(reply), "a member's watch shows no other member's box"
        assert ev.open_box(secrets[n], sealer.kid, n, reply["box"]) == sealer.key
    plain = direct.watch(s, st["watch_tokens"][0])
    assert "box" not in plain and "boxes" not in json.dumps(plain), plain

    # Sam revoked: a new key, and a box for Mum only.
    new = Sealer()
    mum_box = ev.box(secrets[1], new.kid, 1, new.key)
    assert owner.ok("panic.rekey", stream=s, kid=new.kid, boxes=[{"member": 1, "box": mum_box}], idem="e2e-rekey-0123456789")["seq"] == 1
    assert mum.next_not() == {"type": "panic.rekeyed", "stream": s, "kid": new.kid, "box": mum_box}
    assert sam.next_not() == {"type": "panic.rekeyed", "stream": s, "kid": new.kid}
    assert direct.next_not() == {"type": "panic.rekeyed", "stream": s, "kid": new.kid}
    again = sam.ok("panic.watch", stream=s, member_token=tokens[2])
    assert "box" not in again and again["state"]["kid"] == new.kid, again
    assert ev.open_box(secrets[1], new.kid, 1, mum.ok("panic.watch", stream=s, member_token=tokens[1])["box"]) == new.key
    # Updates under the new key; only the owner may rekey.
    sealed = new.seal(2, "red", POINTS[1])
    assert owner.ok("panic.update", stream=s, sealed=sealed, kid=new.kid, seq=2, status="red")["seq"] == 2
    assert new.opens(2, "red", direct.next_not()["sealed"])["lon"] == POINTS[1]["lon"]
    assert direct.error("panic.rekey", stream=s, kid=new.kid)["code"] == "forbidden"
    # The circle's listener heard of the start, and nothing of where.
    listener.drain()
    news = listener.frames()
    assert b"checkin.panic" in news and not e2e_scan.scan_bytes(news, "listener", WANTED)
    for b in (box["box"] for box in boxes):
        assert b.encode() not in news


# ---------------------------------------------------------------------------------------
# The byte scan
def scan_everything(d, state: Path, bystanders: list[Client], when: str) -> list[str]:
    hits = e2e_scan.scan_tree(state, WANTED)
    hits += e2e_scan.scan_bytes(d.stderr_text().encode(), f"daemon log {when}", WANTED)
    for path in ("/metrics", "/stats", "/healthz", "/state/digest"):
        hits += e2e_scan.scan_bytes(http_get(d.admin_port, path).body, f"admin {path} {when}", WANTED)
    for i, b in enumerate(bystanders):
        hits += e2e_scan.scan_bytes(b.frames(), f"bystander {i} {when}", WANTED)
    return hits


def inspect_shows_sizes_only(vigild_binary: Path, state: Path, sealed: list[str], kid: str) -> None:
    for args in ([], ["--show-content"]):
        out = subprocess.run([str(vigild_binary), "state", "inspect", *args, str(state)], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert not e2e_scan.scan_bytes(out.stdout.encode(), "state inspect", WANTED)
        for value in sealed + [kid]:
            assert value not in out.stdout, f"state inspect {args} shows a sealed value or the kid"
        assert '"sealed_bytes"' in out.stdout and '"e2e":{"boxes":' in out.stdout, out.stdout[:2000]


def test_the_plaintext_is_nowhere_during_the_stream_after_a_restart_and_after_kill_9(vigild, vigild_binary, tmp_path):
    state = tmp_path / "state"
    d = vigild(config(state))
    sealer = Sealer()
    bystanders = []
    with Client(d.port) as owner, Client(d.port) as watcher:
        # A bystander on the map, a stranger poking the stream, a clear stream's watcher.
        map_sub, stranger = Client(d.port), Client(d.port)
        bystanders += [map_sub, stranger]
        map_sub.subscribe_bbox(51.0, -1.0, 52.0, 1.0)
        st = start_e2e(owner, sealer, watchers=1)
        s, token = st["stream"], st["watch_tokens"][0]
        watcher.watch(s, token)
        sealed = [st["sealed"], update(owner, sealer, s, 2, "red", POINTS[1]), update(owner, sealer, s, 3, "red", POINTS[2])]
        assert stranger.error("panic.watch", stream=s, watch_token="w" * 43)["code"] == "forbidden"
        stranger.error("panic.update", stream=s, sealed=sealed[2], kid=sealer.kid, seq=4, status="red")
        map_sub.barrier()
        # The watcher got them all (the scan's control: the needles would be found in what it opens).
        got = [watcher.next_not()["sealed"] for _ in range(2)]
        assert got == sealed[1:]
        opened = json.dumps([sealer.opens(i + 1, "red", v) for i, v in enumerate(sealed)]).encode()
        assert e2e_scan.scan_bytes(opened, "opened", WANTED), "the scan finds the plaintext where it is"
        hits = scan_everything(d, state, bystanders, "during the stream")
        assert not hits, hits

    # A clean restart: the stream comes back from the state directory and replays sealed values.
    assert d.stop(signal.SIGTERM) == 0
    inspect_shows_sizes_only(vigild_binary, state, sealed, sealer.kid)
    assert not e2e_scan.scan_tree(state, WANTED)
    d2 = vigild(config(state))
    with Client(d2.port) as w:
        w.watch(s, token, since=0)
        assert [w.next_not()["sealed"] for _ in range(3)] == sealed
    with Client(d2.port) as owner:
        owner.ok("panic.resume", stream=s, owner_token=st["owner_token"])
        sealed.append(update(owner, sealer, s, 4, "red", POINTS[0]))
        hits = scan_everything(d2, state, [], "after a restart")
        assert not hits, hits
        # kill -9 with the stream active: the journal alone brings it back.
        d2.proc.send_signal(signal.SIGKILL)
        d2.wait(10)
        d2.reported = True
    assert not e2e_scan.scan_tree(state, WANTED)
    d3 = vigild(config(state))
    with Client(d3.port) as w:
        reply = w.watch(s, token, since=0)
        assert reply["state"]["e2e"] is True and reply["state"]["seq"] == 4
        events = [w.next_not() for _ in range(4)]
        assert [e["sealed"] for e in events] == sealed
        for e in events:
            sealer.opens(e["seq"], e["status"], e["sealed"])
    hits = scan_everything(d3, state, [], "after kill -9")
    assert not hits, hits
    for b in bystanders:
        b.close()


# ---------------------------------------------------------------------------------------
# A cluster: the records travel through JetStream as opaque bytes too.
from test_cluster import cluster, nats, wait_until  # noqa: E402,F401 (fixtures)


def test_a_cluster_carries_sealed_updates_and_the_rekey_and_its_log_holds_no_plaintext(cluster, tmp_path):
    a, b = cluster(2)
    sealer = Sealer()
    with Client(a.port) as owner, Client(b.port) as watcher:
        st = start_e2e(owner, sealer, watchers=1)
        s, token = st["stream"], st["watch_tokens"][0]
        reply = wait_until("the stream reached node b",
                           lambda: (r := watcher.request("panic.watch", stream=s, watch_token=token))["type"] == "ok" and r)
        assert reply["state"]["e2e"] is True and reply["state"]["trail"][0]["sealed"] == st["sealed"], reply
        sealed = update(owner, sealer, s, 2, "red", POINTS[1])
        assert_sealed_event(watcher.next_not(timeout=10), s, 2, sealed, sealer, "red", POINTS[1])
        new = Sealer()
        owner.ok("panic.rekey", stream=s, kid=new.kid)
        assert watcher.next_not(timeout=10) == {"type": "panic.rekeyed", "stream": s, "kid": new.kid}
        r = owner.error("panic.update", stream=s, sealed=new.seal(4, "red", POINTS[2]), kid=new.kid, seq=4, status="red")
        assert (r["code"], r["current_seq"]) == ("seq_mismatch", 2), r
        sealed3 = new.seal(3, "red", POINTS[2])
        assert owner.ok("panic.update", stream=s, sealed=sealed3, kid=new.kid, seq=3, status="red")["seq"] == 3
        assert watcher.next_not(timeout=10)["sealed"] == sealed3
    hits = e2e_scan.scan_tree(tmp_path / "nats", WANTED)
    for d in (a, b):
        hits += e2e_scan.scan_bytes(d.stderr_text().encode(), f"log of node {d.port}", WANTED)
    assert not hits, hits
