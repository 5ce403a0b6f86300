#!/usr/bin/env python3
"""The benchmark record: every figure in docs/BENCHMARKS.md comes from this script.

For each run it starts a fresh release vigild (benchmarks/vigild-bench.yaml: the shipped
defaults with the per-session rate limits lifted, since one load client stands in for thousands
of phones), runs ``vigil-load`` against it with ``--server-pid`` and ``--json``, stops the daemon,
and collects the JSON. At the end it prints a Markdown summary (and writes it with ``--out``).

    swift build -c release --product vigild --product vigil-load
    python3 benchmarks/load_record.py                 # everything (about 10 minutes)
    python3 benchmarks/load_record.py --only panic    # one group
    python3 benchmarks/load_record.py --quick         # small sizes, a smoke run

Groups: idle (3 sizes), fanout (map, every subscriber in one viewport, 3 sizes), city (map,
city-sized viewports with panning), panic (3 sizes, 3 watchers each at 1 Hz), panic30k (30,000
location deliveries a second), mixed.

The machine's RLIMIT_NOFILE hard limit caps the connection counts: vigild and vigil-load each
need one fd per connection, and only a process with CAP_SYS_RESOURCE can raise the hard limit.
The script reads the limit and skips (and says so) any size that does not fit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))

from vigilproc import Vigild  # noqa: E402

BIN = REPO / ".build" / "release"


def runs(quick: bool) -> list[dict]:
    """Every run: a group, a label, the vigil-load arguments and the connections it needs."""
    s = (lambda full, small: small if quick else full)
    dur = s(15, 3)
    out: list[dict] = []
    for n in s([5_000, 10_000, 19_000], [500, 1_000]):
        out.append(dict(group="idle", label=f"idle {n:,}", conns=n,
                        args=["idle", "--connections", str(n), "--duration", str(s(5, 2))]))
    for n in s([1_000, 5_000, 10_000], [100, 200]):
        out.append(dict(group="fanout", label=f"fan-out {n:,} subscribers", conns=n + 10,
                        args=["map", "--subscribers", str(n), "--publishers", "10", "--rate", "0",
                              "--window", "4", "--pins-per-publisher", "20", "--same-viewport",
                              "--region", "52.45,13.30,52.55,13.50", "--duration", str(dur)]))
    out.append(dict(group="city", label="city viewports 10,000 subscribers", conns=s(10_000, 200) + 20,
                    args=["map", "--subscribers", str(s(10_000, 200)), "--publishers", "20", "--rate", str(s(2_000, 200)),
                          "--pins-per-publisher", "500", "--duration", str(dur)]))
    for n in s([1_000, 5_000, 10_000], [100, 300]):
        conns = n + (3 * n + 3) // 4
        out.append(dict(group="panic", label=f"panic {n:,} streams x 3 watchers at 1 Hz", conns=conns,
                        args=["panic", "--streams", str(n), "--watchers", "3", "--rate", "1",
                              "--watches-per-connection", "4", "--reconnects", "2", "--duration", str(dur)]))
    out.append(dict(group="panic30k", label="panic 1,000 streams x 3 watchers at 10 Hz (30,000 deliveries/s)",
                    conns=s(1_000, 100) * 4,
                    args=["panic", "--streams", str(s(1_000, 100)), "--watchers", "3", "--rate", "10",
                          "--reconnects", "2", "--duration", str(dur)]))
    out.append(dict(group="mixed", label="mixed: 2,000 map + 1,000 panic streams", conns=s(2_000, 100) + 10 + s(4_000, 400),
                    args=["mixed", "--subscribers", str(s(2_000, 100)), "--streams", str(s(1_000, 100)),
                          "--rate", str(s(500, 50)), "--duration", str(dur)]))
    return out


KEY_NAMES = {"idle": "server RSS per connection (KiB)", "fanout": "deliveries/s", "city": "map event p99 (ms)",
             "panic": "panic location p99 (ms)", "panic30k": "panic location p99 (ms)", "mixed": "panic location p99 (ms)"}


def key_figure(group: str, result: dict) -> float:
    """The figure a group is judged by, for picking the median run."""
    try:
        if group == "idle":
            return result["figures"]["RSS/conn KiB"]
        if group == "fanout":
            return result["messages"]["delivered_per_s"]
        if group == "city":
            return result["latency_ns"]["map event"]["p99"] / 1e6
        return result["latency_ns"]["panic location"]["p99"] / 1e6
    except (KeyError, TypeError):
        return float("nan")


def fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 1000 else f"{v:.3f}"


def fd_limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def cpu_times() -> list[int]:
    """The machine's CPU time counters (/proc/stat: user nice system idle iowait irq softirq steal)."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def steal_share(before: list[int], after: list[int]) -> float:
    """The share of CPU time the hypervisor gave to other guests during the run (steal)."""
    delta = [b - a for a, b in zip(before, after)]
    total = sum(delta)
    return delta[7] / total if total else 0.0


def run_one(run: dict, workdir: Path) -> dict:
    daemon = Vigild(BIN / "vigild", REPO / "benchmarks" / "vigild-bench.yaml", listen="127.0.0.1:0")
    daemon.start()
    slug = "".join(ch if ch.isalnum() else "_" for ch in run["label"])
    out_json = workdir / f"{slug}-{run.get('attempt', 0)}.json"
    argv = [str(BIN / "vigil-load"), *run["args"], "--url", f"ws://127.0.0.1:{daemon.port}/v1",
            "--server-pid", str(daemon.pid), "--json", str(out_json), "--no-progress"]
    started = time.monotonic()
    cpu_before = cpu_times()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    steal = steal_share(cpu_before, cpu_times())
    elapsed = time.monotonic() - started
    daemon.stop()
    result = json.loads(out_json.read_text()) if out_json.exists() else {}
    return dict(run=run, argv=" ".join(["vigil-load", *run["args"]]), exit=proc.returncode, steal=steal,
                seconds=round(elapsed, 1), table=proc.stdout, stderr=proc.stderr[-2000:], result=result)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", help="run only these groups (repeatable)")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run of the script itself")
    ap.add_argument("--out", type=Path, help="write the Markdown summary here")
    ap.add_argument("--json-dir", type=Path, help="keep each run's vigil-load JSON here")
    ap.add_argument("--repeat", type=int, default=1, help="run each N times and show the median run (this machine is shared and noisy)")
    args = ap.parse_args()

    for exe in ("vigild", "vigil-load"):
        if not (BIN / exe).exists():
            print(f"missing {BIN / exe}: swift build -c release --product vigild --product vigil-load", file=sys.stderr)
            return 2
    limit = fd_limit()
    workdir = args.json_dir or Path(tempfile.mkdtemp(prefix="vigil-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    lines = [f"Machine: {os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB, "
             f"{platform.platform()}; RLIMIT_NOFILE hard limit {limit:,}.", ""]
    failures = 0
    for run in runs(args.quick):
        if args.only and run["group"] not in args.only:
            continue
        if run["conns"] + 64 > limit:
            lines.append(f"- **{run['label']}**: skipped, needs {run['conns']:,} fds per process (limit {limit:,}).")
            continue
        attempts = []
        for attempt in range(args.repeat):
            print(f"running: {run['label']} ({attempt + 1}/{args.repeat})", file=sys.stderr, flush=True)
            attempts.append(run_one(dict(run, attempt=attempt), workdir))
        failures += sum(a["exit"] != 0 for a in attempts)
        values = [key_figure(run["group"], a["result"]) for a in attempts]
        ranked = sorted(range(len(attempts)), key=lambda i: values[i])
        r = attempts[ranked[len(ranked) // 2]]
        lines.append(f"### {run['label']}")
        lines.append("")
        lines.append(f"`{r['argv']}` (exit {r['exit']}, {r['seconds']} s; CPU stolen by the hypervisor during the run: {r['steal']:.0%})")
        if args.repeat > 1:
            name = KEY_NAMES[run["group"]]
            lines.append("")
            lines.append(f"{name} over {args.repeat} runs: " + ", ".join(fmt(v) for v in values) +
                         f"; the median run is shown. Exits: {[a['exit'] for a in attempts]}; "
                         "steal: " + ", ".join(f"{a['steal']:.0%}" for a in attempts) + ".")
        lines.append("")
        lines.append("```")
        lines.append(r["table"].rstrip())
        lines.append("```")
        if r["exit"] != 0:
            lines.append(f"stderr: {r['stderr']}")
        lines.append("")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
