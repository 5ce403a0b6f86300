"""Check-in circles (docs/PROTOCOL.md, "Check-in circles") end to end: a real vigild on
loopback, Python ``websockets`` clients (``pinclient.PinClient``).

An owner creates a circle and shares member tokens; a member asks (`checkin.request`, a newer
request replaces the member's older one); the owner hears it live, or reads it in the state
when it opens the circle again; the owner answers "safe", and every member listening sees who
asked and the answer. "Home safe" lapses at its time. Circles survive `kill -9`, and on a full disk their changes are refused unseen.

One daemon is shared by most tests (each test makes its own circles, so they never see each
other's news). Idle removal, capacity and the per-address budget need their own daemon.
"No event arrives" is checked by ``quiet()``: a bounded wait plus a barrier request.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

import pinclient as pc
from pinclient import PinClient, ProtocolViolation
from test_disk_full import RECOVERY_TIMEOUT_S, assert_unavailable, fill, small_fs  # noqa: F401  (small_fs: a fixture)

CHECKIN_EVENTS = {"checkin.requested", "checkin.answered", "checkin.home", "checkin.revoked", "checkin.closed"}
REQUESTS_PER_MINUTE = 3
MAX_MEMBERS = 4
LATE_MS = 2000   # a timer's news arrives at most this long after its time (50 ms tick + a loaded CI)


def config(state_dir: Path | None = None, **checkin) -> dict:
    cfg = pc.pins_config(
        session={"messages_per_second": 1000, "message_burst": 2000},
        pins={"writes_per_minute": 6000, "write_burst": 1000},
        checkin={"max_members": MAX_MEMBERS, "requests_per_minute": REQUESTS_PER_MINUTE, "max_home_s": 600, **checkin})
    cfg["limits"]["circle_create_burst"] = 100000
    if state_dir is not None:
        cfg["state"] = {"directory": str(state_dir)}
    return cfg


_server_shared, _server = pc.pin_server_fixture("server", config())


class CheckinClient(PinClient):
    """A PinClient whose events are the check-in ones."""

    @staticmethod
    def _check_event(msg: dict) -> None:
        if "ref" in msg:
            raise ProtocolViolation(f"an event carries a ref: {msg!r}")
        if msg["type"] not in CHECKIN_EVENTS:
            raise ProtocolViolation(f"unexpected message type: {msg!r}")

    def create(self, members=None) -> dict:
        fields = {} if members is None else {"members": members}
        reply = self.ok("checkin.create", **fields)
        assert isinstance(reply["circle"], str) and len(reply["circle"]) == 22, reply
        assert isinstance(reply["owner_token"], str) and len(reply["owner_token"]) == 43, reply
        return reply

    def event_of(self, etype: str, timeout: float | None = None) -> dict:
        ev = self.event(timeout)
        assert ev["type"] == etype, f"expected {etype}, got {ev!r}\n{self.history()}"
        return ev

    def code(self, op: str, **fields) -> str:
        return self.error(op, **fields)["code"]


@pytest.fixture
def clients(server):
    opened: list[CheckinClient] = []

    def make(n: int = 1):
        new = [CheckinClient(server.port) for _ in range(n)]
        opened.extend(new)
        return new[0] if n == 1 else new

    yield make
    for c in opened:
        c.close()


def tokens(created: dict) -> list[str]:
    return [m["member_token"] for m in created["members"]]


def test_a_request_reaches_the_owner_and_every_member_and_the_answer_reaches_all(clients):
    owner, mum, sam = clients(3)
    created = owner.create(members=["Mum", "  Sam  "])
    circle = created["circle"]
    assert [(m["member"], m["label"]) for m in created["members"]] == [(1, "Mum"), (2, "Sam")]
    assert created["expires_at"] > pc.now_ms()
    mum_token, sam_token = tokens(created)
    state = mum.ok("checkin.join", circle=circle, member_token=mum_token)["state"]
    assert state["role"] == "member" and state["you"] == {"member": 1, "label": "Mum"}
    assert state["requests"] == [] and "answer" not in state and "members" not in state, state
    sam.ok("checkin.join", circle=circle, member_token=sam_token)

    before = pc.now_ms()
    asked = mum.ok("checkin.request", circle=circle, member_token=mum_token)
    assert before <= asked["at"] <= pc.now_ms()
    for c in (owner, mum, sam):
        ev = c.event_of("checkin.requested")
        assert ev == {"type": "checkin.requested", "circle": circle, "member": 1, "label": "Mum", "at": asked["at"]}, ev

    answered = owner.ok("checkin.answer", circle=circle, owner_token=created["owner_token"], note="home in 10")["answer"]
    assert answered["status"] == "safe" and answered["note"] == "home in 10"
    assert answered["answered"] == [{"member": 1, "label": "Mum", "at": asked["at"]}]
    for c in (owner, mum, sam):
        ev = c.event_of("checkin.answered")
        assert ev["circle"] == circle and ev["answer"] == answered, ev
    # Answered requests are no longer pending; the answer stays in the state.
    state = sam.ok("checkin.join", circle=circle, member_token=sam_token)["state"]
    assert state["requests"] == [] and state["answer"] == answered
    for c in (owner, mum, sam):
        c.quiet(0.1)


def test_a_request_made_while_the_owner_was_away_is_there_when_it_opens_and_a_newer_one_replaces_it(clients):
    first_owner, mum, sam = clients(3)
    created = first_owner.create(members=["Mum", None])
    circle, owner_token = created["circle"], created["owner_token"]
    mum_token, sam_token = tokens(created)
    assert "label" not in created["members"][1]
    first_owner.close()

    first = mum.ok("checkin.request", circle=circle, member_token=mum_token)["at"]
    unlabelled = sam.ok("checkin.request", circle=circle, member_token=sam_token)["at"]
    again = mum.ok("checkin.request", circle=circle, member_token=mum_token)["at"]
    assert first <= unlabelled <= again

    owner = clients()
    state = owner.ok("checkin.open", circle=circle, owner_token=owner_token)["state"]
    assert state["role"] == "owner"
    assert [(m["member"], m.get("label")) for m in state["members"]] == [(1, "Mum"), (2, None)]
    # One pending request per member, oldest first: Mum's newer request replaced her first one.
    assert state["requests"] == [{"member": 2, "at": unlabelled}, {"member": 1, "label": "Mum", "at": again}]

    # From now on live.
    mum.ok("checkin.request", circle=circle, member_token=mum_token)
    ev = owner.event_of("checkin.requested")
    assert ev["member"] == 1 and ev["label"] == "Mum"
    # A member connection that did not join hears nothing.
    sam.quiet(0.1)
    owner.ok("checkin.leave", circle=circle)
    sam.ok("checkin.request", circle=circle, member_token=sam_token)
    owner.quiet(0.1)


def test_home_safe_is_told_to_everyone_and_lapses_at_its_time(clients):
    owner, mum = clients(2)
    created = owner.create(members=["Mum"])
    circle, owner_token = created["circle"], created["owner_token"]
    mum.ok("checkin.join", circle=circle, member_token=tokens(created)[0])

    home = owner.ok("checkin.home", circle=circle, owner_token=owner_token, for_s=1)["home"]
    assert home["until"] - home["at"] == 1000
    for c in (owner, mum):
        ev = c.event_of("checkin.home")
        assert ev == {"type": "checkin.home", "circle": circle, "state": "set", "until": home["until"], "at": home["at"]}
    assert mum.ok("checkin.join", circle=circle, member_token=tokens(created)[0])["state"]["home"] == home

    # Lapses by itself, told to both, on time.
    for c in (owner, mum):
        ev = c.event_of("checkin.home", timeout=(home["until"] - pc.now_ms() + LATE_MS) / 1000)
        assert ev["state"] == "lapsed" and ev["until"] == home["until"], ev
        assert home["until"] <= ev["at"] <= home["until"] + LATE_MS, ev
    assert "home" not in owner.ok("checkin.open", circle=circle, owner_token=owner_token)["state"]

    # Set with `until`, then cleared: told, and nothing lapses later.
    until = pc.now_ms() + 1500
    assert owner.ok("checkin.home", circle=circle, owner_token=owner_token, until=until)["home"]["until"] == until
    assert mum.event_of("checkin.home")["state"] == "set"
    assert owner.ok("checkin.home", circle=circle, owner_token=owner_token, clear=True)["home"] is None
    assert owner.event_of("checkin.home")["state"] == "set"
    assert owner.event_of("checkin.home")["state"] == "cleared"
    assert mum.event_of("checkin.home")["state"] == "cleared"
    mum.quiet((until - pc.now_ms()) / 1000 + 0.5)
    # Clearing when none is set changes nothing and tells nobody.
    assert owner.ok("checkin.home", circle=circle, owner_token=owner_token, clear=True)["home"] is None
    mum.quiet(0.1)

    for bad in ({"for_s": 0}, {"for_s": 601}, {"until": pc.now_ms() - 1}, {"until": pc.now_ms() + 700_000},
                {}, {"for_s": 5, "clear": True}, {"clear": False}):
        assert owner.code("checkin.home", circle=circle, owner_token=owner_token, **bad) == "invalid_home", bad
    # A stranger learns nothing from a bad time: the answer for a good one.
    assert owner.code("checkin.home", circle=circle, owner_token="x" * 43, until=1) == "forbidden"


def test_a_revoked_member_is_cut_off_and_its_request_goes(clients):
    owner, mum, sam, sam2 = clients(4)
    created = owner.create(members=["Mum", "Sam"])
    circle, owner_token = created["circle"], created["owner_token"]
    mum_token, sam_token = tokens(created)
    mum.ok("checkin.join", circle=circle, member_token=mum_token)
    sam.ok("checkin.join", circle=circle, member_token=sam_token)
    sam2.ok("checkin.join", circle=circle, member_token=sam_token)
    sam.ok("checkin.request", circle=circle, member_token=sam_token)
    for c in (owner, mum, sam, sam2):
        c.event_of("checkin.requested")

    owner.ok("checkin.revoke", circle=circle, owner_token=owner_token, member=2)
    for c in (sam, sam2):
        assert c.event_of("checkin.revoked") == {"type": "checkin.revoked", "circle": circle, "member": 2}
    state = owner.ok("checkin.open", circle=circle, owner_token=owner_token)["state"]
    assert [m["member"] for m in state["members"]] == [1] and state["requests"] == []
    for op in ("checkin.join", "checkin.request"):
        assert sam.code(op, circle=circle, member_token=sam_token) == "forbidden"
    # Revoking again, or a member that never was, changes nothing.
    owner.ok("checkin.revoke", circle=circle, owner_token=owner_token, member=2)
    owner.ok("checkin.revoke", circle=circle, owner_token=owner_token, member=99)
    # A new member gets a new number: numbers are never reused.
    invited = owner.ok("checkin.invite", circle=circle, owner_token=owner_token, label="Alex")
    assert invited["member"] == 3 and invited["label"] == "Alex" and len(invited["member_token"]) == 43
    assert sam.ok("checkin.join", circle=circle, member_token=invited["member_token"])["state"]["you"] == {"member": 3, "label": "Alex"}
    # The revoked connections heard nothing more; Mum and the owner heard nothing of the revocation.
    sam2.quiet(0.1)
    mum.quiet(0.1)


def test_limits_and_errors(clients):
    owner, member, stranger = clients(3)
    created = owner.create(members=["a", "b"])
    circle, owner_token = created["circle"], created["owner_token"]
    token = tokens(created)[0]

    # Members per circle.
    assert owner.code("checkin.create", members=["x"] * (MAX_MEMBERS + 1)) == "invalid_members"
    owner.ok("checkin.invite", circle=circle, owner_token=owner_token)
    owner.ok("checkin.invite", circle=circle, owner_token=owner_token, label=None)
    assert owner.code("checkin.invite", circle=circle, owner_token=owner_token) == "too_many_members"

    # Requests per minute per member, with the exact wait.
    for _ in range(REQUESTS_PER_MINUTE):
        member.ok("checkin.request", circle=circle, member_token=token)
    refused = member.error("checkin.request", circle=circle, member_token=token)
    assert refused["code"] == "rate_limited" and 0 < refused["retry_after_ms"] <= 60_000 // REQUESTS_PER_MINUTE, refused
    # Another member has its own budget.
    member.ok("checkin.request", circle=circle, member_token=tokens(created)[1])

    # Tokens, ids: one answer for wrong and unknown.
    for op, fields in (("checkin.open", {"owner_token": token}), ("checkin.answer", {"owner_token": "y" * 43}),
                       ("checkin.join", {"member_token": owner_token}), ("checkin.request", {"member_token": "z" * 43}),
                       ("checkin.invite", {"owner_token": "q"}), ("checkin.close", {"owner_token": token}),
                       ("checkin.revoke", {"owner_token": token, "member": 1})):
        assert stranger.code(op, circle=circle, **fields) == "forbidden", op
        assert stranger.code(op, circle="A" * 22, **fields) == "forbidden", op
        assert stranger.code(op, circle="not an id", **fields) == "forbidden", op

    # Validation, each naming its field.
    def field_error(op, code, field, **fields):
        reply = owner.error(op, **fields)
        assert (reply["code"], reply.get("field")) == (code, field), reply

    field_error("checkin.open", "missing_field", "circle", owner_token=owner_token)
    field_error("checkin.open", "missing_field", "owner_token", circle=circle)
    field_error("checkin.open", "invalid_circle", "circle", circle=5, owner_token=owner_token)
    field_error("checkin.join", "invalid_token", "member_token", circle=circle, member_token=7)
    field_error("checkin.create", "invalid_label", "members", members=[""])
    field_error("checkin.create", "invalid_label", "members", members=["x" * 41])
    field_error("checkin.create", "invalid_members", "members", members="Mum")
    field_error("checkin.invite", "invalid_label", "label", circle=circle, owner_token=owner_token, label="é" * 41)
    field_error("checkin.revoke", "invalid_member", "member", circle=circle, owner_token=owner_token, member=0)
    field_error("checkin.revoke", "missing_field", "member", circle=circle, owner_token=owner_token)
    field_error("checkin.answer", "invalid_status", "status", circle=circle, owner_token=owner_token, status="danger")
    field_error("checkin.answer", "invalid_note", "note", circle=circle, owner_token=owner_token, note="n" * 281)
    field_error("checkin.answer", "invalid_note", "note", circle=circle, owner_token=owner_token, note=3)
    assert owner.code("checkin.nothing", circle=circle) == "unknown_op"
    # An empty note is no note.
    assert "note" not in owner.ok("checkin.answer", circle=circle, owner_token=owner_token, note="   ")["answer"]

    # Closing: everyone listening is told, then the circle is gone.
    member.ok("checkin.join", circle=circle, member_token=token)
    owner.request(pc.BARRIER_OP)  # every earlier news of the circle is in before this reply
    owner.events.clear()
    owner.ok("checkin.close", circle=circle, owner_token=owner_token)
    for c in (owner, member):
        ev = c.event_of("checkin.closed")
        assert ev["circle"] == circle and ev["reason"] == "closed", ev
    assert member.code("checkin.join", circle=circle, member_token=token) == "forbidden"
    assert owner.code("checkin.open", circle=circle, owner_token=owner_token) == "forbidden"


def test_a_member_an_operation_does_not_define_is_refused_by_name_and_changes_nothing(clients):
    """The envelope's rule (docs/PROTOCOL.md, "Envelope"): a `note` on a check-in request (which
    takes none) was answered ok and dropped; now it is `unknown_field` naming it, the ref echoed,
    and the request is not made. The same rule for every op, here for a few more."""
    owner, mum = clients(2)
    created = owner.create(members=["Mum"])
    circle, owner_token = created["circle"], created["owner_token"]
    (mum_token,) = tokens(created)
    mum.ok("checkin.join", circle=circle, member_token=mum_token)

    reply = mum.request("checkin.request", ref="r1", circle=circle, member_token=mum_token, note="call me")
    assert reply == {"type": "error", "ref": "r1", "code": "unknown_field", "field": "note",
                     "message": "note is not a field of this operation"}, reply
    owner.quiet(0.2)
    mum.quiet(0.1)
    assert owner.ok("checkin.open", circle=circle, owner_token=owner_token)["state"]["requests"] == []

    # A misspelt field is named as such, before the missing one it replaced.
    e = mum.error("checkin.request", circle=circle, membertoken=mum_token)
    assert (e["code"], e["field"]) == ("unknown_field", "membertoken"), e
    # Other operations, other families: a pin field at the top level, a stray on a read.
    for op, fields, stray in [
        ("pin.create", {"pin": {"lat": 1, "lon": 1, "title": "x"}, "ttl_s": 60}, "ttl_s"),
        ("subscribe", {"area": {"bbox": [0, 0, 2, 2]}, "zoom": 3}, "zoom"),
        ("unsubscribe", {"area": {"bbox": [0, 0, 2, 2]}}, "area"),
        ("panic.start", {"status": "red", "lat": 1, "lon": 1, "colour": "red"}, "colour"),
        ("checkin.answer", {"circle": circle, "owner_token": owner_token, "mood": "fine"}, "mood"),
    ]:
        e = owner.error(op, **fields)
        assert (e["code"], e["field"]) == ("unknown_field", stray), (op, e)
    # Nothing of that was done: no pin in the area (the refused subscribe left none either),
    # no answer in the circle.
    assert owner.ok("subscribe", area={"bbox": [0, 0, 2, 2]})["pins"] == []
    assert "answer" not in owner.ok("checkin.open", circle=circle, owner_token=owner_token)["state"]

    # Without the stray member, the same request is made and heard.
    asked = mum.ok("checkin.request", circle=circle, member_token=mum_token)
    assert owner.event_of("checkin.requested")["at"] == asked["at"]


def test_an_idle_circle_is_removed_and_those_listening_are_told(vigild):
    d = vigild(config(idle_lifetime_s=2, max_home_s=1))
    with CheckinClient(d.port) as owner, CheckinClient(d.port) as mum:
        created = owner.create(members=["Mum"])
        circle, token = created["circle"], tokens(created)[0]
        mum.ok("checkin.join", circle=circle, member_token=token)
        # A request keeps it alive: the idle time counts from it.
        asked = mum.ok("checkin.request", circle=circle, member_token=token)["at"]
        owner.event_of("checkin.requested")
        mum.event_of("checkin.requested")
        for c in (owner, mum):
            ev = c.event_of("checkin.closed", timeout=(asked + 2000 - pc.now_ms() + LATE_MS) / 1000)
            assert ev["reason"] == "idle" and asked + 2000 <= ev["at"] <= asked + 2000 + LATE_MS, ev
        assert mum.code("checkin.join", circle=circle, member_token=token) == "forbidden"


def test_circle_capacity_and_the_per_address_budget(vigild):
    cfg = config(max_circles=2)
    cfg["limits"]["circle_create_burst"] = 3
    d = vigild(cfg)
    with CheckinClient(d.port) as c:
        first = c.create()
        c.create()
        assert c.code("checkin.create") == "capacity_exceeded"
        refused = c.error("checkin.create")
        assert refused["code"] == "rate_limited" and refused["retry_after_ms"] > 0, refused
        # Closing one frees its place (the address budget is a rate: it still waits).
        c.ok("checkin.close", circle=first["circle"], owner_token=first["owner_token"])
        assert c.code("checkin.create") == "rate_limited"


def test_kill_9_between_request_and_answer_keeps_the_circle_and_its_request(vigild, vigild_binary, tmp_path):
    state = tmp_path / "state"
    d = vigild(config(state))
    with CheckinClient(d.port) as owner, CheckinClient(d.port) as mum:
        created = owner.create(members=["Mum", "Sam"])
        circle, owner_token = created["circle"], created["owner_token"]
        mum_token, sam_token = tokens(created)
        invited = owner.ok("checkin.invite", circle=circle, owner_token=owner_token, label="Alex")
        owner.ok("checkin.revoke", circle=circle, owner_token=owner_token, member=2)
        home = owner.ok("checkin.home", circle=circle, owner_token=owner_token, for_s=600)["home"]
        owner.close()
        asked = mum.ok("checkin.request", circle=circle, member_token=mum_token)["at"]
    d.proc.send_signal(signal.SIGKILL)
    d.wait(10)
    d.reported = True

    d2 = vigild(config(state))
    with CheckinClient(d2.port) as owner, CheckinClient(d2.port) as mum, CheckinClient(d2.port) as alex:
        st = owner.ok("checkin.open", circle=circle, owner_token=owner_token)["state"]
        assert [(m["member"], m["label"]) for m in st["members"]] == [(1, "Mum"), (3, "Alex")]
        assert st["requests"] == [{"member": 1, "label": "Mum", "at": asked}] and st["home"] == home
        assert mum.code("checkin.join", circle=circle, member_token=sam_token) == "forbidden"  # still revoked
        mum.ok("checkin.join", circle=circle, member_token=mum_token)
        alex.ok("checkin.join", circle=circle, member_token=invited["member_token"])
        answer = owner.ok("checkin.answer", circle=circle, owner_token=owner_token)["answer"]
        assert answer["answered"] == [{"member": 1, "label": "Mum", "at": asked}]
        for c in (mum, alex):
            assert c.event_of("checkin.answered")["answer"] == answer
    assert d2.stop(signal.SIGTERM) == 0  # its final snapshot holds the circle (snapshot version 4)

    d3 = vigild(config(state))
    with CheckinClient(d3.port) as mum:
        st = mum.ok("checkin.join", circle=circle, member_token=mum_token)["state"]
        assert st["requests"] == [] and st["answer"] == answer and st["home"] == home

    # `vigild state inspect` shows the circle without its labels (unless asked) and never a token.
    def inspect(*extra) -> list[dict]:
        out = subprocess.run([str(vigild_binary), "state", "inspect", str(state), *extra], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert owner_token not in out.stdout and mum_token not in out.stdout
        return [json.loads(line) for line in out.stdout.splitlines()]
    lines = inspect()
    circles = [line for line in lines if line["type"] == "circle" and line["id"] == circle]
    assert circles and [m["member"] for m in circles[-1]["members"]] == [1, 3], circles
    assert "Mum" not in json.dumps(lines) and "Alex" not in json.dumps(lines)
    assert "Mum" in json.dumps(inspect("--show-content"))


def test_on_a_full_disk_circle_changes_are_refused_unseen_and_joins_go_on(vigild, small_fs):
    """The disk-full rule (docs/DURABILITY.md, "When the disk fails") for circles: while the journal
    cannot be written, every circle change is answered `unavailable` and nobody hears of it."""
    state = small_fs / "state"
    d = vigild(config(state))
    with CheckinClient(d.port) as owner, CheckinClient(d.port) as mum, PinClient(d.port) as writer:
        created = owner.create(members=["Mum"])
        circle, owner_token, token = created["circle"], created["owner_token"], tokens(created)[0]
        mum.ok("checkin.join", circle=circle, member_token=token)
        filler = fill(small_fs)
        # Pins fill the journal's last page until the first write is refused: the outage.
        for i in range(2000):
            if writer.request("pin.create", pin={"lat": 52.3, "lon": 13.3, "title": f"full {i}"})["type"] == "error":
                break
        for op, fields in (("checkin.request", {"member_token": token}), ("checkin.answer", {"owner_token": owner_token}),
                           ("checkin.home", {"owner_token": owner_token, "for_s": 60}),
                           ("checkin.invite", {"owner_token": owner_token}), ("checkin.close", {"owner_token": owner_token})):
            assert_unavailable(mum.request(op, circle=circle, **fields))
        assert_unavailable(owner.request("checkin.create"))
        # Reads go on, and show nothing refused.
        state_now = mum.ok("checkin.join", circle=circle, member_token=token)["state"]
        assert state_now["requests"] == [] and "answer" not in state_now and "home" not in state_now
        owner.quiet(0.1)

        filler.unlink()
        d.wait_for_log(r"state writable again", RECOVERY_TIMEOUT_S)
        asked = mum.ok("checkin.request", circle=circle, member_token=token)["at"]
        assert owner.event_of("checkin.requested")["at"] == asked
    assert d.stop() == 0, d.log_tail()
    d2 = vigild(config(state))
    with CheckinClient(d2.port) as owner:
        st = owner.ok("checkin.open", circle=circle, owner_token=owner_token)["state"]
        assert st["requests"] == [{"member": 1, "label": "Mum", "at": asked}] and "answer" not in st and "home" not in st
        assert [m["member"] for m in st["members"]] == [1]
