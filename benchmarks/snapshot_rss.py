#!/usr/bin/env python3
"""Peak RSS while vigild takes a snapshot, against its RSS between snapshots (issue 28: at
most 1.2x; a 15-minute mixed run peaked at 2x during snapshots).

1. ``vigil-bench state`` writes a state directory of --pins pins (every tenth voted) and
   --streams panic streams of --events events each.
2. vigild starts on it with ``state.snapshot_interval_s: --interval`` and no client traffic.
3. Its /proc/PID/status is read every --sample-ms (10 ms): VmRSS, and VmHWM after a reset
   (``echo 5 > /proc/PID/clear_refs`` once it is ready, so the restore's own peak is not
   counted). Each "snapshot written" log line (with its ``ms=``) marks a snapshot's window.
4. After --snapshots periodic snapshots it stops. Steady = the median VmRSS before the first
   periodic snapshot began; peak = the largest of the VmRSS samples and the final VmHWM;
   ratio = peak / steady.

    swift build -c release --product vigild; swift build -c release --product vigil-bench
    python3 benchmarks/snapshot_rss.py [--vigild PATH] [--pins 300000] [--runs 3] [--cpu 0] [--json FILE]

--vigild lets two builds be compared (e.g. one built from an older commit into a git-ignored
folder). Loopback only; every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))

from vigilproc import Vigild, write_config  # noqa: E402

BIN = REPO / ".build" / "release"
SNAP_RE = re.compile(r"snapshot written.*?bytes=(\d+).*?ms=(\d+)")


def status(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":", 1)
                out[k] = int(v.split()[0])
    return out


def reset_hwm(pid: int) -> None:
    """VmHWM back to the current RSS (Linux 4.0 and later)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def one_run(args, work: Path, run: int) -> dict:
    state = work / f"state-{run}"
    bench = subprocess.run([str(args.bench), "state", "--pins", str(args.pins), "--streams", str(args.streams),
                            "--events", str(args.events), "--dir", str(state), "--runs", "1"],
                           capture_output=True, text=True, timeout=900)
    if bench.returncode != 0:
        raise SystemExit(f"vigil-bench state failed: {bench.stdout}\n{bench.stderr}")
    cfg = write_config(work / f"vigild-{run}.yaml", {
        "session": {"messages_per_second": 100000, "message_burst": 1000000},
        "limits": {"panic_start_burst": 10000000, "panic_starts_per_hour": 10000000, "open_streams_per_address": 10000000},
        "pins": {"max_pins": max(2_000_000, args.pins * 2)},
        "panic": {"max_streams": max(100_000, args.streams * 2)},
        "state": {"directory": str(state), "snapshot_interval_s": args.interval, "fsync": "interval"},
    })
    d = Vigild(args.vigild, cfg, listen="127.0.0.1:0")
    started = time.monotonic()
    d.start(ready_timeout=600)
    ready_s = time.monotonic() - started
    if args.cpu is not None:  # every thread, and the snapshot threads it starts later inherit it
        subprocess.run(["taskset", "-a", "-cp", str(args.cpu), str(d.pid)], check=True, capture_output=True)
    pid = d.pid
    load = None
    if args.panic_traffic:
        # Streams at 1 Hz through the run: the journal fills between snapshots and the loop
        # changes the streams while one is written (what a daemon at rest does not show).
        seconds = args.interval * (args.snapshots + 2) + 30
        load = subprocess.Popen([str(args.vigil_load), "panic", "--url", f"ws://127.0.0.1:{d.port}/v1",
                                 "--streams", str(args.panic_traffic), "--watchers", "1", "--rate", "1",
                                 "--duration", str(seconds), "--no-progress"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(args.interval)  # the ramp-up, before the samples count
    reset_hwm(pid)  # the restore's own peak is not counted
    first_line = d.line_count()
    samples: list[tuple[float, int]] = []
    snaps: list[dict] = []
    t0 = time.monotonic()
    deadline = t0 + args.interval * (args.snapshots + 2) + 600
    seen = first_line
    try:
        while len(snaps) < args.snapshots and time.monotonic() < deadline and d.running:
            now = time.monotonic() - t0
            samples.append((now, status(pid)["VmRSS"]))
            if d.line_count() > seen:
                with d._cond:
                    new = d._lines[seen:]
                seen += len(new)
                for line in new:
                    m = SNAP_RE.search(line)
                    if m:
                        ms = int(m.group(2))
                        snaps.append({"end_s": now, "start_s": now - ms / 1000, "bytes": int(m.group(1)), "ms": ms})
            time.sleep(args.sample_ms / 1000)
        final = status(pid)
    finally:
        if load is not None:
            load.kill()
            load.wait(timeout=60)
        d.stop(timeout=300)
    if len(snaps) < args.snapshots:
        raise SystemExit(f"only {len(snaps)} snapshots seen before the deadline")
    before = [r for t, r in samples if t < snaps[0]["start_s"]]
    steady = statistics.median(before) if before else samples[0][1]
    between = [r for t, r in samples if not any(s["start_s"] - 0.2 <= t <= s["end_s"] + 0.5 for s in snaps)]
    for s in snaps:
        s["peak_rss_kib"] = max((r for t, r in samples if s["start_s"] - 0.2 <= t <= s["end_s"] + 0.5), default=0)
    peak = max(max(r for _, r in samples), final["VmHWM"])
    if args.panic_traffic and between:  # the RSS grows with the histories: compare with between snapshots
        steady = statistics.median(between)
    return {
        "run": run, "ready_s": round(ready_s, 2), "samples": len(samples),
        "steady_rss_kib": steady, "between_snapshots_rss_kib": statistics.median(between) if between else None,
        "peak_rss_kib": peak, "vmhwm_kib": final["VmHWM"], "ratio": round(peak / steady, 3),
        "snapshots": snaps,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vigild", type=Path, default=BIN / "vigild")
    ap.add_argument("--bench", type=Path, default=BIN / "vigil-bench")
    ap.add_argument("--pins", type=int, default=300_000)
    ap.add_argument("--streams", type=int, default=2_000)
    ap.add_argument("--events", type=int, default=50)
    ap.add_argument("--interval", type=int, default=8, help="state.snapshot_interval_s")
    ap.add_argument("--snapshots", type=int, default=3, help="periodic snapshots watched per run")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--panic-traffic", type=int, default=0, metavar="STREAMS",
                    help="run vigil-load panic with this many streams at 1 Hz meanwhile; steady is then the median between snapshots")
    ap.add_argument("--vigil-load", type=Path, default=BIN / "vigil-load")
    ap.add_argument("--sample-ms", type=float, default=10)
    ap.add_argument("--cpu", type=int, help="pin vigild to this CPU (taskset)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vigil-snapshot-rss-"))
    runs = []
    try:
        for run in range(args.runs):
            r = one_run(args, work, run)
            runs.append(r)
            mb = [s["bytes"] / 2**20 for s in r["snapshots"]]
            print(f"run {run}: steady {r['steady_rss_kib'] / 1024:.0f} MiB, between snapshots "
                  f"{(r['between_snapshots_rss_kib'] or 0) / 1024:.0f} MiB, peak {r['peak_rss_kib'] / 1024:.0f} MiB "
                  f"(VmHWM {r['vmhwm_kib'] / 1024:.0f} MiB), ratio {r['ratio']:.2f}; snapshots of "
                  f"{', '.join(f'{m:.0f}' for m in mb)} MiB in {', '.join(str(s['ms']) for s in r['snapshots'])} ms",
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = {
        "vigild": str(args.vigild), "pins": args.pins, "streams": args.streams, "events": args.events,
        "interval_s": args.interval, "runs": runs,
        "median_steady_rss_kib": statistics.median(r["steady_rss_kib"] for r in runs),
        "median_peak_rss_kib": statistics.median(r["peak_rss_kib"] for r in runs),
        "median_ratio": statistics.median(r["ratio"] for r in runs),
    }
    print(f"median of {len(runs)}: steady {summary['median_steady_rss_kib'] / 1024:.0f} MiB, peak "
          f"{summary['median_peak_rss_kib'] / 1024:.0f} MiB, ratio {summary['median_ratio']:.2f} (goal: at most 1.2)")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
