#!/usr/bin/env python3
"""Pins with a reach at load (docs/BENCHMARKS.md, "Pins with a reach"): `vigil-load map --range`
against a fresh release vigild, the daemon pinned to one CPU and the client to another, with the
map exactness check applying the reach rule; and the same run without ranges, alternating, so
the two can be compared under the same machine load.

    swift build -c release --product vigild && swift build -c release --product vigil-load
    python3 benchmarks/range_load.py                # 3 runs of each, 15 s each
    python3 benchmarks/range_load.py --quick        # a smoke run (small, 3 s)

Prints, per run: the exactness check (checked subscribers, events, certain changes, errors),
deliveries/s, map event p50/p99, daemon CPU %, and the CPU time stolen by the hypervisor
(/proc/stat) during the run; then the medians. Exits 1 if any run fails its checks.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))
sys.path.insert(0, str(REPO / "benchmarks"))
from vigilproc import Vigild  # noqa: E402
from load_record import cpu_times, steal_share  # noqa: E402

BIN = REPO / ".build" / "release"


def run_once(args: list[str], out: Path, cpus: tuple[str, str]) -> dict:
    daemon = Vigild(BIN / "vigild", REPO / "benchmarks" / "vigild-bench.yaml", listen="127.0.0.1:0")
    daemon.start()
    subprocess.run(["taskset", "-a", "-p", "-c", cpus[0], str(daemon.pid)], check=True, capture_output=True)
    argv = ["taskset", "-c", cpus[1], str(BIN / "vigil-load"), *args, "--url", f"ws://127.0.0.1:{daemon.port}/v1",
            "--server-pid", str(daemon.pid), "--json", str(out), "--no-progress"]
    before = cpu_times()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    steal = steal_share(before, cpu_times())
    load = os.getloadavg()[0]   # other work on the machine: pinned processes still share their CPU
    daemon.stop()
    result = json.loads(out.read_text()) if out.exists() else {}
    check = next((c for c in result.get("checks", []) if c["name"] == "viewport exactness"), None)
    failed = proc.returncode != 0 or any(c["errors"] for c in result.get("checks", [])) or check is None
    lat = result.get("latency_ns", {}).get("map event", {})
    return dict(exit=proc.returncode, failed=failed, steal=steal, check=check, load=load,
                delivered=result.get("messages", {}).get("delivered_per_s", 0.0),
                p50=lat.get("p50", 0) / 1e6, p99=lat.get("p99", 0) / 1e6,
                cpu=result.get("server", {}).get("cpu_percent", 0.0), stdout=proc.stdout, stderr=proc.stderr[-2000:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--range", default="0.5", help="share of pins with a range (vigil-load map --range)")
    ap.add_argument("--cpus", default="0,1", help="CPU for the daemon, CPU for the client")
    opts = ap.parse_args()
    cpus = tuple(opts.cpus.split(","))
    subscribers, rate, duration, checked = ("500", "300", "3", "40") if opts.quick else ("5000", "500", "15", "100")
    # --prefill: the pins are made before the window, so the window is moves (a quarter of them
    # changing the range), votes and deletes.
    base = ["map", "--subscribers", subscribers, "--publishers", "20", "--rate", rate, "--pins-per-publisher", "250", "--prefill",
            "--region", "52.3,13.0,52.7,13.8", "--viewport-km", "8", "--panning", "0.2", "--pan-interval", "2",
            "--check-subscribers", checked, "--duration", duration]
    variants = [("with ranges", base + ["--range", opts.range]), ("without ranges", base)]
    work = Path(tempfile.mkdtemp(prefix="vigil-range-"))
    rows: dict[str, list[dict]] = {name: [] for name, _ in variants}
    print("vigil-load " + " ".join(base + ["--range", opts.range]) + f"   (daemon on CPU {cpus[0]}, client on CPU {cpus[1]})")
    for i in range(opts.repeat):
        for name, args in variants:
            r = run_once(args, work / f"{name.replace(' ', '-')}-{i}.json", cpus)
            rows[name].append(r)
            c = r["check"] or {}
            counters = c.get("counters", {})
            print(f"{name:15} run {i + 1}: exit {r['exit']}, exactness: {c.get('checked', 0)} subscribers, "
                  f"{counters.get('events', 0)} events, {counters.get('certain', 0)} certain changes, "
                  f"{c.get('errors', '?')} errors (lost {counters.get('lost', '?')}, wrong {counters.get('wrong', '?')}, "
                  f"snapshot {counters.get('snapshot errors', '?')}); {r['delivered']:,.0f} deliveries/s, "
                  f"event p50 {r['p50']:.3f} ms p99 {r['p99']:.3f} ms, daemon CPU {r['cpu']:.1f}%, steal {r['steal']:.1%}, "
                  f"load average {r['load']:.1f}", flush=True)
            if r["failed"]:
                print(r["stdout"][-3000:] + r["stderr"], file=sys.stderr)
    for name, rs in rows.items():
        med = lambda k: statistics.median(x[k] for x in rs)  # noqa: E731
        print(f"{name:15} median of {len(rs)}: {med('delivered'):,.0f} deliveries/s, event p50 {med('p50'):.3f} ms, "
              f"p99 {med('p99'):.3f} ms, daemon CPU {med('cpu'):.1f}%, steal {med('steal'):.1%}")
    return 1 if any(r["failed"] for rs in rows.values() for r in rs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
