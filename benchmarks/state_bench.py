#!/usr/bin/env python3
"""Durable-state benchmark: snapshot size and time, restore time, and event latency during a
snapshot compared with none (target: p99 within 2x).

1. ``vigil-bench state`` builds 1,000,000 pins and 10,000 panic streams in process, times the
   snapshot encode, the atomic write, and the restore, and leaves the state directory behind.
2. vigild starts on that directory: the time from exec to its "listening" line is the restore
   as an operator sees it.
3. The same ``vigil-load map`` run (1,000 subscribers, 2,000 pin operations/s) goes against that
   daemon twice: once with snapshots effectively off (interval one day), once with a snapshot
   every second (each one walks all 1,000,000 pins, so one is always in progress). The p99 of
   the two runs is compared.

    swift build -c release   # vigild, vigil-load, vigil-bench
    python3 benchmarks/state_bench.py [--pins 1000000] [--streams 10000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))

from vigilproc import Vigild, write_config  # noqa: E402

BIN = REPO / ".build" / "release"


def daemon_config(path: Path, state_dir: Path, interval: int) -> Path:
    return write_config(path, {
        "session": {"messages_per_second": 100000, "message_burst": 1000000},
        "pins": {"writes_per_minute": 1000000, "write_burst": 1000000, "max_pins": 2000000},
        "panic": {"max_streams": 100000},
        "state": {"directory": str(state_dir), "snapshot_interval_s": interval, "fsync": "interval"},
    })


def load_run(port: int, pid: int, out: Path, duration: int) -> dict:
    argv = [str(BIN / "vigil-load"), "map", "--url", f"ws://127.0.0.1:{port}/v1", "--server-pid", str(pid),
            "--subscribers", "1000", "--publishers", "10", "--rate", "2000", "--region", "52.3,13.0,52.7,13.8",
            "--viewport-km", "10", "--duration", str(duration), "--json", str(out), "--no-progress"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr, file=sys.stderr)
    result = json.loads(out.read_text())
    result["exit"] = proc.returncode
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pins", type=int, default=1_000_000)
    ap.add_argument("--streams", type=int, default=10_000)
    ap.add_argument("--duration", type=int, default=20, help="seconds of each vigil-load run")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vigil-state-bench-"))
    state = work / "state"
    lines: list[str] = []
    try:
        bench = subprocess.run([str(BIN / "vigil-bench"), "state", "--pins", str(args.pins), "--streams", str(args.streams),
                                "--dir", str(state), "--runs", "3"], capture_output=True, text=True, timeout=1800)
        if bench.returncode != 0:
            print(bench.stdout, bench.stderr, file=sys.stderr)
            return 1
        lines += ["In process (`vigil-bench state`):", "", "```", bench.stdout.strip(), "```", ""]

        results = {}
        for label, interval in (("no snapshot during the run", 86400), ("a snapshot always in progress", 1)):
            cfg = daemon_config(work / f"vigild-{interval}.yaml", state, interval)
            started = time.monotonic()
            d = Vigild(BIN / "vigild", cfg, listen="127.0.0.1:0").start(ready_timeout=600)
            ready = time.monotonic() - started
            rss = d.rss_kib()
            result = load_run(d.port, d.pid, work / f"load-{interval}.json", args.duration)
            snaps = [l for l in d._lines if "snapshot written" in l]
            d.stop(timeout=120)
            results[label] = result
            lat = result["latency_ns"]["map event"]
            lines.append(f"- **{label}** (`state.snapshot_interval_s: {interval}`): vigild ready {ready:.1f} s after exec "
                         f"(restore + a fresh snapshot), RSS {rss / 1024:.0f} MiB; map events p50 {lat['p50'] / 1e6:.3f} ms, "
                         f"p99 {lat['p99'] / 1e6:.3f} ms, p99.9 {lat['p99_9'] / 1e6:.3f} ms over {lat['count']:,} events; "
                         f"vigil-load exit {result['exit']}; snapshots completed during the run: {len(snaps)}")
            for s in snaps[:3]:
                m = re.search(r"bytes=(\d+).*ms=(\d+)", s)
                if m:
                    lines.append(f"  - snapshot of {int(m.group(1)) / 2**20:.0f} MiB took {int(m.group(2)) / 1000:.1f} s from start to durable (sliced, 2,000 pins per 50 ms tick)")
        a = results["no snapshot during the run"]["latency_ns"]["map event"]["p99"]
        b = results["a snapshot always in progress"]["latency_ns"]["map event"]["p99"]
        lines.append("")
        lines.append(f"p99 with a snapshot in progress / without: **{b / a:.2f}x** (target: within 2x)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
