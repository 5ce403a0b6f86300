"""Durable state end to end: snapshots, the journal, restore, and ``vigild state inspect``.

The crash test drives pipelined writes (pin create/update/vote/delete, panic start/update/
status/end) from a client that records every acknowledged write, kills vigild with SIGKILL while
requests are in flight, restarts it on the same directory and checks that every acknowledged
write is there: pins by id with their acknowledged fields, deleted pins gone, panic streams with
every acknowledged seq exactly once. Graceful restarts must give back identical client-visible
state. Damaged files must be cut off or skipped with a log line, and an unusable directory must
stop start-up with a clear error.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

import pinclient as pc
from pinclient import PinClient

WORLD = (-90, -180, 90, 180)
LIMITS = {"session": {"messages_per_second": 100000, "message_burst": 100000},
          "pins": {"writes_per_minute": 1000000, "write_burst": 100000}}


def config(state_dir: Path, **state) -> dict:
    cfg = pc.pins_config(**LIMITS)
    cfg["state"] = {"directory": str(state_dir), **state}
    return cfg


def world_pins(port: int) -> dict[str, dict]:
    with PinClient(port) as c:
        return {p["id"]: p for p in c.subscribe_bbox(*WORLD)}


def watch_state(port: int, stream: str, token: str, since: int | None = None) -> tuple[dict, list[dict]]:
    """The watch reply's state and the replayed events (collected up to a barrier)."""
    with PinClient(port) as c:
        fields = {"stream": stream, "watch_token": token}
        if since is not None:
            fields["since"] = since
        reply = c.ok("panic.watch", **fields)
        events = []
        barrier = c.send_request("unsubscribe")
        while True:
            m = c.recv_json()
            if m.get("type") == "ok" and m.get("ref") == barrier:
                break
            events.append(m)
        return reply, events


class Recorder:
    """Pipelined writes in a thread; every acknowledged write is recorded, in order."""

    def __init__(self, port: int):
        self.port = port
        self.pins: dict[str, dict] = {}        # id -> acknowledged public pin (None when deleted)
        self.deleted: set[str] = set()
        self.tokens: dict[str, str] = {}
        self.stream: dict | None = None        # id, watch token, acked seqs -> location
        self.acked_seqs: dict[int, tuple[float, float] | str] = {}
        self.acks = 0
        self.error: BaseException | None = None
        self.enough = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _ack(self):
        self.acks += 1
        if self.acks >= 300:
            self.enough.set()

    def _run(self):
        try:
            with PinClient(self.port, timeout=10) as c:
                start = c.ok("panic.start", status="red", lat=52.5, lon=13.4, accuracy_m=5, watchers=2)
                self.stream = {"id": start["stream"], "token": start["watch_tokens"][0]}
                self.acked_seqs[1] = (52.5, 13.4)
                self._ack()
                i = 0
                while True:  # until the daemon dies under us
                    batch = []
                    for k in range(10):
                        i += 1
                        lat, lon = 52.0 + (i % 1000) / 1000, 13.0 + (i % 700) / 1000
                        batch.append(("create", (lat, lon, f"pin {i}"), c.send_request("pin.create", pin={"lat": lat, "lon": lon, "title": f"pin {i}"})))
                    ids = [p for p in self.pins if p not in self.deleted]
                    for pid in ids[-3:]:
                        batch.append(("update", pid, c.send_request("pin.update", id=pid, edit_token=self.tokens[pid],
                                                                   changes={"title": f"edited {i}"})))
                    if len(ids) > 5:
                        victim = ids[0]
                        batch.append(("delete", victim, c.send_request("pin.delete", id=victim, edit_token=self.tokens[victim])))
                    batch.append(("panic", (52.5 + i / 1e5, 13.4), c.send_request("panic.update", stream=self.stream["id"],
                                                                                   lat=52.5 + i / 1e5, lon=13.4)))
                    if i % 50 == 0:
                        batch.append(("status", "amber" if i % 100 else "red",
                                      c.send_request("panic.status", stream=self.stream["id"], status="amber" if i % 100 else "red")))
                    for kind, what, ref in batch:
                        reply = c.await_reply(ref)
                        assert reply["type"] == "ok", reply
                        if kind == "create":
                            self.pins[reply["pin"]["id"]] = reply["pin"]
                            self.tokens[reply["pin"]["id"]] = reply["edit_token"]
                        elif kind == "update":
                            self.pins[what] = reply["pin"]
                        elif kind == "delete":
                            self.deleted.add(what)
                        elif kind in ("panic", "status"):
                            self.acked_seqs[reply["seq"]] = what
                        self._ack()
        except BaseException as e:  # the connection dies when vigild is killed: expected
            self.error = e


def test_kill_9_loses_no_acknowledged_write(vigild, tmp_path):
    state = tmp_path / "state"
    d = vigild(config(state))
    rec = Recorder(d.port)
    rec.thread.start()
    assert rec.enough.wait(60), f"only {rec.acks} acks: {rec.error!r}"
    d.proc.send_signal(signal.SIGKILL)   # requests are in flight: the writer pipelines batches
    d.wait(10)
    d.reported = True
    rec.thread.join(10)
    acked_pins = {pid: p for pid, p in rec.pins.items() if pid not in rec.deleted}

    d2 = vigild(config(state))
    restored = world_pins(d2.port)
    for pid, pin in acked_pins.items():
        assert pid in restored, f"acknowledged pin {pid} lost"
        # The acknowledged state, or a later one whose ack was in flight.
        assert restored[pid]["title"] in (pin["title"],) or restored[pid]["updated_at"] >= pin["updated_at"], (pin, restored[pid])
        assert (restored[pid]["lat"], restored[pid]["lon"]) == (pin["lat"], pin["lon"])
    for pid in rec.deleted:
        assert pid not in restored, f"acknowledged delete of {pid} undone"
    titles = [p["title"] for p in restored.values() if p["title"].startswith("pin ")]
    assert len(titles) == len(set(titles)), "an unacknowledged create appeared twice"

    reply, events = watch_state(d2.port, rec.stream["id"], rec.stream["token"], since=0)
    assert reply["state"]["seq"] >= max(rec.acked_seqs), "an acknowledged panic event was lost"
    seqs = [e["seq"] for e in events if "seq" in e]
    assert seqs == list(range(1, reply["state"]["seq"] + 1)), "every seq exactly once, in order"
    by_seq = {e["seq"]: e for e in events}
    for seq, what in rec.acked_seqs.items():
        if isinstance(what, tuple):
            assert (by_seq[seq]["lat"], by_seq[seq]["lon"]) == what, (seq, by_seq[seq])
        else:
            assert by_seq[seq]["status"] == what
    assert "ended" not in reply["state"], "an active stream stays active across a crash"


def test_graceful_restart_gives_identical_state(vigild, tmp_path):
    state = tmp_path / "state"
    d = vigild(config(state))
    with PinClient(d.port) as c:
        for i in range(20):
            pin, token = c.create(48.0 + i / 100, 2.0 + i / 100, f"pin {i}", description="d" * i)
            if i % 3 == 0:
                c.ok("pin.update", id=pin["id"], edit_token=token, changes={"lat": 48.5, "title": "moved"})
        voter = PinClient(d.port)
        voter.ok("pin.vote", id=pin["id"], value=1)
        voter.close()
        start = c.ok("panic.start", status="amber", lat=1.0, lon=2.0, note="walking home", watchers=1)
        for k in range(5):
            c.ok("panic.update", stream=start["stream"], lat=1.0 + k / 10, lon=2.0)
        c.ok("panic.status", stream=start["stream"], status="red")
        ended = c.ok("panic.start", status="red", lat=3.0, lon=4.0)
        c.ok("panic.end", stream=ended["stream"], reason="safe")
    before_pins = world_pins(d.port)
    before_watch = watch_state(d.port, start["stream"], start["watch_tokens"][0], since=0)
    before_ended = watch_state(d.port, ended["stream"], ended["watch_tokens"][0])
    assert d.stop(signal.SIGTERM) == 0
    assert any("final snapshot written" in line for line in d._lines)

    d2 = vigild(config(state))
    assert world_pins(d2.port) == before_pins
    assert watch_state(d2.port, start["stream"], start["watch_tokens"][0], since=0) == before_watch
    assert watch_state(d2.port, ended["stream"], ended["watch_tokens"][0]) == before_ended
    # The owner resumes with its token and keeps streaming at the next seq.
    with PinClient(d2.port) as c:
        with pytest.raises(AssertionError):
            c.ok("panic.update", stream=start["stream"], lat=0.0, lon=0.0)  # not the owner connection yet
    with PinClient(d2.port) as c:
        resumed = c.ok("panic.resume", stream=start["stream"], owner_token=start["owner_token"])
        assert resumed["state"]["seq"] == before_watch[0]["state"]["seq"]
        assert c.recv_json() == {"type": "panic.watchers", "stream": start["stream"], "count": 0}
        assert c.ok("panic.update", stream=start["stream"], lat=0.0, lon=0.0)["seq"] == resumed["state"]["seq"] + 1


def test_torn_journal_tail_is_cut_off(vigild, tmp_path):
    state = tmp_path / "state"
    d = vigild(config(state))
    with PinClient(d.port) as c:
        pins = [c.create(10.0, 10.0 + i / 10, f"pin {i}")[0]["id"] for i in range(10)]
    d.proc.send_signal(signal.SIGKILL)
    d.wait(10)
    d.reported = True
    journal = sorted(state.glob("journal-*.vgj"))[-1]
    with open(journal, "ab") as f:
        f.write(b"\x40\x00\x00\x00\x12\x34\x56\x78half a record")   # a crash mid-write
    d2 = vigild(config(state))
    assert set(pins) <= set(world_pins(d2.port))
    assert any("cut a torn write" in line for line in d2._lines), d2.log_tail()


def test_damaged_newest_snapshot_falls_back(vigild, tmp_path):
    state = tmp_path / "state"
    d = vigild(config(state))
    with PinClient(d.port) as c:
        first = c.create(20.0, 20.0, "before the restart")[0]["id"]
    assert d.stop(signal.SIGTERM) == 0
    d2 = vigild(config(state))
    with PinClient(d2.port) as c:
        second = c.create(21.0, 21.0, "after the restart")[0]["id"]
    assert d2.stop(signal.SIGTERM) == 0
    snapshots = sorted(state.glob("snapshot-*.vgs"))
    assert len(snapshots) == 2, snapshots     # the newest and one fallback are kept
    data = bytearray(snapshots[-1].read_bytes())
    data[len(data) // 2] ^= 0xFF
    snapshots[-1].write_bytes(bytes(data))
    d3 = vigild(config(state))
    assert any("skipped damaged snapshot" in line for line in d3._lines), d3.log_tail()
    # The fallback snapshot plus the journal segments kept since it give back both pins.
    restored = world_pins(d3.port)
    assert first in restored and second in restored


def test_unusable_directory_stops_startup(vigild_binary, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    cfg = tmp_path / "bad.yaml"
    pc_cfg = config(blocker / "state")
    from vigilproc import write_config
    write_config(cfg, pc_cfg)
    proc = subprocess.run([str(vigild_binary), "--config", str(cfg), "--listen", "127.0.0.1:0"],
                          capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert str(blocker / "state") in proc.stderr and "state directory" in proc.stderr, proc.stderr


def test_second_daemon_on_the_same_directory_is_refused(vigild, vigild_binary, tmp_path):
    state = tmp_path / "state"
    vigild(config(state))
    cfg = tmp_path / "second.yaml"
    from vigilproc import write_config
    write_config(cfg, config(state))
    proc = subprocess.run([str(vigild_binary), "--config", str(cfg), "--listen", "127.0.0.1:0"],
                          capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert "lock" in proc.stderr.lower(), proc.stderr


def test_files_are_private_and_inspect_prints_json_lines(vigild, vigild_binary, tmp_path):
    state = tmp_path / "state"
    d = vigild(config(state, fsync="always"))
    with PinClient(d.port) as c:
        pin, token = c.create(30.0, 30.0, "inspect me")
        start = c.ok("panic.start", status="red", lat=1.25, lon=1.0, note="a quiet note")
    assert d.stop(signal.SIGTERM) == 0
    assert oct(state.stat().st_mode & 0o777) == "0o700"
    for f in state.iterdir():
        if f.suffix in (".vgs", ".vgj"):
            assert f.stat().st_mode & 0o077 == 0, f"{f} is readable by others"
    out = subprocess.run([str(vigild_binary), "state", "inspect", str(state)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    text = out.stdout
    assert pin["id"] in text and start["stream"] in text
    assert token not in text and start["owner_token"] not in text, "tokens never appear"
    assert all(isinstance(line, dict) for line in lines)
    # By default no coordinates, notes or pin texts: sizes instead.
    assert "inspect me" not in text and "a quiet note" not in text and '"lat"' not in text and '"lon"' not in text
    assert any(line.get("title_bytes") == len("inspect me") for line in lines)
    assert any(line.get("note_bytes") == len("a quiet note") for line in lines)
    shown = subprocess.run([str(vigild_binary), "state", "inspect", "--show-content", str(state)],
                           capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0, shown.stderr
    full = [json.loads(line) for line in shown.stdout.splitlines()]
    assert any(line.get("title") == "inspect me" and (line["lat"], line["lon"]) == (30.0, 30.0) for line in full)
    assert any(line.get("note") == "a quiet note" and line["last"]["lat"] == 1.25 for line in full)
    assert token not in shown.stdout and start["owner_token"] not in shown.stdout, "tokens never appear"
    missing = subprocess.run([str(vigild_binary), "state", "inspect", str(tmp_path / "nope")], capture_output=True, text=True)
    assert missing.returncode == 1 and "no such file" in missing.stderr


def _refused(vigild_binary, tmp_path: Path, state: Path) -> subprocess.CompletedProcess:
    from vigilproc import write_config
    cfg = write_config(tmp_path / "refused.yaml", config(state))
    return subprocess.run([str(vigild_binary), "--config", str(cfg), "--listen", "127.0.0.1:0"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def _flip_middle(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_every_snapshot_damaged_refuses_to_start(vigild, vigild_binary, tmp_path):
    state = tmp_path / "state"
    for _ in range(2):   # two graceful runs leave the newest snapshot and one fallback
        d = vigild(config(state))
        with PinClient(d.port) as c:
            c.create(40.0, 40.0, "kept")
        assert d.stop(signal.SIGTERM) == 0
    snapshots = sorted(state.glob("snapshot-*.vgs"))
    assert len(snapshots) == 2
    for s in snapshots:
        _flip_middle(s)
    proc = _refused(vigild_binary, tmp_path, state)
    assert proc.returncode == 1
    assert "every snapshot is damaged" in proc.stderr, proc.stderr


def test_damage_in_the_middle_of_the_journal_refuses_to_start(vigild, vigild_binary, tmp_path):
    # Two crashed runs leave: the first run's snapshot and journal (kept as the fallback), and the
    # second run's snapshot and journal. With the newest snapshot damaged, restore falls back to
    # the first and must replay both journals; the first one is then damaged in its middle, which
    # is not a torn write: vigild must refuse rather than drop what follows.
    state = tmp_path / "state"
    for run in range(2):
        d = vigild(config(state))
        with PinClient(d.port) as c:
            for i in range(20):
                c.create(41.0, 41.0 + i / 100, f"run {run} pin {i}")
        d.proc.send_signal(signal.SIGKILL)
        d.wait(10)
        d.reported = True
    snapshots = sorted(state.glob("snapshot-*.vgs"))
    journals = sorted(state.glob("journal-*.vgj"))
    assert len(snapshots) == 2 and len(journals) >= 2, (snapshots, journals)
    _flip_middle(snapshots[-1])
    _flip_middle(journals[0])
    proc = _refused(vigild_binary, tmp_path, state)
    assert proc.returncode == 1
    assert "damaged before its end" in proc.stderr, proc.stderr
