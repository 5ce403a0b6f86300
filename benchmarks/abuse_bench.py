#!/usr/bin/env python3
"""Hostile clients cannot deny service to people in danger (issue 11), measured.

Two comparisons, each run ``--repeat`` times (alternating, on a fresh release vigild each time),
the figures being the medians over the runs:

(a) **Stalled readers.** ``vigil-load map`` with ``--subscribers`` normal subscribers (8 km
    viewports over Berlin, 10 publishers, ``--map-rate`` operations/s), alone and with ``--stalled`` more
    subscribers that watch the whole region and stop reading once subscribed. Daemon config:
    ``benchmarks/vigild-bench.yaml`` (one client stands in for thousands of phones). The normal
    subscribers' event p99 must stay within 2x of the run without the stalled ones, their
    exactness check clean, and the daemon's peak RSS bounded (printed).

(b) **Abuse.** ``vigil-load panic`` (``--streams`` x 3 watchers at 1 Hz, every owner from an
    address of its own), alone and with ``vigil-load abuse`` (another process, from 127.0.0.9)
    running through it: reconnecting stream starters, vote floods, world-sized subscribes and
    revoke storms. Daemon config: the built-in production defaults, so the abusers meet the real
    per-address and per-session budgets. The normal location p99 must stay within 2x, and no
    normal request may be refused or connection dropped, and no watcher may see a duplicate seq.

The daemon runs on ``--server-cpu`` and every client on ``--client-cpu`` (taskset); the steal of
both CPUs over each run is recorded (this machine is shared). Exit status 1 when a bound fails.

    swift build -c release --product vigild && swift build -c release --product vigil-load
    python3 benchmarks/abuse_bench.py                 # 3 repeats, about 6 minutes
    python3 benchmarks/abuse_bench.py --quick         # small sizes, a smoke run of the script
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
from fanout_compare import cpu_times  # noqa: E402  (total, steal) jiffies of one CPU

BIN = REPO / ".build" / "release"
BENCH_CONFIG = REPO / "benchmarks" / "vigild-bench.yaml"


def steal(before: tuple[int, int], after: tuple[int, int]) -> float:
    return (after[1] - before[1]) / max(1, after[0] - before[0])


class Run:
    """One daemon, pinned, with the client processes of one measurement."""

    def __init__(self, args, config: Path | None, workdir: Path, label: str):
        self.args, self.workdir, self.label = args, workdir, label
        self.daemon = Vigild(BIN / "vigild", config, listen="127.0.0.1:0")

    def __enter__(self) -> "Run":
        self.daemon.start()
        subprocess.run(["taskset", "-a", "-c", "-p", str(self.args.server_cpu), str(self.daemon.pid)],
                       check=True, capture_output=True)
        self.cpu_before = (cpu_times(self.args.server_cpu), cpu_times(self.args.client_cpu))
        return self

    def load_argv(self, name: str, vigil_args: list[str]) -> tuple[list[str], Path]:
        out = self.workdir / f"{self.label}-{name}.json"
        argv = ["taskset", "-c", str(self.args.client_cpu), str(BIN / "vigil-load"), *vigil_args,
                "--url", f"ws://127.0.0.1:{self.daemon.port}/v1", "--server-pid", str(self.daemon.pid),
                "--json", str(out), "--progress-lines"]
        return argv, out

    def finish(self) -> dict:
        after = (cpu_times(self.args.server_cpu), cpu_times(self.args.client_cpu))
        figures = dict(
            steal_server_cpu=steal(self.cpu_before[0], after[0]), steal_client_cpu=steal(self.cpu_before[1], after[1]),
            peak_rss_mib=self.daemon.peak_rss_kib() / 1024,
            # Other processes on the machine (other builds and tests) compete for the same CPUs.
            load_average=os.getloadavg()[0],
            slow_consumer_closes=self.daemon.metric("vigil_slow_consumer_closes_total"),
            conflations=self.daemon.metric("vigil_conflations_total"),
            refusals={limit: self.daemon.metric("vigil_refusals_total", limit=limit) for limit in REFUSAL_LIMITS},
        )
        return figures

    def __exit__(self, *exc) -> None:
        self.daemon.stop()


REFUSAL_LIMITS = ("session_messages", "session_writes", "session_subscribes", "address_panic_starts",
                  "address_open_streams", "address_pin_creates", "address_live_pins", "address_subscribes",
                  "address_untracked", "panic_capacity", "panic_reserve")


def check(result: dict, name: str) -> dict:
    return next((c for c in result.get("checks", []) if c["name"] == name), {"errors": 0, "counters": {}})


def normal_figures(result: dict, latency: str) -> dict:
    lat = result.get("latency_ns", {}).get(latency, {})
    replies = check(result, "replies and connections")
    return dict(p50_ms=lat.get("p50", float("nan")) / 1e6, p99_ms=lat.get("p99", float("nan")) / 1e6,
                count=lat.get("count", 0),
                # Error replies and dropped connections of the normal run: refusals of real people.
                refused=replies["errors"], unexpected_closes=replies["counters"].get("unexpected closes", 0),
                server_cpu=(result.get("server") or {}).get("cpu_percent") or float("nan"),
                client_cpu=(result.get("client") or {}).get("cpu_percent") or float("nan"),
                check_errors=sum(c["errors"] for c in result.get("checks", [])))


def run_map(args, workdir: Path, stalled: int, attempt: int) -> dict:
    label = f"map-stalled{stalled}-{attempt}"
    with Run(args, BENCH_CONFIG, workdir, label) as run:
        argv, out = run.load_argv("map", [
            "map", "--subscribers", str(args.subscribers), "--publishers", "10", "--rate", str(args.map_rate),
            "--pins-per-publisher", "50", "--region", args.map_region, "--viewport-km", str(args.viewport_km),
            "--stalled", str(stalled), "--duration", str(args.duration)])
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        figures = run.finish()
    keep_progress(out, proc.stderr)
    result = json.loads(out.read_text()) if out.exists() else {}
    figures.update(normal_figures(result, "map event"), exit=proc.returncode, stalled=check(result, "stalled subscribers")["counters"],
                   exactness=check(result, "viewport exactness")["counters"], table=proc.stdout, stderr=proc.stderr[-600:],
                   argv=command(argv))
    return figures


def keep_progress(out: Path, stderr: str) -> None:
    """The run's per-second progress lines (p99 of each second) next to its JSON: where a tail came from."""
    out.with_suffix(".progress").write_text(stderr)


def command(argv: list[str]) -> str:
    """The vigil-load command line of a run, as a person would type it (no taskset, URL or output)."""
    return " ".join(["vigil-load", *argv[4:argv.index("--url")]])  # taskset -c N .../vigil-load


def run_panic(args, workdir: Path, abuse: bool, attempt: int) -> dict:
    label = f"panic-abuse{int(abuse)}-{attempt}"
    with Run(args, None, workdir, label) as run:  # no config: the production defaults
        abuse_proc = abuse_out = None
        if abuse:
            idle_fds = run.daemon.fd_count()
            abuse_argv, abuse_out = run.load_argv("abuse", [
                "abuse", "--source", "127.0.0.9", "--duration", str(args.duration + args.abuse_margin), *args.abuse_args])
            abuse_proc = subprocess.Popen(abuse_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          stdin=subprocess.DEVNULL)
            run.daemon.wait_fds_at_least(idle_fds + 20, timeout=30)  # the abusers are at it
        argv, out = run.load_argv("panic", [
            "panic", "--streams", str(args.streams), "--watchers", "3", "--rate", "1", "--owners-own-address",
            "--reconnects", "2", "--duration", str(args.duration)])
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        abuse_result, abuse_exit, abuse_table, abuse_command = {}, None, "", None
        if abuse_proc:
            abuse_command = command(abuse_argv)
            abuse_table, abuse_err = abuse_proc.communicate(timeout=args.duration + args.abuse_margin + 120)
            abuse_exit = abuse_proc.returncode
            abuse_result = json.loads(abuse_out.read_text()) if abuse_out.exists() else {}
        figures = run.finish()
    keep_progress(out, proc.stderr)
    result = json.loads(out.read_text()) if out.exists() else {}
    seq = check(result, "watcher seq continuity")["counters"]
    figures.update(normal_figures(result, "panic location"), exit=proc.returncode, duplicates=seq.get("duplicates", 0),
                   lost=seq.get("lost", 0), events=seq.get("events", 0), table=proc.stdout, stderr=proc.stderr[-600:],
                   argv=command(argv), abuse_exit=abuse_exit, abuse_table=abuse_table, abuse_command=abuse_command,
                   abuse_client_cpu=(abuse_result.get("client") or {}).get("cpu_percent") or float("nan"),
                   abuse_connections=check(abuse_result, "abuse connections")["counters"],
                   abuse={c["name"]: c["counters"] for c in abuse_result.get("checks", [])
                          if c["name"].startswith("abuse ") and c["name"] != "abuse connections"},
                   abuse_errors=sum(c["errors"] for c in abuse_result.get("checks", [])))
    return figures


def median(values: list[float]) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def summarize(name: str, base: list[dict], loaded: list[dict], loaded_label: str) -> tuple[list[str], float]:
    p99_base, p99_loaded = median([r["p99_ms"] for r in base]), median([r["p99_ms"] for r in loaded])
    ratio = p99_loaded / p99_base if p99_base > 0 else float("inf")
    lines = []
    for label, rs in (("alone", base), (loaded_label, loaded)):
        p99s = ", ".join("%.1f" % r["p99_ms"] for r in rs)
        steals = ", ".join("%.0f%%/%.0f%%" % (100 * r["steal_server_cpu"], 100 * r["steal_client_cpu"]) for r in rs)
        loads = ", ".join("%.1f" % r["load_average"] for r in rs)
        p50, p99 = median([r["p50_ms"] for r in rs]), median([r["p99_ms"] for r in rs])
        cpu = "%.0f%% / %.0f%%" % (median([r["server_cpu"] for r in rs]), median([r["client_cpu"] for r in rs]))
        lines.append(f"| {name} {label} | {p50:.2f} | {p99:.2f} ({p99s}) | {sum(r['refused'] for r in rs)} | "
                     f"{sum(r.get('duplicates', 0) for r in rs)} | {max(r['peak_rss_mib'] for r in rs):.0f} | {cpu} | {steals} | {loads} |")
    return lines, ratio


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each measurement; the medians are reported")
    ap.add_argument("--duration", type=float, default=20, help="seconds each normal run measures")
    ap.add_argument("--subscribers", type=int, default=1_000)
    ap.add_argument("--stalled", type=int, default=10)
    ap.add_argument("--map-rate", type=int, default=1_000, help="map operations per second")
    ap.add_argument("--map-region", default="52.3,13.0,52.7,13.8",
                    help="the map's region (a city: the normal subscribers' viewports overlap, so each event is timed by several)")
    ap.add_argument("--viewport-km", type=float, default=8)
    ap.add_argument("--streams", type=int, default=1_000)
    ap.add_argument("--abuse-margin", type=float, default=10, help="seconds the abuse runs longer than the normal run (its ramp-up)")
    ap.add_argument("--abuse-args", nargs=argparse.REMAINDER, default=[],
                    help="more vigil-load abuse options (rates, counts), last on the command line")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--only", choices=("map", "panic"), help="one comparison only")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run of the script itself")
    ap.add_argument("--json-dir", type=Path, help="keep every run's vigil-load JSON here")
    ap.add_argument("--out", type=Path, help="also write the Markdown summary here")
    args = ap.parse_args()
    if args.quick:
        args.duration, args.subscribers, args.stalled, args.map_rate, args.streams = 3, 100, 2, 200, 50
        args.abuse_margin, args.repeat = 5, 1
    for exe in ("vigild", "vigil-load"):
        if not (BIN / exe).exists():
            print(f"missing {BIN / exe}: swift build -c release --product {exe}", file=sys.stderr)
            return 2
    workdir = args.json_dir or Path(tempfile.mkdtemp(prefix="vigil-abuse-"))
    workdir.mkdir(parents=True, exist_ok=True)

    runs: dict[str, list[dict]] = {"map": [], "map stalled": [], "panic": [], "panic abuse": []}
    for attempt in range(args.repeat):
        if args.only in (None, "map"):
            for stalled, key in ((0, "map"), (args.stalled, "map stalled")):
                print(f"{key} ({attempt + 1}/{args.repeat})", file=sys.stderr, flush=True)
                runs[key].append(run_map(args, workdir, stalled, attempt))
        if args.only in (None, "panic"):
            for abuse, key in ((False, "panic"), (True, "panic abuse")):
                print(f"{key} ({attempt + 1}/{args.repeat})", file=sys.stderr, flush=True)
                runs[key].append(run_panic(args, workdir, abuse, attempt))

    failures: list[str] = []
    lines = [f"vigild on CPU {args.server_cpu}, vigil-load (and the abuser) on CPU {args.client_cpu}; "
             f"{args.repeat} runs each, {args.duration:g} s measured; medians, p99 of each run in brackets; "
             "steal: server CPU / client CPU per run.", "",
             "| run | p50 ms | p99 ms (runs) | normal refused | duplicate seqs | daemon peak RSS MiB | CPU server / client | steal | load avg |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    notes: list[str] = []
    for base_key, loaded_key, name, label in (("map", "map stalled", "map", f"+ {args.stalled} stalled"),
                                              ("panic", "panic abuse", "panic", "+ abuse")):
        base, loaded = runs[base_key], runs[loaded_key]
        if not base or not loaded:
            continue
        table, ratio = summarize(name, base, loaded, label)
        lines += table
        notes.append(f"- {name}: p99 ratio {ratio:.2f}x (bound 2x)")
        if not ratio <= 2:
            failures.append(f"{name}: p99 {ratio:.2f}x the run without ({label})")
        for r in base + loaded:
            if r["exit"] != 0 or r["check_errors"] or r["refused"] or r["unexpected_closes"] or r.get("duplicates"):
                failures.append(f"{name}: a normal run was not clean (exit {r['exit']}, {r['check_errors']} check errors, "
                                f"{r['refused']} refused, {r.get('duplicates', 0)} duplicates): {r['stderr'][-300:]}")
        if name == "map":
            for r in loaded:
                s = r["stalled"]
                codes = ", ".join(f"{k[7:]}: {v}" for k, v in s.items() if k.startswith("closed ") and k != "closed by server")
                notes.append(f"  - stalled: {s.get('stalled', 0)} stopped reading, {s.get('closed by server', 0)} closed by the server"
                             + (f" ({codes})" if codes else "")
                             + f"; server slow-consumer closes {r['slow_consumer_closes']:.0f}; peak RSS {r['peak_rss_mib']:.0f} MiB")
        else:
            for r in loaded:
                if r["abuse_exit"] != 0 or r["abuse_errors"]:
                    failures.append(f"abuse run broke the contract (exit {r['abuse_exit']}, {r['abuse_errors']} errors)")
                parts = []
                for op, c in r["abuse"].items():
                    refused = ", ".join(f"{k[8:]} {v}" for k, v in c.items() if k.startswith("refused ") and v)
                    closed = ", ".join(f"{k[7:]} {v}" for k, v in c.items() if k.startswith("closed ") and v)
                    parts.append(f"{op[6:]}: {c.get('sent', 0)} sent, {c.get('ok', 0)} ok"
                                 + (f", refused {refused}" if refused else "") + (f", closed {closed}" if closed else ""))
                conns = r["abuse_connections"]
                notes.append("  - abuse: " + "; ".join(parts) + f"; {conns.get('reconnects', 0)} reconnects; "
                             f"abuser CPU {r['abuse_client_cpu']:.0f}%")
                limits = ", ".join(f"{k} {v:.0f}" for k, v in r["refusals"].items() if v)
                notes.append(f"    server refusals by limit: {limits or 'none'}")
    text = "\n".join(lines + [""] + notes) + "\n"
    print(text)
    print("commands:\n" + "\n".join(sorted({r["argv"] for rs in runs.values() for r in rs}
                                         | {r["abuse_command"] for r in runs["panic abuse"]})))
    if args.out:
        args.out.write_text(text)
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
