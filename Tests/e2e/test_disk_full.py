"""A full disk (issue 12, "Disk full and I/O errors"), on a small tmpfs the test mounts as the
state directory and fills with a filler file.

While the journal cannot be written, vigild keeps running: changes are answered ``unavailable``
with ``retry_after_ms`` and are neither applied nor shown to anyone; reads (subscribe, watch)
and live events go on; /metrics shows the mode, the refusals and the storage errors. Once the
filler is removed, writes resume without a restart; after a restart every acknowledged change
is there and no refused one. A daemon started on a full disk serves read-only and recovers the
same way. (Before: the first failed write exited with 74, and a start on a full disk failed.)

Needs root (mount); skipped with the reason otherwise.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

import pinclient as pc
from pinclient import PinClient, ProtocolViolation
from wsraw import http_get

WORLD = (-90, -180, 90, 180)
CONFIG_LIMITS = {"session": {"messages_per_second": 100000, "message_burst": 100000},
                 "pins": {"writes_per_minute": 1000000, "write_burst": 100000}}
RECOVERY_TIMEOUT_S = 45  # retries back off 1 s, 2 s, 4 s … 30 s


class AnyClient(PinClient):
    """A PinClient that accepts pin and panic events alike."""

    @staticmethod
    def _check_event(msg: dict) -> None:
        if "ref" in msg:
            raise ProtocolViolation(f"an event carries a ref: {msg!r}")


def config(state_dir: Path) -> dict:
    cfg = pc.pins_config(**CONFIG_LIMITS)
    cfg["state"] = {"directory": str(state_dir)}
    return cfg


@pytest.fixture
def small_fs(tmp_path):
    """A 4 MiB tmpfs, unmounted afterwards (lazily: a daemon that failed may still hold it)."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "vigil-disk-full", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN): {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(fs: Path) -> Path:
    """Writes a filler file until the filesystem has no byte left (ENOSPC)."""
    filler = fs / "filler"
    chunk = b"\0" * 65536
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                chunk = b"\0" * 512
                try:
                    while True:
                        os.write(fd, chunk)
                except OSError as e2:
                    assert e2.errno == errno.ENOSPC, e2
                return filler
    finally:
        os.close(fd)


def metrics(d) -> dict[str, float]:
    """The /metrics samples as 'name{labels}' -> value (the labels as the daemon writes them)."""
    body = http_get(d.admin_port, "/metrics").body.decode()
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            key, _, val = line.rpartition(" ")
            out[key] = float(val)
    return out


def world_pins(port: int) -> set[str]:
    with PinClient(port) as c:
        return {p["id"] for p in c.subscribe_bbox(*WORLD)}


def assert_unavailable(reply: dict) -> None:
    assert reply["type"] == "error" and reply["code"] == "unavailable", reply
    assert isinstance(reply.get("retry_after_ms"), int) and 0 < reply["retry_after_ms"] <= 30000, reply


def test_writes_are_refused_while_the_disk_is_full_and_resume_without_a_restart(vigild, small_fs):
    state = small_fs / "state"
    d = vigild(config(state))
    acked: set[str] = set()
    with AnyClient(d.port) as writer, AnyClient(d.port) as subscriber, AnyClient(d.port) as owner:
        subscriber.subscribe_bbox(*WORLD)
        start = owner.ok("panic.start", status="red", lat=52.5, lon=13.4, watchers=2)
        stream, tokens = start["stream"], start["watch_tokens"]
        acked_seq = 1
        for i in range(5):
            acked.add(writer.create(52.0 + i / 100, 13.0, f"before {i}")[0]["id"])
        kept, kept_token = writer.create(51.0, 12.0, "kept as created")
        acked.add(kept["id"])
        filler = fill(small_fs)

        # The journal's last page may still take a few records; the first write that needs a
        # new page is refused, and nothing the daemon refused is applied.
        refused = 0
        for i in range(2000):
            reply = writer.request("pin.create", pin={"lat": 52.3, "lon": 13.3, "title": f"full {i}"})
            if reply["type"] == "ok":
                acked.add(reply["pin"]["id"])
                continue
            assert_unavailable(reply)
            refused += 1
            break
        assert refused == 1, "no write was refused on a full disk"
        assert d.running(), d.log_tail()
        d.wait_for_log(r"state unavailable.*kind=no_space", 5)

        # Every change is refused from now on, a panic update included, without being applied.
        assert_unavailable(writer.request("pin.create", pin={"lat": 52.4, "lon": 13.4, "title": "refused"}))
        assert_unavailable(owner.request("panic.update", stream=stream, lat=52.6, lon=13.5))
        assert_unavailable(owner.request("panic.invite", stream=stream))
        assert_unavailable(writer.request("pin.update", id=kept["id"], edit_token=kept_token, changes={"title": "refused"}))
        assert_unavailable(writer.request("pin.delete", id=kept["id"], edit_token=kept_token))
        refused += 5

        # Reads go on: a new subscriber sees exactly the acknowledged pins, a watcher the stream
        # at its last acknowledged seq, and the owner hears of the watcher live.
        assert world_pins(d.port) == acked
        with AnyClient(d.port) as watcher:
            watched = watcher.ok("panic.watch", stream=stream, watch_token=tokens[0])
            assert watched["state"]["seq"] == acked_seq, watched
            assert owner.event(5)["type"] == "panic.watchers"
        # The subscriber was told of acknowledged pins only.
        subscriber.request(pc.BARRIER_OP)  # every event sent before it is in subscriber.events now
        assert {e["pin"]["id"] for e in subscriber.events if e["type"] == "pin.added"} == acked
        subscriber.events.clear()

        m = metrics(d)
        assert m['vigil_state_mode{mode="unavailable"}'] == 1, m
        assert m["vigil_state_refused_writes_total"] == refused, m
        assert m['vigil_storage_errors_total{kind="no_space"}'] >= 1, m
        health = json.loads(http_get(d.admin_port, "/healthz").body)
        assert health["state"] == "unavailable", health

        # A retry of the disk fails while it is full (counted), and the state stays unavailable.
        deadline = time.monotonic() + 10
        while metrics(d)['vigil_storage_errors_total{kind="no_space"}'] < 2:
            assert time.monotonic() < deadline, "no retry of the full disk within 10 s"
            time.sleep(0.2)
        assert metrics(d)['vigil_state_mode{mode="unavailable"}'] == 1
        assert_unavailable(writer.request("pin.create", pin={"lat": 52.4, "lon": 13.4, "title": "refused"}))
        refused += 1

        # Room again: the daemon finds it by itself and records again.
        filler.unlink()
        d.wait_for_log(r"state writable again", RECOVERY_TIMEOUT_S)
        after = writer.create(52.7, 13.7, "after")[0]["id"]
        acked.add(after)
        seq = owner.ok("panic.update", stream=stream, lat=52.8, lon=13.8)["seq"]
        assert seq == acked_seq + 1, seq  # the refused update took no seq
        acked_seq = seq
        while True:
            e = subscriber.event(5)
            if e["type"] == "pin.added" and e["pin"]["id"] == after:
                break
        m = metrics(d)
        assert m['vigil_state_mode{mode="writable"}'] == 1, m

    # A restart gives back every acknowledged change and no refused one.
    assert d.stop() == 0, d.log_tail()
    d2 = vigild(config(state))
    assert world_pins(d2.port) == acked
    with PinClient(d2.port) as c:
        assert next(p for p in c.subscribe_bbox(*WORLD) if p["id"] == kept["id"])["title"] == "kept as created"
    with AnyClient(d2.port) as watcher:
        assert watcher.ok("panic.watch", stream=stream, watch_token=tokens[1])["state"]["seq"] == acked_seq


def test_a_start_on_a_full_disk_serves_read_only_then_recovers(vigild, small_fs):
    state = small_fs / "state"
    d = vigild(config(state))
    with AnyClient(d.port) as c:
        acked = {c.create(52.0 + i / 100, 13.0, f"pin {i}")[0]["id"] for i in range(3)}
    assert d.stop() == 0, d.log_tail()
    filler = fill(small_fs)

    d2 = vigild(config(state))
    d2.wait_for_log(r"state unavailable.*during=start-up", 5)
    assert json.loads(http_get(d2.admin_port, "/healthz").body)["state"] == "unavailable"
    assert world_pins(d2.port) == acked
    with AnyClient(d2.port) as c:
        assert_unavailable(c.request("pin.create", pin={"lat": 52.4, "lon": 13.4, "title": "refused"}))
        filler.unlink()
        d2.wait_for_log(r"state writable again", RECOVERY_TIMEOUT_S)
        acked.add(c.create(52.5, 13.5, "after")[0]["id"])
    assert d2.stop() == 0, d2.log_tail()
    d3 = vigild(config(state))
    assert world_pins(d3.port) == acked
