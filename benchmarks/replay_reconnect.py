#!/usr/bin/env python3
"""A contact group reconnecting at once after a network blip: WATCHERS connections of one panic
stream each ask for its whole trail (`panic.watch` with `since`) in one burst; how long until the
last byte of the last replay, and what it cost the daemon (issue 23).

    swift build -c release --product vigild
    python3 benchmarks/replay_reconnect.py [--watchers 100] [--events 10000] [--since 0] [--repeat 3]

Each run starts a fresh vigild (benchmarks/vigild-bench.yaml with `panic.history_events` =
EVENTS) pinned to CPU 0, makes one stream of EVENTS events (seq 1 is the start, then updates
pipelined from Python, not timed), connects the watchers (upgrade and welcome, not timed), and
runs benchmarks/replay_client.c pinned to CPU 1: it sends every `panic.watch` at once and reads
until each watcher has its reply and every event after `since`, checking each seq in place.

Reported per run: time to the last byte of the last watcher (from the first request), the median
and first watcher's, events received (must be WATCHERS × (EVENTS − since)) and seq errors (must be
0), the daemon's CPU time over the replay and its resident memory: RSS just before, and the peak
(VmHWM) after, whose difference is what the replies and replays held at most; the client's CPU,
the CPU the rest of the machine used meanwhile (others), and the share the hypervisor stole
(/proc/stat); and how long another client of the daemon waited for its answers meanwhile (the
client's probe connection: p50, p99, max), which is what a burst of replays costs everyone else. `--since EVENTS-1` replays one event each: what remains is the cost of the replies
(their trail, up to 1 MiB each), apart from the replays. Then the medians. `--vigild` measures
another build with the same client (an older build shows its losses as seq errors).
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
sys.path.insert(0, str(REPO / "benchmarks"))

from compare_builds import cpu_times, steal_share  # noqa: E402
from vigilproc import Vigild  # noqa: E402


def process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def busy_s(before: list[int], after: list[int]) -> float:
    """CPU seconds the whole machine spent busy (not idle, not iowait, not stolen) between two /proc/stat readings."""
    delta = [b - a for a, b in zip(before, after)]
    return (sum(delta) - delta[3] - delta[4] - delta[7]) / os.sysconf("SC_CLK_TCK")


def build_client(folder: Path) -> Path:
    out = folder / "replay_client"
    subprocess.run(["cc", "-O2", "-o", str(out), str(REPO / "benchmarks" / "replay_client.c")], check=True)
    return out


def make_stream(port: int, events: int) -> tuple[str, str]:
    """A stream of `events` events; returns (stream, watch token)."""
    from test_panic import PanicClient
    owner = PanicClient(port, timeout=60)
    st = owner.start(lat=10.0, lon=20.0, watchers=1)
    stream = st["stream"]
    for start in range(2, events + 1, 500):
        seqs = range(start, min(start + 500, events + 1))
        refs = [owner.send_request("panic.update", stream=stream, lat=10 + s / 1e5, lon=20.0, accuracy_m=8.5, heading=123.4)
                for s in seqs]
        got = [owner.await_reply(r)["seq"] for r in refs]
        assert got == list(seqs), got[:3]
    owner.close()  # the stream stays active: its owner is a phone that went away
    return stream, st["watch_tokens"][0]


def one_run(args, client: Path, workdir: Path) -> dict:
    config = workdir / "vigild-replay.yaml"
    config.write_text((REPO / "benchmarks" / "vigild-bench.yaml").read_text().replace(
        "panic:\n  max_streams: 100000", f"panic:\n  max_streams: 100000\n  history_events: {args.events}"))
    daemon = Vigild(Path(args.vigild), config, listen="127.0.0.1:0")
    daemon.start()
    try:
        os.sched_setaffinity(daemon.pid, {0})
        stream, token = make_stream(daemon.port, args.events)
        time.sleep(0.5)  # let the updates' garbage settle before the RSS reading (not a synchronisation)
        rss_before = status_kib(daemon.pid, "VmRSS")
        hwm_before = status_kib(daemon.pid, "VmHWM")
        cpu_before, stat_before = process_cpu_s(daemon.pid), cpu_times()
        proc = subprocess.run(["taskset", "-c", "1", str(client), str(daemon.port), stream, token, str(args.watchers),
                               str(args.since), str(args.events), "300"], capture_output=True, text=True, timeout=400)
        cpu_after, stat_after = process_cpu_s(daemon.pid), cpu_times()
        result = json.loads(proc.stdout)
        result.update(
            daemon_cpu_s=round(cpu_after - cpu_before, 3),
            rss_before_mib=round(rss_before / 1024, 1),
            peak_rss_mib=round(status_kib(daemon.pid, "VmHWM") / 1024, 1),
            peak_before_mib=round(hwm_before / 1024, 1),
            steal=round(steal_share(stat_before, stat_after) * 100, 2),
            # CPU the rest of the machine used meanwhile (a neighbour's build stretches the time
            # to the last byte without changing Vigil's own cost)
            others_cpu_s=round(busy_s(stat_before, stat_after) - (cpu_after - cpu_before) - result["client_cpu_s"], 2),
            exit=proc.returncode,
        )
        if proc.returncode != 0:
            result["stderr"] = proc.stderr[-500:]
        return result
    finally:
        daemon.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--watchers", type=int, default=100)
    ap.add_argument("--events", type=int, default=10000)
    ap.add_argument("--since", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--vigild", default=str(REPO / ".build" / "release" / "vigild"))
    args = ap.parse_args()
    os.sched_setaffinity(0, {1})  # this driver and the client on CPU 1, the daemon on CPU 0
    workdir = Path(tempfile.mkdtemp(prefix="vigil-replay-"))
    client = build_client(workdir)
    runs = []
    print(f"{args.watchers} watchers x {args.events - args.since} events (since {args.since}), vigild {args.vigild}")
    print(f"{'run':>3} {'last ms':>9} {'median':>9} {'first':>9} {'events':>9} {'errors':>6} {'MB in':>7} "
          f"{'vigild CPU s':>12} {'RSS before':>10} {'peak RSS':>9} {'probe p50/p99/max ms':>22} {'client CPU s':>12} {'others CPU s':>12} {'steal %':>7}")
    for i in range(args.repeat):
        r = one_run(args, client, workdir)
        runs.append(r)
        print(f"{i + 1:>3} {r['last_ms']:>9.1f} {r['median_ms']:>9.1f} {r['first_ms']:>9.1f} {r['events']:>9} "
              f"{r['seq_errors'] + r['unfinished']:>6} {r['bytes'] / 1e6:>7.1f} {r['daemon_cpu_s']:>12.3f} "
              f"{r['rss_before_mib']:>9.1f}M {r['peak_rss_mib']:>8.1f}M "
              f"{'%.2f/%.1f/%.1f' % (r['probe_p50_ms'], r['probe_p99_ms'], r['probe_max_ms']):>22} {r['client_cpu_s']:>12.3f} {r['others_cpu_s']:>12.2f} {r['steal']:>7.2f}"
              + (f"  ({r.get('stderr', '').strip()[:200]})" if r["exit"] else ""))
    med = lambda key: statistics.median(r[key] for r in runs)  # noqa: E731
    print(f"median: last byte {med('last_ms'):.1f} ms, median watcher {med('median_ms'):.1f} ms, "
          f"vigild CPU {med('daemon_cpu_s'):.3f} s ({med('daemon_cpu_s') * 1e6 / max(1, med('events')):.2f} µs per replayed event), "
          f"RSS {med('rss_before_mib'):.1f} -> peak {med('peak_rss_mib'):.1f} MiB, "
          f"another client's answers p99 {med('probe_p99_ms'):.1f} ms, max {med('probe_max_ms'):.1f} ms, client CPU {med('client_cpu_s'):.3f} s")
    expected = args.watchers * (args.events - args.since)
    exact = all(r["events"] == expected and r["seq_errors"] == 0 and r["unfinished"] == 0 for r in runs)
    print("every replay exact" if exact else f"NOT EXACT: expected {expected} events per run")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
