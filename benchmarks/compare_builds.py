#!/usr/bin/env python3
"""Two vigild builds measured side by side in one run: fan-out throughput and CPU per delivery,
daemon RSS per idle connection, and heap allocations per echoed message.

The runs alternate (old, new, old, new, ...) so both builds see the same machine weather, and
each figure is the median of ``--repeat`` runs. Both builds are driven by the same load client
(``--load``, the new vigil-load by default). For the fan-out the daemon is pinned to CPU 0 and
the client to CPU 1, and the daemon's own CPU time per delivery is reported next to the rate:
when the client saturates its core the rate measures the client, but the CPU per delivery
still measures the daemon.

    git worktree add /tmp/vigil-old <commit> && (cd /tmp/vigil-old && swift build -c release --product vigild)
    swift build -c release --product vigild && swift build -c release --product vigil-load
    python3 benchmarks/compare_builds.py --old /tmp/vigil-old/.build/release/vigild --new .build/release/vigild

Measurements (each can be skipped with --skip NAME): fanout (1,000 subscribers in one viewport,
10 closed-loop publishers, 10 s), idle (15,000 idle /v1 connections), allocs
(benchmarks/echo_allocations.py under valgrind), panning (5,000 subscribers in one city, a fifth
of them re-subscribing each second to views of ~250 pins: daemon CPU per re-subscribe), panic
(benchmarks/panic_latency.py's load: 1,000 streams with 3 watchers at 10 updates/s, 15 s: update-to-
watcher latency and daemon CPU per delivery).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))

from vigilproc import Vigild  # noqa: E402

CONFIG = REPO / "benchmarks" / "vigild-bench.yaml"


def cpu_times() -> list[int]:
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def steal_share(before: list[int], after: list[int]) -> float:
    delta = [b - a for a, b in zip(before, after)]
    return delta[7] / sum(delta) if sum(delta) else 0.0


def load(binary: Path, client: Path, args: list[str], *, pin: bool) -> dict:
    """Starts `binary`, runs the load client against it, returns the client's JSON report plus steal."""
    daemon = Vigild(binary, CONFIG, listen="127.0.0.1:0")
    daemon.start()
    if pin:
        os.sched_setaffinity(daemon.pid, {0})
    out = Path(tempfile.mkstemp(suffix=".json")[1])
    argv = ([] if not pin else ["taskset", "-c", "1"]) + [str(client), *args, "--url", f"ws://127.0.0.1:{daemon.port}/v1",
                                                       "--server-pid", str(daemon.pid), "--json", str(out), "--no-progress"]
    before = cpu_times()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    steal = steal_share(before, cpu_times())
    daemon.stop()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    report = json.loads(out.read_text())
    out.unlink()
    report["steal"] = steal
    return report


def fanout(binary: Path, client: Path) -> dict:
    r = load(binary, client, ["map", "--subscribers", "1000", "--publishers", "10", "--rate", "0", "--window", "16",
                              "--pins-per-publisher", "20", "--same-viewport", "--region", "52.45,13.30,52.55,13.50",
                              "--duration", "10"], pin=True)
    delivered = r["messages"]["delivered"]
    return {"deliveries/s": r["messages"]["delivered_per_s"],
            "daemon µs CPU per delivery": r["server"]["cpu_s"] * 1e6 / delivered if delivered else float("nan"),
            "daemon CPU %": r["server"]["cpu_percent"],
            "client CPU %": r["client"]["cpu_percent"],
            "steal %": r["steal"] * 100}


# A city panning: 5,000 subscribers with 7.5 km viewports over Berlin's box, 6,000 pins made before
# the window (~250 in each view), a fifth of the subscribers re-subscribing about once a second,
# publishers nearly idle. The daemon's CPU per re-subscribe is the figure (its CPU over the window,
# publishers' few operations included, over the re-subscribes answered in it).
PANNING = ["map", "--subscribers", "5000", "--publishers", "10", "--pins-per-publisher", "600", "--prefill",
           "--rate", "1", "--region", "52.35,13.10,52.65,13.70", "--viewport-km", "7.5",
           "--panning", "0.2", "--pan-interval", "1", "--duration", "15"]


def panning(binary: Path, client: Path) -> dict:
    r = load(binary, client, PANNING, pin=True)
    return {"daemon µs CPU per re-subscribe": r["figures"]["server CPU µs per re-subscribe"],
            "re-subscribes/s": r["figures"]["re-subscribes"] / r["duration_s"],
            "daemon CPU %": r["server"]["cpu_percent"],
            "client CPU %": r["client"]["cpu_percent"],
            "steal %": r["steal"] * 100}


def idle(binary: Path, client: Path) -> dict:
    r = load(binary, client, ["idle", "--connections", "15000", "--duration", "5"], pin=False)
    return {"daemon RSS bytes per idle connection": r["figures"]["RSS/conn KiB"] * 1024, "steal %": r["steal"] * 100}


def allocs(binary: Path, client: Path) -> dict:
    out = Path(tempfile.mkstemp(suffix=".json")[1])
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "echo_allocations.py"), "--json", str(out)],
                   env=dict(os.environ, VIGILD=str(binary)), check=True, capture_output=True, timeout=900)
    r = json.loads(out.read_text())
    out.unlink()
    return {"heap allocations per echoed message": r["allocs_per_message"]}


def panic(binary: Path, client: Path) -> dict:
    """benchmarks/panic_latency.py's load: 1,000 streams, 3 watchers each, 10 updates/s per stream
    (30,000 location deliveries a second), in memory."""
    r = load(binary, client, ["panic", "--streams", "1000", "--watchers", "3", "--rate", "10", "--duration", "15"], pin=True)
    loc = r["latency_ns"]["panic location"]
    failed = sum(c["errors"] for c in r["checks"])
    if failed:
        raise SystemExit(f"panic: {failed} check errors with {binary}")
    delivered = r["messages"]["delivered_per_s"] * r["duration_s"]
    return {"panic update-to-watcher p50 ms": loc["p50"] / 1e6, "panic update-to-watcher p99 ms": loc["p99"] / 1e6,
            "panic daemon µs CPU per delivery": r["server"]["cpu_s"] * 1e6 / delivered if delivered else float("nan"),
            "panic daemon CPU %": r["server"]["cpu_percent"], "steal %": r["steal"] * 100}


MEASUREMENTS = {"fanout": fanout, "idle": idle, "allocs": allocs, "panning": panning, "panic": panic}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=Path, required=True, help="the build to compare against (its vigild binary)")
    ap.add_argument("--new", type=Path, default=REPO / ".build" / "release" / "vigild")
    ap.add_argument("--load", type=Path, default=REPO / ".build" / "release" / "vigil-load", help="the load client for both")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip", action="append", default=[], choices=list(MEASUREMENTS))
    ap.add_argument("--out", type=Path, help="also write the Markdown table here")
    args = ap.parse_args()
    lines = [f"Machine: {os.cpu_count()} CPUs; daemon pinned to CPU 0 and client to CPU 1 for the fan-out; "
             f"median of {args.repeat} alternating runs per build.", "",
             "| measurement | old | new | new / old | old runs | new runs |", "| --- | --- | --- | --- | --- | --- |"]
    for name, measure in MEASUREMENTS.items():
        if name in args.skip:
            continue
        runs: dict[str, list[dict]] = {"old": [], "new": []}
        for attempt in range(args.repeat):
            for which in ("old", "new"):
                print(f"{name}: {which} build, run {attempt + 1}/{args.repeat}", file=sys.stderr, flush=True)
                runs[which].append(measure(getattr(args, which), args.load))
        for key in runs["old"][0]:
            old = [r[key] for r in runs["old"]]
            new = [r[key] for r in runs["new"]]
            mo, mn = statistics.median(old), statistics.median(new)
            ratio = f"{mn / mo:.2f}" if mo else "n/a"
            fmt = (lambda v: f"{v:,.0f}") if max(old + new) >= 100 else (lambda v: f"{v:.3f}")
            lines.append(f"| {key} | {fmt(mo)} | {fmt(mn)} | {ratio} | {', '.join(fmt(v) for v in old)} | {', '.join(fmt(v) for v in new)} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
