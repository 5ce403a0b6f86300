"""The safety timer (walk-me-home, docs/PROTOCOL.md "Safety timer") against a real vigild.

A person on an amber stream sets a deadline (`due_at` / `due_in_s`, at `panic.start` or with
`panic.timer`). Ended, moved or cancelled before it, nothing happens; past it, the server itself
turns the stream red with reason `missed_check_in`, tells every watcher at once with the last
position, and keeps the stream open. The timer is journaled: a `kill -9` between setting it and
its deadline still gives exactly one escalation, after the restart.

Timing assertions allow 2 s for the escalation to arrive after its deadline (the daemon's tick
is 50 ms; the rest is a loaded CI machine). "Nothing happens" is checked by `quiet()` past the
deadline: a bounded wait, then a barrier on the same connection.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pinclient as pc
from test_panic import PanicClient
MAX_TIMER_S = 600
LATE_MS = 2000       # an escalation arrives at most this long after its deadline


def config(state_dir: Path | None = None) -> dict:
    cfg = pc.pins_config(
        session={"messages_per_second": 1000, "message_burst": 2000},
        panic={"stale_after_ms": 600000, "ended_grace_ms": 600000, "max_timer_s": MAX_TIMER_S})
    if state_dir is not None:
        cfg["state"] = {"directory": str(state_dir)}
    return cfg


class WalkClient(PanicClient):
    def start_walk(self, **timer) -> dict:
        reply = self.ok("panic.start", status="amber", lat=52.52, lon=13.405, **timer)
        assert reply["seq"] == 1 and isinstance(reply.get("due_at"), int), reply
        return reply


def escalation_of(watcher: WalkClient, stream: str, due_at: int) -> dict:
    """Waits for the escalation of `stream` and checks that it came on time, and was sent (sent_at)
    at or after its time and before it arrived."""
    left = (due_at - pc.now_ms()) / 1000 + LATE_MS / 1000
    ev = watcher.event_of("panic.status", timeout=max(0.1, left))
    arrived = pc.now_ms()
    assert ev["stream"] == stream and ev["status"] == "red" and ev["reason"] == "missed_check_in", ev
    assert ev["due_at"] == due_at, ev
    assert due_at - 50 <= arrived <= due_at + LATE_MS, f"escalated {arrived - due_at} ms after the deadline"
    assert ev["at"] <= ev["sent_at"] <= arrived, ev
    return ev


def test_a_missed_check_in_turns_the_stream_red_for_every_watcher(vigild):
    d = vigild(config())
    with WalkClient(d.port) as owner, WalkClient(d.port) as w1, WalkClient(d.port) as w2:
        due_at = pc.now_ms() + 1500
        started = owner.start_walk(due_at=due_at, watchers=2)
        assert started["due_at"] == due_at
        stream = started["stream"]
        for w, token in zip((w1, w2), started["watch_tokens"]):
            state = w.ok("panic.watch", stream=stream, watch_token=token)["state"]
            assert state["timer"] == {"due_at": due_at} and state["status"] == "amber"
        # A location is not a check-in: it becomes the last known position.
        owner.ok("panic.update", stream=stream, lat=52.53, lon=13.41, accuracy_m=9)
        for w in (w1, w2):
            assert w.event_of("panic.location", 5)["seq"] == 2
        sent = set()
        for w in (w1, w2):
            ev = escalation_of(w, stream, due_at)
            assert ev["seq"] == 3 and ev["at"] == due_at
            assert (ev["last"]["lat"], ev["last"]["lon"], ev["last"]["accuracy_m"]) == (52.53, 13.41, 9.0)
            sent.add(ev["sent_at"])
        assert len(sent) == 1, f"one event, one sent_at: {sent}"
        # The owner's phone (if it still listens) learns it too.
        owner_events = [e for e in owner.drain() if e["type"] == "panic.status"]
        assert [e["reason"] for e in owner_events] == ["missed_check_in"]

        state = w1.ok("panic.watch", stream=stream, watch_token=started["watch_tokens"][0])["state"]
        assert state["status"] == "red" and "timer" not in state and "ended" not in state
        assert state["escalated"] == {"reason": "missed_check_in", "at": due_at, "sent_at": sent.pop()}
        # Exactly once, and the stream stays open; no new timer on a red stream.
        w2.quiet(1.0)
        assert owner.error("panic.timer", stream=stream, due_in_s=60)["code"] == "timer_needs_amber"
        assert owner.ok("panic.end", stream=stream, reason="safe")["seq"] == 4
        assert w2.event_of("panic.ended", 5)["reason"] == "safe"


def test_extending_ending_or_cancelling_in_time_means_nothing_happens(vigild):
    d = vigild(config())
    with WalkClient(d.port) as owner, WalkClient(d.port) as w:
        due_at = pc.now_ms() + 1500
        walks = {}
        for name in ("extended", "ended", "cancelled"):
            started = owner.start_walk(due_at=due_at)
            walks[name] = started["stream"]
            w.ok("panic.watch", stream=started["stream"], watch_token=started["watch_tokens"][0])

        moved = owner.ok("panic.timer", stream=walks["extended"], due_in_s=4)
        assert moved["seq"] == 2 and moved["due_at"] >= due_at + 2000, moved
        owner.ok("panic.end", stream=walks["ended"], reason="safe")
        cancelled = owner.ok("panic.timer", stream=walks["cancelled"], cancel=True)
        assert cancelled == {"type": "ok", "ref": cancelled["ref"], "seq": 2, "due_at": None}

        told = {e["stream"]: e for e in (w.event(5) for _ in range(3))}
        assert told[walks["extended"]]["type"] == "panic.timer" and told[walks["extended"]]["due_at"] == moved["due_at"]
        assert told[walks["ended"]]["type"] == "panic.ended"
        assert told[walks["cancelled"]]["type"] == "panic.timer" and told[walks["cancelled"]]["due_at"] is None

        # Past the first deadline (and well past the tick): nothing for any of them.
        time.sleep(max(0.0, (due_at - pc.now_ms()) / 1000))
        w.quiet(0.6)
        # The moved deadline fires at its own time.
        escalation_of(w, walks["extended"], moved["due_at"])
        w.quiet(0.3)


def test_timers_are_validated(vigild):
    d = vigild(config())
    with WalkClient(d.port) as owner, WalkClient(d.port) as stranger:
        def code(client, op, **fields):
            reply = client.error(op, **fields)
            return reply["code"]

        assert code(owner, "panic.start", status="red", lat=1, lon=1, due_in_s=60) == "timer_needs_amber"
        assert code(owner, "panic.start", status="amber", lat=1, lon=1, due_in_s=0) == "invalid_timer"
        assert code(owner, "panic.start", status="amber", lat=1, lon=1, due_in_s=MAX_TIMER_S + 1) == "invalid_timer"
        assert code(owner, "panic.start", status="amber", lat=1, lon=1, due_in_s="60") == "invalid_timer"
        assert code(owner, "panic.start", status="amber", lat=1, lon=1, due_at=pc.now_ms() - 1000) == "invalid_timer"
        assert code(owner, "panic.start", status="amber", lat=1, lon=1, due_in_s=60, due_at=pc.now_ms() + 60000) == "invalid_timer"
        stream = owner.start_walk(due_in_s=60)["stream"]
        assert code(owner, "panic.timer", stream=stream) == "missing_field"
        assert code(owner, "panic.timer", stream=stream, cancel=False) == "invalid_timer"
        assert code(owner, "panic.timer", stream=stream, due_at=pc.now_ms() + (MAX_TIMER_S + 5) * 1000) == "invalid_timer"
        # A stranger learns nothing from a bad deadline: the same answer as for a good one.
        assert code(stranger, "panic.timer", stream=stream, due_in_s=0 + 1) == "forbidden"
        assert code(stranger, "panic.timer", stream=stream, due_at=1) == "forbidden"


def test_kill_9_before_the_deadline_still_escalates_once_after_restart(vigild, tmp_path):
    state = tmp_path / "state"
    d = vigild(config(state))
    with WalkClient(d.port) as owner:
        now = pc.now_ms()
        # One deadline passes while the daemon is down, one after it is back.
        down = owner.start_walk(due_at=now + 1200)
        up = owner.start_walk(due_at=now + 6000)
        owner.ok("panic.update", stream=up["stream"], lat=52.6, lon=13.5)
    d.proc.send_signal(signal.SIGKILL)
    d.wait(10)
    d.reported = True
    # The downtime itself: the first deadline must pass while nothing runs.
    time.sleep(max(0.0, (down["due_at"] + 300 - pc.now_ms()) / 1000))

    d2 = vigild(config(state))
    with WalkClient(d2.port) as w:
        # Fired at start, at its own deadline, exactly once: the replay from seq 0 shows it.
        reply = w.ok("panic.watch", stream=down["stream"], watch_token=down["watch_tokens"][0], since=0)
        replay = [w.event(5) for _ in range(reply["state"]["seq"])]
        assert [e["seq"] for e in replay] == [1, 2]
        assert replay[1]["reason"] == "missed_check_in" and replay[1]["at"] == down["due_at"]
        assert reply["state"]["escalated"]["at"] == down["due_at"] and reply["state"]["status"] == "red"

        # Set before the crash, fires after the restart, on time, with the last position.
        state_up = w.ok("panic.watch", stream=up["stream"], watch_token=up["watch_tokens"][0])["state"]
        assert state_up["timer"] == {"due_at": up["due_at"]}
        ev = escalation_of(w, up["stream"], up["due_at"])
        assert ev["seq"] == 3 and (ev["last"]["lat"], ev["last"]["lon"]) == (52.6, 13.5)
        w.quiet(0.3)
    assert d2.stop(signal.SIGTERM) == 0   # its final snapshot holds the escalations (the timer fields, since snapshot version 2)

    # Journaled: another restart repeats neither escalation.
    d3 = vigild(config(state))
    with WalkClient(d3.port) as w:
        for walk, seq in ((down, 2), (up, 3)):
            reply = w.ok("panic.watch", stream=walk["stream"], watch_token=walk["watch_tokens"][0], since=0)
            assert reply["state"]["seq"] == seq and "ended" not in reply["state"]
            events = [w.event(5) for _ in range(seq)]
            assert [e.get("reason") for e in events].count("missed_check_in") == 1
        w.quiet(0.3)


def test_an_escalation_fired_after_a_restart_says_how_late_it_went_out(vigild, tmp_path):
    """A deadline that passed while vigild was down fires at the first tick after the restart:
    `at` is still the deadline, `sent_at` the moment it went out, so `sent_at - at` shows the
    lateness. It is stored with the event: a replay, `state`, and later restarts (from the
    journal, then from a snapshot) show the same `sent_at`."""
    state = tmp_path / "state"
    d = vigild(config(state))
    with WalkClient(d.port) as owner:
        walk = owner.start_walk(due_at=pc.now_ms() + 1000)
    d.proc.send_signal(signal.SIGKILL)
    d.wait(10)
    d.reported = True
    # The downtime itself: the deadline passes, and 1.5 s more, while nothing runs.
    time.sleep(max(0.0, (walk["due_at"] + 1500 - pc.now_ms()) / 1000))

    def watched(daemon) -> tuple[dict, dict]:
        """The stream's state and its escalation as replayed from seq 0."""
        with WalkClient(daemon.port) as w:
            reply = w.ok("panic.watch", stream=walk["stream"], watch_token=walk["watch_tokens"][0], since=0)
            replay = [w.event(5) for _ in range(reply["state"]["seq"])]
            w.quiet(0.2)
        assert [e["seq"] for e in replay] == [1, 2], replay
        assert replay[1]["reason"] == "missed_check_in", replay
        return reply["state"], replay[1]

    restarted_at = pc.now_ms()
    d2 = vigild(config(state))
    state2, escalation = watched(d2)
    assert escalation["at"] == walk["due_at"] == escalation["due_at"], escalation
    assert restarted_at <= escalation["sent_at"] <= pc.now_ms(), (restarted_at, escalation)
    assert escalation["sent_at"] - escalation["at"] >= 1500, f"sent {escalation['sent_at'] - escalation['at']} ms late"
    assert state2["escalated"] == {"reason": "missed_check_in", "at": walk["due_at"], "sent_at": escalation["sent_at"]}

    # From the journal (kill -9: no snapshot since), then from the final snapshot: the same.
    d2.proc.send_signal(signal.SIGKILL)
    d2.wait(10)
    d2.reported = True
    d3 = vigild(config(state))
    assert watched(d3) == (state2, escalation)
    assert d3.stop(signal.SIGTERM) == 0
    d4 = vigild(config(state))
    assert watched(d4) == (state2, escalation)
