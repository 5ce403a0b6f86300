#!/usr/bin/env python3
"""The live map's fan-out over 1 and 2 cluster nodes, same load, same run: `vigil-load map` with
one `--url` per node (subscribers and publishers spread round robin, the several-node
exactness checks on), a `nats-server -js` carrying the replicated log; prints each run and the
medians over --repeat runs.

    swift build -c release --product vigild && swift build -c release --product vigil-load
    python3 benchmarks/cluster_nodes.py [--repeat 3] [--subscribers 1000] [--publishers 10] [--rate 200] [--duration 10]

Per setup and run: total deliveries/s (vigil-load), each node's CPU (% of one core over the run,
from /proc/PID/stat), each node's CPU per delivery it made (µs), nats-server's CPU, vigil-load's
CPU, steal (/proc/stat). Pinning on a 2-core machine: with 1 node, the node on CPU 0 and
nats-server + vigil-load on CPU 1; with 2 nodes, one node per CPU and nats-server + vigil-load
unpinned, so the second node shares its CPU with them. What this machine can show is therefore
the work each node does (its CPU per delivery, its share of the fan-out), not the throughput a
second machine would add; the offered load is the same in both setups, so deliveries/s should be
equal, and the per-node CPU is what a second node takes off the first.
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
from natsproc import NatsServer  # noqa: E402
from vigilproc import Vigild, write_config  # noqa: E402
from wsraw import http_get  # noqa: E402

BIN = REPO / ".build" / "release"
TICKS = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def taskset(cpu: str, pid: int) -> None:
    subprocess.run(["taskset", "-apc", cpu, str(pid)], check=True, capture_output=True)


def node_config(workdir: Path, name: str, nats_url: str) -> Path:
    cfg = {
        "session": {"messages_per_second": 100000, "message_burst": 1000000, "subscribes_per_second": 100000,
                    "subscribe_burst": 1000000},
        "pins": {"writes_per_minute": 1000000, "write_burst": 1000000, "max_subscribe_pins": 10000},
        "limits": {"pin_create_burst": 100000000, "pin_creates_per_hour": 100000000, "live_pins_per_address": 100000000,
                   "subscribe_burst": 100000000, "subscribes_per_second": 10000000},
        "cluster": {"urls": [nats_url], "name": "BENCH", "node_id": name},
    }
    return write_config(workdir / f"{name}.yaml", cfg)


def run_setup(nodes_n: int, args, workdir: Path) -> dict:
    nats = NatsServer(workdir / f"nats-{nodes_n}-{time.monotonic_ns()}").start()
    nodes: list[Vigild] = []
    try:
        for i in range(nodes_n):
            d = Vigild(BIN / "vigild", node_config(workdir, f"n{i}", nats.url))
            d.start()
            nodes.append(d)
        for d in nodes:
            deadline = time.monotonic() + 30
            while not json.loads(http_get(d.admin_port, "/healthz").body)["cluster"]["writable"]:
                assert time.monotonic() < deadline, "node not writable"
                time.sleep(0.05)
        if nodes_n == 1:
            taskset("0", nodes[0].pid)
            taskset("1", nats.proc.pid)
            client_cpu = ["taskset", "-c", "1"]
        else:
            taskset("0", nodes[0].pid)
            taskset("1", nodes[1].pid)
            client_cpu = []
        out = workdir / "load.json"
        argv = client_cpu + [str(BIN / "vigil-load"), "map", "--subscribers", str(args.subscribers), "--publishers",
                             str(args.publishers), "--rate", str(args.rate), "--duration", str(args.duration),
                             "--region", args.region, "--viewport-km", str(args.viewport_km),
                             "--json", str(out), "--no-progress"]
        for d in nodes:
            argv += ["--url", f"ws://127.0.0.1:{d.port}/v1"]
        before_nodes = [proc_cpu_s(d.pid) for d in nodes]
        before_nats = proc_cpu_s(nats.proc.pid)
        before = cpu_times()
        started = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=args.duration * 10 + 120)
        elapsed = time.monotonic() - started
        steal = steal_share(before, cpu_times())
        node_cpu = [(proc_cpu_s(d.pid) - b) / elapsed for d, b in zip(nodes, before_nodes)]
        nats_cpu = (proc_cpu_s(nats.proc.pid) - before_nats) / elapsed
        result = json.loads(out.read_text())
        errors = sum(c["errors"] for c in result["checks"])
        if errors or proc.returncode:
            print(proc.stdout[-3000:], proc.stderr[-2000:], file=sys.stderr)
        duration = result.get("duration_s") or args.duration
        per_node = [n["delivered"] for n in result["nodes"]]
        return {
            "exit": proc.returncode, "errors": errors,
            "deliveries_s": sum(per_node) / duration,
            "node_cpu": node_cpu,
            "us_per_delivery": [c * elapsed / n * 1e6 if n else 0.0 for c, n in zip(node_cpu, per_node)],
            "nats_cpu": nats_cpu, "client_cpu": result.get("client", {}).get("cpu_percent", float("nan")) / 100,
            "steal": steal,
        }
    finally:
        for d in nodes:
            d.stop()
        nats.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--subscribers", type=int, default=1000)
    ap.add_argument("--publishers", type=int, default=10)
    ap.add_argument("--rate", type=int, default=200)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--region", default="52.45,13.30,52.55,13.50", help="where the map's pins and viewports are (one city district)")
    ap.add_argument("--viewport-km", type=float, default=8.0)
    args = ap.parse_args()
    results: dict[int, list[dict]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="vigil-cluster-nodes-") as tmp:
        for run in range(args.repeat):
            for n in (1, 2):
                r = run_setup(n, args, Path(tmp))
                results[n].append(r)
                cpus = " ".join(f"{c * 100:.0f}%" for c in r["node_cpu"])
                per = " ".join(f"{u:.2f}" for u in r["us_per_delivery"])
                print(f"run {run + 1} nodes={n}: {r['deliveries_s']:,.0f} deliveries/s, node CPU {cpus}, µs/delivery {per}, "
                      f"nats {r['nats_cpu'] * 100:.0f}%, vigil-load {r['client_cpu'] * 100:.0f}%, steal {r['steal'] * 100:.2f}%, "
                      f"exit {r['exit']}, check errors {r['errors']}", flush=True)
    print(f"\nmedians of {args.repeat} runs (map, {args.subscribers} subscribers, {args.publishers} publishers at {args.rate} ops/s):")
    for n in (1, 2):
        rs = results[n]
        d = statistics.median(r["deliveries_s"] for r in rs)
        cpu = [statistics.median(r["node_cpu"][i] for r in rs) * 100 for i in range(n)]
        us = [statistics.median(r["us_per_delivery"][i] for r in rs) for i in range(n)]
        print(f"  {n} node(s): {d:,.0f} deliveries/s; node CPU {', '.join(f'{c:.0f}%' for c in cpu)}; "
              f"µs per delivery {', '.join(f'{u:.2f}' for u in us)}")


if __name__ == "__main__":
    main()
