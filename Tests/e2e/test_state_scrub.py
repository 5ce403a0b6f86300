"""Data that leaves when it should, on disk: an ended panic stream's trail (locations and note)
is in no file of the state directory once one snapshot interval has passed after its grace.

The stream starts and moves with distinctive coordinates, and ends right after a periodic
snapshot has been written, so that snapshot (which becomes the fallback once the next one is
written) and the journal segment after it hold the trail. After the grace the stream is gone from
memory; the next snapshot must scrub the fallback and the journal segments kept with it. The
files are searched as raw bytes for the values as they are stored: each coordinate as a
little-endian IEEE 754 double, the note as UTF-8. A restart must not bring the stream back.
"""

from __future__ import annotations

import signal
import struct
import time
from pathlib import Path

import pinclient as pc
from pinclient import PinClient

GRACE_MS = 1000
INTERVAL_S = 3
TRAIL = [(12.3456789012345, -98.7654321098765), (12.3456799012345, -98.7654331098765),
         (12.3456809012345, -98.7654341098765)]
NOTE = "scrub-me: the note of a trail that must leave the disk"
SNAPSHOT_WRITTEN = "snapshot written"


def config(state_dir: Path) -> dict:
    cfg = pc.pins_config()
    cfg["panic"] = {**cfg.get("panic", {}), "ended_grace_ms": GRACE_MS}
    cfg["state"] = {"directory": str(state_dir), "snapshot_interval_s": INTERVAL_S}
    return cfg


def needles() -> dict[str, bytes]:
    out = {"note": NOTE.encode()}
    for i, (lat, lon) in enumerate(TRAIL):
        out[f"lat {i}"] = struct.pack("<d", lat)
        out[f"lon {i}"] = struct.pack("<d", lon)
    return out


def holders(state: Path) -> list[str]:
    """Every (file, value) pair where a file of the state directory still holds part of the trail."""
    found = []
    for f in sorted(state.iterdir()):
        if f.is_file():
            data = f.read_bytes()
            found += [f"{f.name}: {what}" for what, needle in needles().items() if needle in data]
    return found


def log_count(d) -> int:
    with d._cond:
        return len(d._lines)


def gone(port: int, stream: str, token: str) -> bool:
    with PinClient(port) as c:
        return c.request("panic.watch", stream=stream, watch_token=token).get("type") == "error"


def test_trail_leaves_every_file_one_snapshot_interval_after_its_grace(vigild, tmp_path):
    state = tmp_path / "state"
    d = vigild(config(state))
    with PinClient(d.port) as owner:
        start = owner.ok("panic.start", status="red", lat=TRAIL[0][0], lon=TRAIL[0][1], note=NOTE, watchers=1)
        stream, token = start["stream"], start["watch_tokens"][0]
        for lat, lon in TRAIL[1:]:
            owner.ok("panic.update", stream=stream, lat=lat, lon=lon)
        # Two periodic snapshots: the second one began after the stream started, so it holds the trail.
        mark = log_count(d)
        d.wait_for_log(SNAPSHOT_WRITTEN, 3 * INTERVAL_S + 5, start=mark)
        d.wait_for_log(SNAPSHOT_WRITTEN, 3 * INTERVAL_S + 5, start=log_count(d))
        assert holders(state), "the trail was never on disk: the test would prove nothing"
        owner.ok("panic.end", stream=stream, reason="safe")
    # Gone from memory once its grace is over (an event the test can watch for).
    deadline = time.monotonic() + GRACE_MS / 1000 + 5
    while not gone(d.port, stream, token):
        assert time.monotonic() < deadline, "the stream outlived its grace"
        time.sleep(0.05)
    removed_at = time.monotonic()
    # The first snapshot written after that scrubs every older file it keeps.
    mark = log_count(d)
    d.wait_for_log(SNAPSHOT_WRITTEN, INTERVAL_S + 5, start=mark, what="the first snapshot after the grace")
    assert time.monotonic() - removed_at <= INTERVAL_S + 2, "a snapshot interval is the bound"
    assert holders(state) == [], sorted(p.name for p in state.iterdir())
    assert d.stop(signal.SIGTERM) == 0
    assert holders(state) == []

    d2 = vigild(config(state))
    assert gone(d2.port, stream, token), "a restart brought the stream back"
    assert holders(state) == [], sorted(p.name for p in state.iterdir())
    assert d2.stop(signal.SIGTERM) == 0
    assert holders(state) == []
