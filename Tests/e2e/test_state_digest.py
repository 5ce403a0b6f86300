"""The state digest end to end (docs/OPERATIONS.md, "State digest"): the admin listener's
``/state/digest`` and ``vigild state inspect``'s last line.

Two vigild processes restored from copies of one state directory (pins with votes, an edit and a
reach, a panic stream with updates and an invitation, a check-in circle, all made over the
WebSocket protocol) report the same digest, the one the first reported before the copy and the one
``state inspect --at`` computes from the files, and a daemon killed with SIGKILL (no final
snapshot) restarts with the digest it had. A vote on one of them changes its digest; the same
vote on the other (the same voter number: both restored the same state) brings them together again.
Snapshots of a standalone node record no cluster sequence.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pinclient as pc
from pinclient import PinClient

FRESH_TIMEOUT_S = 10.0   # the kept digest is replaced after 1 s (or 10 times its cost: ms here)


def config(state_dir: Path) -> dict:
    cfg = pc.pins_config(pins={"writes_per_minute": 6000, "write_burst": 1000})
    cfg["limits"]["circle_create_burst"] = 1000
    cfg["state"] = {"directory": str(state_dir)}
    return cfg


def digest(d) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{d.admin_port}/state/digest", timeout=10) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"] == "application/json"
        return json.loads(resp.read())


def fresh_digest(d, after_ms: int) -> dict:
    """The digest taken after ``after_ms`` (unix ms): asked until the kept one is replaced (bounded)."""
    deadline = time.monotonic() + FRESH_TIMEOUT_S
    while True:
        reply = digest(d)
        if reply["at"] > after_ms:
            return reply
        assert time.monotonic() < deadline, f"no digest newer than {after_ms} within {FRESH_TIMEOUT_S} s: {reply}"
        time.sleep(0.1)   # the cache's own interval: nothing to wait on but the clock


def build_state(port: int) -> str:
    """Pins, a stream and a circle over the protocol; returns a pin's id to vote on later."""
    with PinClient(port) as c:
        voted, _ = c.create(52.52, 13.405, "fox", category="sighting")
        edited, token = c.create(48.85, 2.35, "road closed", category="hazard")
        c.create(40.0, -3.7, "radar", range_m=1500)
        c.ok("pin.vote", id=voted["id"], value=1)
        c.ok("pin.update", id=edited["id"], edit_token=token, changes={"title": "road open again"})
        start = c.ok("panic.start", status="amber", lat=1.25, lon=1.0, note="walking", watchers=1)
        c.ok("panic.update", stream=start["stream"], lat=1.26, lon=1.01)
        c.ok("panic.invite", stream=start["stream"], owner_token=start["owner_token"])
        c.ok("checkin.create", members=["Mum", None])
        target, _ = c.create(51.5, -0.12, "vote on me")
        return target["id"]


def inspect_state_line(binary: Path, state: Path, at: int) -> dict:
    out = subprocess.run([str(binary), "state", "inspect", "--files-only", "--at", str(at), str(state)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert all(line["cluster_sequence"] is None for line in lines if line["type"] == "snapshot"), "a standalone node's snapshots"
    assert lines[-1]["type"] == "state", lines[-1]
    return lines[-1]


def test_two_daemons_restored_from_one_state_agree_and_a_change_tells_them_apart(vigild, vigild_binary, tmp_path):
    first_dir, second_dir, still_dir = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    a = vigild(config(first_dir))
    target = build_state(a.port)
    before = digest(a)
    assert (before["pins"], before["streams"], before["circles"]) == (4, 1, 1), before
    assert len(before["digest"]) == 64 and before["age_ms"] >= 0 and before["compute_ms"] >= 0
    assert before["cluster_sequence"] is None, "a standalone node"
    assert a.stop(signal.SIGTERM) == 0           # the final snapshot holds everything
    shutil.copytree(first_dir, second_dir)
    shutil.copytree(first_dir, still_dir)
    (second_dir / "lock").unlink(missing_ok=True)

    # The files say the same as the daemon did (at the time it said it: nothing expires in between).
    line = inspect_state_line(vigild_binary, still_dir, before["at"])
    assert line["digest"] == before["digest"] and (line["pins"], line["streams"], line["circles"]) == (4, 1, 1), line
    assert line["cluster_sequence"] is None and line["snapshot"].startswith("snapshot-")

    a = vigild(config(first_dir))
    b = vigild(config(second_dir))
    da, db = digest(a), digest(b)
    assert da["digest"] == db["digest"] == before["digest"], (before, da, db)

    # One vote on b: its digest changes, a's does not.
    changed_at = pc.now_ms()
    with PinClient(b.port) as c:
        c.ok("pin.vote", id=target, value=1)
    db = fresh_digest(b, changed_at)
    da = fresh_digest(a, changed_at)
    assert db["digest"] != da["digest"] and da["digest"] == before["digest"]
    assert (db["pins"], db["streams"], db["circles"]) == (4, 1, 1), "same counts: only the vote differs"
    # The same vote on a: the same state again, so the same digest.
    changed_at = pc.now_ms()
    with PinClient(a.port) as c:
        c.ok("pin.vote", id=target, value=1)
    assert fresh_digest(a, changed_at)["digest"] == fresh_digest(b, changed_at)["digest"]


def test_a_restart_after_kill_9_restores_the_digest_from_snapshot_and_journal(vigild, tmp_path):
    """No final snapshot: the start-up snapshot plus the journal replayed must give the digest the
    live daemon had."""
    state = tmp_path / "s"
    d = vigild(config(state))
    build_state(d.port)
    live = digest(d)
    d.proc.send_signal(signal.SIGKILL)
    d.wait(10)
    d.reported = True
    again = vigild(config(state))
    restored = digest(again)
    assert restored["digest"] == live["digest"] and restored["at"] > live["at"], (live, restored)
    replayed = re.search(r"replayed (\d+) journal records", again.stderr_text())
    assert replayed and int(replayed.group(1)) >= 10, "the journal, not a final snapshot, held the changes"


def test_the_digest_is_on_the_admin_listener_only_get_and_head(vigild, tmp_path):
    d = vigild(config(tmp_path / "s"))
    empty = digest(d)
    assert (empty["pins"], empty["streams"], empty["circles"]) == (0, 0, 0)
    public = urllib.request.Request(f"http://127.0.0.1:{d.port}/state/digest")
    try:
        urllib.request.urlopen(public, timeout=10)
        raise AssertionError("the public listener answered /state/digest")
    except urllib.error.HTTPError as e:
        assert e.code == 404
    head = urllib.request.Request(f"http://127.0.0.1:{d.admin_port}/state/digest", method="HEAD")
    with urllib.request.urlopen(head, timeout=10) as resp:
        assert resp.status == 200 and resp.read() == b"" and int(resp.headers["Content-Length"]) > 64
    delete = urllib.request.Request(f"http://127.0.0.1:{d.admin_port}/state/digest", method="DELETE")
    try:
        urllib.request.urlopen(delete, timeout=10)
        raise AssertionError("DELETE was answered")
    except urllib.error.HTTPError as e:
        assert e.code == 405
