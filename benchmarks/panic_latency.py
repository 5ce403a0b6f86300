#!/usr/bin/env python3
"""Panic latency under load: `vigil-load panic --streams 1000 --watchers 3 --rate 10` (30,000
location deliveries a second), the daemon pinned to CPU 0 and vigil-load to CPU 1, run --repeat
times; prints each run and the medians.

    swift build -c release --product vigild && swift build -c release --product vigil-load
    python3 benchmarks/panic_latency.py [--repeat 3] [--duration 15] [--state none|interval|always]

Reported per run: update-to-watcher (`panic location`) p50 / p99 / p99.9, the owner's own ack
(`panic update ack`) p50 / p99, the daemon's and the client's CPU (% of one core), deliveries/s,
the share of the machine's CPU the hypervisor stole during the run (/proc/stat), and whether
every check passed (seq continuity, every watcher saw the end). `--state` gives the daemon a
state directory (a fresh temporary one each run) with that fsync policy: `none` (the default)
is benchmarks/vigild-bench.yaml as it is, in memory; `interval` and `always` put the journal on
the path of every update. `--vigild`/`--vigil-load` compare other builds with the same client
or daemon. `--client-tick-ms` is passed to vigil-load as `--tick-ms` when given, and
`--round-coordinates` as itself (the events' size then shrinks by the digits saved), and `--e2e`
(needs a vigild that serves end-to-end encrypted streams) as itself: sealed values of a real
one's size instead of coordinates. The daemon's
CPU per delivery (µs) is its CPU time over the measured window divided by the deliveries. `others %` is
the machine's CPU time that went to other processes during the run (a neighbour's build moves
the tail as steal does), and `runq ms/s` how long each process waited, runnable, for its CPU
per second of the run (/proc/PID/schedstat): time spent waiting, not working, and not by
Vigil's doing. `--nice -10` (as root) runs both ahead of such neighbours; `--realtime 10` (root)
runs both SCHED_FIFO, so that no neighbour can delay them and what is left is Vigil's own.

`--sched SECONDS` (root, perf) records the scheduler on both CPUs (`perf sched record -a`) for
that long from 5 s into each run, and prints, for vigild and vigil-load, how long each waited
between being woken and running (`perf sched timehist`: p50/p99/p99.9/max of "sch delay") and,
for the waits over 0.1 ms, what ran on that CPU meanwhile: `<idle>` (the virtual CPU was halted
and the host took that long to run it again), another process (with this kernel's
preemption model, `Dynamic Preempt: none` in dmesg, a SCHED_FIFO task that wakes while another
task is in the kernel waits until that task leaves it or yields), or perf itself. The recording
costs CPU and moves the tail of that run: read its latency row with that in mind.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))
sys.path.insert(0, str(REPO / "benchmarks"))

from compare_builds import cpu_times, steal_share  # noqa: E402
from vigilproc import Vigild  # noqa: E402

BIN = REPO / ".build" / "release"


def config_for(state: str, workdir: Path) -> tuple[Path, Path | None]:
    """The bench config, with a fresh state directory under the given fsync policy."""
    base = (REPO / "benchmarks" / "vigild-bench.yaml").read_text()
    if state == "none":
        return REPO / "benchmarks" / "vigild-bench.yaml", None
    directory = Path(tempfile.mkdtemp(prefix="vigil-panic-state-", dir=workdir))
    path = workdir / f"vigild-{state}.yaml"
    path.write_text(base + f"\nstate:\n  directory: \"{directory}\"\n  fsync: {state}\n")
    return path, directory


def process_cpu_s(pid: int) -> float:
    """A process's CPU time so far (user + system), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_delay_s(pid: int) -> float:
    """Seconds the process has spent runnable but waiting for a CPU (/proc/PID/schedstat, its
    main thread: both programs do their work on one thread); 0 once it is gone."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def others_share(before: list[int], after: list[int], ours_s: float) -> float:
    """The share of the machine's CPU time that went to neither vigild nor vigil-load (other
    processes, interrupts not charged to them): a busy neighbour moves latency as steal does."""
    delta = [b - a for a, b in zip(before, after)]
    total = sum(delta)
    busy = sum(delta[i] for i in (0, 1, 2, 5, 6))  # user nice system irq softirq
    return max(0.0, busy / os.sysconf("SC_CLK_TCK") - ours_s) / (total / os.sysconf("SC_CLK_TCK")) if total else 0.0


def prioritise(nice: int) -> None:
    """This script, vigild and vigil-load at `nice`, in a scheduling group of their own. With
    autogroups (/proc/sys/kernel/sched_autogroup_enabled) the kernel first shares the CPU
    between sessions, then by nice within one: a nice value alone does not put the benchmark
    ahead of another session's build. So: a new session (setsid; its processes form a new
    autogroup), that autogroup's nice, and the processes' own."""
    if os.getsid(0) != os.getpid():
        os.execvp("setsid", ["setsid", "--wait", sys.executable, *sys.argv])
    autogroup = Path("/proc/self/autogroup")
    if autogroup.exists():
        autogroup.write_text(str(nice))
    os.setpriority(os.PRIO_PROCESS, 0, nice)  # inherited by both children


def sched_delays(data: Path, pids: dict[int, str]) -> list[str]:
    """From a `perf sched record` file: per process in `pids`, its wake-up-to-run delays and, for
    those over 0.1 ms, what ran on the CPU before it (by command name), with their sum."""
    text = subprocess.run(["perf", "sched", "timehist", "-i", str(data)], capture_output=True, text=True).stdout
    previous: dict[str, str] = {}  # cpu -> the task that ran last on it
    delays: dict[int, list[float]] = {pid: [] for pid in pids}
    after: dict[tuple[int, str], list[float]] = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 6 or not f[1].startswith("[") or not f[0][0].isdigit():
            continue
        cpu, task = f[1], f[2]
        try:
            delay = float(f[4])
        except ValueError:
            continue
        ids = task[task.rfind("[") + 1:-1].split("/") if task.endswith("]") else []
        tid = int(ids[0]) if ids and ids[0].isdigit() else -1
        if tid in delays:
            delays[tid].append(delay)
            if delay > 0.1:
                before = previous.get(cpu, "?")
                before = before[:before.rfind("[")] if "[" in before else before
                after.setdefault((tid, before), []).append(delay)
        previous[cpu] = task
    lines = []
    for pid, name in pids.items():
        d = sorted(delays[pid])
        if not d:
            continue
        q = lambda x: d[min(len(d) - 1, int(len(d) * x))]
        lines.append(f"  {name}: {len(d)} wake-ups, sch delay p50 {q(0.5):.3f} p99 {q(0.99):.3f} p99.9 {q(0.999):.3f} max {d[-1]:.3f} ms")
        for (tid, before), v in sorted(after.items(), key=lambda kv: -sum(kv[1])):
            if tid == pid:
                lines.append(f"    over 0.1 ms after {before}: {len(v)}, {sum(v):.2f} ms in all, max {max(v):.2f} ms")
    return lines


def run_once(args, workdir: Path) -> dict:
    config, state_dir = config_for(args.state, workdir)
    daemon = Vigild(Path(args.vigild), config, listen="127.0.0.1:0")
    daemon.start()
    os.sched_setaffinity(daemon.pid, {0})
    out = workdir / "run.json"
    if out.exists():
        out.unlink()
    if args.realtime:
        os.sched_setscheduler(daemon.pid, os.SCHED_FIFO, os.sched_param(args.realtime))
    argv = (["chrt", "-f", str(args.realtime)] if args.realtime else []) + ["taskset", "-c", "1", args.vigil_load, "panic", "--streams", str(args.streams), "--watchers", "3",
            "--rate", str(args.rate), "--duration", str(args.duration), "--url", f"ws://127.0.0.1:{daemon.port}/v1",
            "--server-pid", str(daemon.pid), "--json", str(out), "--no-progress"]
    if args.client_tick_ms is not None:
        argv += ["--tick-ms", str(args.client_tick_ms)]
    if args.round_coordinates:
        argv.append("--round-coordinates")
    if args.e2e:
        argv.append("--e2e")
    before, daemon_before, children_before = cpu_times(), process_cpu_s(daemon.pid), children_cpu_s()
    daemon_wait, started = run_delay_s(daemon.pid), time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client_wait = 0.0
    perf, perf_data = None, workdir / "sched.data"
    while proc.poll() is None:  # the client's run-queue wait, read until it exits
        client_wait = run_delay_s(proc.pid) or client_wait
        if args.sched and perf is None and time.monotonic() - started >= 5:
            perf = subprocess.Popen(["perf", "sched", "record", "-a", "-o", str(perf_data), "--", "sleep", str(args.sched)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.2)
    stderr = proc.stderr.read()
    elapsed = time.monotonic() - started
    daemon_wait = run_delay_s(daemon.pid) - daemon_wait
    after = cpu_times()
    steal = steal_share(before, after)
    others = others_share(before, after, process_cpu_s(daemon.pid) - daemon_before + children_cpu_s() - children_before)
    client_pid, daemon_pid = proc.pid, daemon.pid  # chrt and taskset exec: vigil-load keeps the pid
    daemon.stop()
    sched = []
    if perf is not None:
        perf.wait()
        sched = sched_delays(perf_data, {daemon_pid: "vigild", client_pid: "vigil-load"})
    if state_dir is not None:
        shutil.rmtree(state_dir, ignore_errors=True)
    if not out.exists():
        raise SystemExit(f"vigil-load wrote no report (exit {proc.returncode}):\n{stderr[-2000:]}")
    r = json.loads(out.read_text())
    loc, ack = r["latency_ns"]["panic location"], r["latency_ns"]["panic update ack"]
    checks_ok = all(c["errors"] == 0 for c in r["checks"])
    return dict(p50=loc["p50"] / 1e6, p99=loc["p99"] / 1e6, p999=loc["p99_9"] / 1e6,
                ack50=ack["p50"] / 1e6, ack99=ack["p99"] / 1e6,
                server=r.get("server", {}).get("cpu_percent", float("nan")),
                us_per_delivery=r.get("server", {}).get("cpu_s", float("nan"))
                / max(1.0, r["messages"]["delivered_per_s"] * r["duration_s"]) * 1e6,
                client=r.get("client", {}).get("cpu_percent", float("nan")),
                rate=r["messages"]["delivered_per_s"], steal=steal * 100, others=others * 100,
                server_wait=daemon_wait / elapsed * 1e3, client_wait=client_wait / elapsed * 1e3,
                ok=checks_ok and proc.returncode == 0, sched=sched)


COLUMNS = [("p50", "loc p50 ms", "{:.2f}"), ("p99", "loc p99 ms", "{:.2f}"), ("p999", "loc p99.9 ms", "{:.2f}"),
           ("ack50", "ack p50 ms", "{:.2f}"), ("ack99", "ack p99 ms", "{:.2f}"), ("server", "vigild %", "{:.0f}"),
           ("us_per_delivery", "vigild µs/delivery", "{:.2f}"),
           ("client", "client %", "{:.0f}"), ("rate", "deliveries/s", "{:,.0f}"), ("steal", "steal %", "{:.1f}"),
           ("others", "others %", "{:.0f}"), ("server_wait", "vigild runq ms/s", "{:.0f}"),
           ("client_wait", "client runq ms/s", "{:.0f}")]


def row(label: str, r: dict) -> str:
    cells = [fmt.format(r[k]) for k, _, fmt in COLUMNS]
    if "ok" in r:
        cells.append("yes" if r["ok"] else "NO")
    return "| " + " | ".join([label, *cells]) + " |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=10)
    ap.add_argument("--state", choices=["none", "interval", "always"], default="none")
    ap.add_argument("--client-tick-ms", type=int)
    ap.add_argument("--e2e", action="store_true",
                    help="end-to-end encrypted streams (vigil-load --e2e): sealed values instead of coordinates")
    ap.add_argument("--round-coordinates", action="store_true",
                    help="owners send 7-decimal coordinates (vigil-load --round-coordinates): smaller events")
    ap.add_argument("--nice", type=int, default=0,
                    help="run both at this nice value (root: e.g. -10 on a machine shared with builds; see 'others %%')")
    ap.add_argument("--realtime", type=int, default=0, metavar="PRIORITY",
                    help="run both SCHED_FIFO at this priority (root): what is left of the tail is Vigil's own")
    ap.add_argument("--sched", type=int, default=0, metavar="SECONDS",
                    help="record the scheduler (perf sched, root) for SECONDS from 5 s into each run and print who delayed the two processes")
    ap.add_argument("--vigild", default=str(BIN / "vigild"))
    ap.add_argument("--vigil-load", default=str(BIN / "vigil-load"))
    args = ap.parse_args()
    if args.nice:
        prioritise(args.nice)
    print(f"panic {args.streams} streams x 3 watchers at {args.rate:g} Hz, state: {args.state}, nice {args.nice}, "
          f"{'SCHED_FIFO ' + str(args.realtime) if args.realtime else 'SCHED_OTHER'}, "
          f"vigild on CPU 0, vigil-load on CPU 1, {args.duration} s x {args.repeat}")
    print("| run | " + " | ".join(h for _, h, _ in COLUMNS) + " | checks |")
    print("|" + " --- |" * (len(COLUMNS) + 2))
    results = []
    with tempfile.TemporaryDirectory(prefix="vigil-panic-latency-") as tmp:
        for i in range(args.repeat):
            r = run_once(args, Path(tmp))
            results.append(r)
            print(row(str(i + 1), r), flush=True)
            for line in r["sched"]:
                print(line, file=sys.stderr, flush=True)
    median = {k: statistics.median(r[k] for r in results) for k, _, _ in COLUMNS}
    print(row("median", median))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
