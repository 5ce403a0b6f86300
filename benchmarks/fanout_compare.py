#!/usr/bin/env python3
"""Fan-out and idle memory of vigild next to a reference server, in one run, with one client.

The client is ``benchmarks/fanout_client.c`` (built here with the system C compiler): one epoll
thread that scans frames in place, so that it keeps headroom while the server is at 100% of its
core; its own CPU is printed next to every result. The server runs on ``--server-cpu``, the
client on ``--client-cpu`` (taskset), and the steal time of both CPUs over each measured window
is reported, because this machine is shared.

Fan-out: ``--subscribers`` connections subscribe to one viewport and ``--publishers`` keep
``W`` ``pin.create`` requests each in flight (closed loop), for each window size in
``--windows``: a server's best window is where its batching works best, and servers differ
there. Each run reports deliveries/s, the server's CPU per delivery, the publish-to-delivery
latency p50/p99, and checks that every subscriber got exactly every acknowledged publish, in
each publisher's order. Runs alternate between the servers (vigild, reference, vigild, ...)
and each figure is the median of ``--repeat`` runs.

Idle: ``--idle`` connections complete the upgrade and stay; the server's RSS growth per
connection is reported, counted from after one connection has come and gone (so what a server
sets up once, on its first handshake, is not divided among the connections).

The reference server is any program started by ``--reference`` (a command with ``{port}`` and
``{size}`` in it) that prints a line containing "listening on" when ready and speaks this
subset of Vigil's protocol: a text message containing ``"subscribe"`` subscribes the connection
to one topic and is answered with a text message containing ``"type":"ok"``; any other text
message is published to that topic as an event of ``{size}`` bytes that contains the received
message (its ``"title":"t...`` carries the send time), and answered with ``{"type":"ok"}``.
``benchmarks/reference/uws_peer.cpp`` is such a peer on uWebSockets' pub/sub (our few lines);
``benchmarks/reference/build_uws.sh`` fetches uWebSockets and uSockets (or takes local
checkouts) and builds it into the git-ignored ``benchmarks/reference/.build-uws/``.

``--callgrind`` runs each server under callgrind and reports the user-space instructions per
delivery in the measured window: on a shared machine the robust figure (rates are then tiny).

    swift build -c release --product vigild
    python3 benchmarks/fanout_compare.py                                  # vigild alone
    benchmarks/reference/build_uws.sh
    python3 benchmarks/fanout_compare.py --reference 'benchmarks/reference/.build-uws/uws_peer {port} {size}' --name uWebSockets
    python3 benchmarks/fanout_compare.py --reference '...' --name uWebSockets --callgrind --windows 8 --repeat 1
    python3 benchmarks/fanout_compare.py --idle-only --idle 15000                 # idle RSS per connection only
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
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
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def build_client(folder: Path) -> Path:
    out = folder / "fanout_client"
    subprocess.run(["cc", "-O2", "-o", str(out), str(REPO / "benchmarks" / "fanout_client.c")], check=True)
    return out


def process_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK  # utime + stime


def process_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_times(cpu: int) -> tuple[int, int]:
    """(total, steal) jiffies of one CPU."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                v = [int(x) for x in line.split()[1:]]
                return sum(v[:8]), v[7]
    raise RuntimeError(f"no cpu{cpu} in /proc/stat")


class CallgrindVigild(Vigild):
    """vigild under callgrind (collecting from the start; the window's counters are zeroed and dumped)."""

    def __init__(self, binary: Path, out: str):
        # Swift's hashing is seeded per process; a fixed seed keeps the count from moving with it.
        super().__init__(binary, CONFIG, listen="127.0.0.1:0", env={"SWIFT_DETERMINISTIC_HASHING": "1"})
        self.out = out

    def argv(self) -> list[str]:
        return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out}"] + super().argv()


def callgrind_prefix(out: str) -> list[str]:
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] if out else []


def callgrind_window_instructions(pid: int, out: str, keep: Path | None = None) -> int:
    """Dumps the counters since the window's start (``callgrind_control -z`` there) and returns
    the instructions executed in the window, all threads; ``keep``: copies the dumps there (for
    ``callgrind_annotate``)."""
    before = set(Path(out).parent.glob(Path(out).name + "*"))
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    dumps = sorted(set(Path(out).parent.glob(Path(out).name + "*")) - before, key=lambda f: f.stat().st_mtime)
    total = 0
    for dump in dumps:  # one per thread with --separate-threads; one file otherwise
        for line in dump.read_text(errors="replace").splitlines():
            if line.startswith("summary:") or line.startswith("totals:"):
                total += int(line.split()[1])
                break
    if not dumps:
        raise RuntimeError("callgrind_control -d left no dump")
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
        for dump in dumps:
            shutil.copy(dump, keep / f"{dump.name}.{int(time.time())}")
    return total


class Server:
    """vigild, or the reference command, started pinned to a CPU (optionally under callgrind)."""

    def __init__(self, name: str, args, cpu: int, callgrind_out: str = ""):
        self.name, self.args, self.cpu = name, args, cpu
        self.callgrind_out = callgrind_out
        self.pid = self.port = None
        self._daemon = self._proc = None

    def start(self, size: int) -> "Server":
        if self.name == "vigild":
            if self.callgrind_out:
                d = CallgrindVigild(self.args, self.callgrind_out)
                d.start(ready_timeout=60)
            else:
                d = Vigild(self.args, CONFIG, listen="127.0.0.1:0")
                d.start()
            subprocess.run(["taskset", "-a", "-c", "-p", str(self.cpu), str(d.pid)], check=True, capture_output=True)
            self._daemon, self.pid, self.port = d, d.pid, d.port
            return self
        probe = socket.socket()  # a free port for the reference
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        argv = shlex.split(self.args.format(port=port, size=size))
        self._proc = subprocess.Popen(["taskset", "-c", str(self.cpu)] + callgrind_prefix(self.callgrind_out) + argv, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + (60 if self.callgrind_out else 15)
        for line in self._proc.stdout:
            if "listening on" in line:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not say it listens")
        self.pid, self.port = self._proc.pid, port
        return self

    def stop(self) -> None:
        if self._daemon:
            self._daemon.stop()
        if self._proc:
            self._proc.terminate()
            self._proc.wait(10)
        self._daemon = self._proc = None


def fanout_run(server: Server, client: Path, args, window: int, size: int) -> dict:
    server.start(size)
    try:
        argv = ["taskset", "-c", str(args.client_cpu), str(client), "--port", str(server.port),
                "--subscribers", str(args.subscribers), "--publishers", str(args.publishers),
                "--window", str(window), "--warmup", str(args.warmup), "--duration", str(args.duration),
                "--description-bytes", str(args.description_bytes)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        cpu0 = steal0 = None
        result = None
        for line in proc.stdout:
            line = line.strip()
            if line == "window start":
                if server.callgrind_out:
                    subprocess.run(["callgrind_control", "-z", str(server.pid)], check=True, capture_output=True)
                cpu0 = process_cpu(server.pid)
                steal0 = (cpu_times(args.server_cpu), cpu_times(args.client_cpu))
            elif line == "window end":
                cpu1 = process_cpu(server.pid)
                if server.callgrind_out:
                    instructions = callgrind_window_instructions(server.pid, server.callgrind_out, args.callgrind_keep)
                steal1 = (cpu_times(args.server_cpu), cpu_times(args.client_cpu))
            elif line.startswith("{"):
                result = json.loads(line)
        proc.wait(60)
        if result is None:
            raise RuntimeError(f"client against {server.name} failed: {proc.stderr.read()[-2000:]}")
        secs = result["seconds"]
        result["server_cpu"] = (cpu1 - cpu0) / secs
        result["server_us_per_delivery"] = (cpu1 - cpu0) * 1e6 / max(1, result["deliveries"])
        result["steal_server_cpu"] = (steal1[0][1] - steal0[0][1]) / max(1, steal1[0][0] - steal0[0][0])
        result["steal_client_cpu"] = (steal1[1][1] - steal0[1][1]) / max(1, steal1[1][0] - steal0[1][0])
        result["exact"] = proc.returncode == 0
        if server.callgrind_out:
            result["instructions_per_delivery"] = instructions / max(1, result["deliveries"])
        return result
    finally:
        server.stop()


def idle_connections(server: Server, client: Path, args, count: int) -> subprocess.Popen:
    """``count`` connections upgraded (welcome read); they stay until the returned client's stdin closes."""
    proc = subprocess.Popen(["taskset", "-c", str(args.client_cpu), str(client), "--port", str(server.port),
                             "--idle", str(count)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        raise RuntimeError(f"idle client against {server.name}: {line!r}")
    return proc


def idle_run(server: Server, client: Path, args, size: int) -> float:
    server.start(size)
    try:
        # One connection first, closed before the "before" figure: what a server sets up on its
        # first handshake, once (vigild: libcrypto's code pages and provider for the SHA-1, about
        # 2.2 MB of RSS), is not a cost of each connection.
        warm = idle_connections(server, client, args, 1)
        warm.stdin.close()
        warm.wait(30)
        time.sleep(0.5)  # the server handles the close (nothing marks that moment)
        before = process_rss_kib(server.pid)
        proc = idle_connections(server, client, args, args.idle)
        time.sleep(1.0)  # the server settles (no event marks "every welcome flushed")
        after = process_rss_kib(server.pid)
        proc.stdin.close()
        proc.wait(30)
        return (after - before) * 1024 / args.idle
    finally:
        server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vigild", type=Path, default=REPO / ".build" / "release" / "vigild")
    ap.add_argument("--reference", help="command starting the reference server, with {port} and {size}")
    ap.add_argument("--name", default="reference", help="the reference server's name in the table")
    ap.add_argument("--windows", default="1,2,3,8", help="publishes in flight per publisher, comma-separated")
    ap.add_argument("--subscribers", type=int, default=1000)
    ap.add_argument("--publishers", type=int, default=10)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--idle", type=int, default=15000, help="idle connections (0: skip)")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--description-bytes", type=int, default=9,
                    help="the pins' description length; 9 makes vigild's pin.added event 274 bytes")
    ap.add_argument("--callgrind", action="store_true",
                    help="run the servers under callgrind and report instructions per delivery in the window "
                         "(the robust figure on a shared machine; rates are then ~50x lower; skips the idle runs)")
    ap.add_argument("--callgrind-keep", type=Path,
                    help="with --callgrind: copy each window's dumps into this folder (for callgrind_annotate)")
    ap.add_argument("--idle-only", action="store_true", help="only the idle runs (no fan-out)")
    ap.add_argument("--out", type=Path, help="write every run as JSON here")
    args = ap.parse_args()
    if args.callgrind:
        args.idle = 0
    windows = [] if args.idle_only else [int(w) for w in args.windows.split(",")]

    with tempfile.TemporaryDirectory() as tmp:
        client = build_client(Path(tmp))
        if args.callgrind:
            # valgrind 3.19 cannot read the DWARF Swift 6 emits; the symbol table (kept) is all callgrind needs.
            stripped = Path(tmp) / "vigild"
            subprocess.run(["objcopy", "--strip-debug", str(args.vigild), str(stripped)], check=True)
            args.vigild = stripped
        cg = lambda name: str(Path(tmp) / f"callgrind.{name}") if args.callgrind else ""  # noqa: E731
        servers = [Server("vigild", args.vigild, args.server_cpu, cg("vigild"))]
        if args.reference:
            servers.append(Server(args.name, args.reference, args.server_cpu, cg("reference")))
        runs: dict[tuple[str, int], list[dict]] = {}
        size = 0
        for r in range(args.repeat):
            for window in windows:
                for server in servers:
                    result = fanout_run(server, client, args, window, size or 300)
                    if server.name == "vigild" and not size:
                        size = round(result["event_bytes"])
                    runs.setdefault((server.name, window), []).append(result)
                    print(f"run {r + 1} {server.name:>12} W={window}: {result['deliveries_per_s'] / 1e6:.2f} M/s, "
                          f"server {result['server_cpu']:.0%} ({result['server_us_per_delivery']:.3f} us/delivery), "
                          f"client {result['client_cpu']:.0%}, p50 {result['p50_us'] / 1000:.1f} ms, "
                          f"p99 {result['p99_us'] / 1000:.1f} ms, steal {result['steal_server_cpu']:.0%}/"
                          f"{result['steal_client_cpu']:.0%}, exact {result['exact']}"
                          + (f", {result['instructions_per_delivery']:.0f} instructions/delivery" if args.callgrind else ""),
                          flush=True)
        idle: dict[str, list[float]] = {}
        if args.idle:
            for r in range(args.repeat):
                for server in servers:
                    idle.setdefault(server.name, []).append(idle_run(server, client, args, size or 300))
                    print(f"idle run {r + 1} {server.name:>12}: {idle[server.name][-1]:.0f} B per connection", flush=True)

    med = lambda xs: statistics.median(xs)  # noqa: E731
    print(f"\nmedians of {args.repeat} runs; {args.subscribers} subscribers, {args.publishers} publishers, "
          f"{size}-byte events; server on CPU {args.server_cpu}, client on CPU {args.client_cpu}")
    print(f"{'server':>12} {'W':>3} {'deliveries/s':>13} {'server CPU':>10} {'us/delivery':>11} {'client CPU':>10} "
          f"{'p50 ms':>7} {'p99 ms':>7} {'steal':>9} exact")
    best: dict[str, tuple[float, int]] = {}
    for (name, window), rs in runs.items():
        rate = med([x["deliveries_per_s"] for x in rs])
        if rate > best.get(name, (0, 0))[0]:
            best[name] = (rate, window)
        print(f"{name:>12} {window:>3} {rate / 1e6:>11.2f} M {med([x['server_cpu'] for x in rs]):>10.0%} "
              f"{med([x['server_us_per_delivery'] for x in rs]):>11.3f} {med([x['client_cpu'] for x in rs]):>10.0%} "
              f"{med([x['p50_us'] for x in rs]) / 1000:>7.1f} {med([x['p99_us'] for x in rs]) / 1000:>7.1f} "
              f"{med([x['steal_server_cpu'] for x in rs]):>4.0%}/{med([x['steal_client_cpu'] for x in rs]):<4.0%} "
              f"{all(x['exact'] for x in rs)}"
              + (f" {med([x['instructions_per_delivery'] for x in rs]):>8.0f} instr/delivery" if args.callgrind else ""))
    if args.reference and runs:
        v, ref = best["vigild"], best[args.name]
        print(f"\nbest window: vigild {v[0] / 1e6:.2f} M/s (W={v[1]}), {args.name} {ref[0] / 1e6:.2f} M/s (W={ref[1]}): "
              f"ratio vigild/{args.name} = {v[0] / ref[0]:.2f}")
        for window in windows:
            a, b = med([x["deliveries_per_s"] for x in runs[("vigild", window)]]), \
                med([x["deliveries_per_s"] for x in runs[(args.name, window)]])
            print(f"  W={window}: ratio {a / b:.2f}")
    for name, values in idle.items():
        print(f"idle: {name} {med(values):.0f} B per connection at {args.idle} connections")
    if args.out:
        args.out.write_text(json.dumps({"runs": {f"{k[0]} W={k[1]}": v for k, v in runs.items()}, "idle": idle,
                                        "size": size}, indent=1))
    exact = all(x["exact"] for rs in runs.values() for x in rs)
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
