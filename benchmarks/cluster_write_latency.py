#!/usr/bin/env python3
"""What the replicated log adds to a write: `pin.create` → `ok` latency, one client writing
sequentially (the next write after the previous reply), for a node alone and a node of a
cluster, in one run; prints each setup's p50 / p99 per run and the medians over --repeat runs.

    swift build -c release --product vigild
    python3 benchmarks/cluster_write_latency.py [--repeat 3] [--writes 2000]

Setups (each run starts them afresh, in this order):
- `alone`: one vigild, state in memory (no journal): the protocol's own round trip.
- `alone+journal`: one vigild with a state directory, `fsync: interval` (the default policy:
  the journal's write is on the path of the reply, its fdatasync is not).
- `cluster-1`: one vigild node and one `nats-server -js` (file storage, 1 replica): the reply
  waits until JetStream has stored the record and the node's consumer has applied it.
- `cluster-2`: two nodes on the same nats-server, the client on the first.
vigild and nats-server run on CPU 0 (`taskset`), the client on CPU 1; steal (the share of CPU
time the hypervisor took, /proc/stat) is printed with each run. The client is Python's
`websockets` (sync): its own cost, about the same in every setup, is in every figure, so the
differences are what the setups add.
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
from websockets.sync.client import connect  # noqa: E402
from wsraw import http_get  # noqa: E402

BIN = REPO / ".build" / "release" / "vigild"
LIMITS = {
    "pins": {"writes_per_minute": 600000, "write_burst": 100000, "max_pins": 1000000},
    "session": {"messages_per_second": 100000, "message_burst": 100000},
    "limits": {"pin_creates_per_hour": 10000000, "pin_create_burst": 1000000, "live_pins_per_address": 1000000},
}


def pin(cpu: int, pid: int) -> None:
    subprocess.run(["taskset", "-pc", str(cpu), str(pid)], check=True, capture_output=True)


def start_vigild(workdir: Path, name: str, extra: dict) -> Vigild:
    cfg = json.loads(json.dumps(LIMITS))
    cfg.update(extra)
    d = Vigild(BIN, write_config(workdir / f"{name}.yaml", cfg))
    d.start()
    pin(0, d.pid)
    return d


def wait_writable(d: Vigild, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not json.loads(http_get(d.admin_port, "/healthz").body)["cluster"]["writable"]:
        if time.monotonic() > deadline:
            raise SystemExit(f"node {d.port} not writable within {timeout} s")
        time.sleep(0.05)


def measure(port: int, writes: int) -> list[float]:
    latencies = []
    with connect(f"ws://127.0.0.1:{port}/v1", subprotocols=["vigil.v1"]) as ws:
        ws.recv()  # welcome
        for i in range(writes + 100):
            msg = json.dumps({"op": "pin.create", "ref": i,
                              "pin": {"lat": 50.0 + (i % 1000) / 10000, "lon": 8.0, "title": f"w{i}"}})
            start = time.perf_counter()
            ws.send(msg)
            reply = json.loads(ws.recv())
            elapsed = time.perf_counter() - start
            if reply.get("type") != "ok":
                raise SystemExit(f"write {i}: {reply}")
            if i >= 100:  # the first hundred warm up
                latencies.append(elapsed * 1e6)
    return latencies


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def run_setup(name: str, writes: int, workdir: Path) -> dict:
    nats = None
    nodes: list[Vigild] = []
    try:
        if name.startswith("cluster"):
            nats = NatsServer(workdir / f"nats-{name}").start()
            pin(0, nats.proc.pid)
            for i in range(int(name.split("-")[1])):
                nodes.append(start_vigild(workdir, f"{name}-n{i}", {"cluster": {
                    "urls": [nats.url], "name": "BENCH", "node_id": f"n{i}"}}))
            for d in nodes:
                wait_writable(d)
        elif name == "alone+journal":
            state = tempfile.mkdtemp(prefix="vigil-bench-state-", dir=workdir)
            nodes.append(start_vigild(workdir, name, {"state": {"directory": state, "fsync": "interval"}}))
        else:
            nodes.append(start_vigild(workdir, name, {}))
        before = cpu_times()
        lat = measure(nodes[0].port, writes)
        steal = steal_share(before, cpu_times())
        return {"p50": percentile(lat, 50), "p99": percentile(lat, 99), "steal": steal}
    finally:
        for d in nodes:
            d.stop()
        if nats:
            nats.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--writes", type=int, default=2000)
    ap.add_argument("--setups", default="alone,alone+journal,cluster-1,cluster-2")
    args = ap.parse_args()
    os.sched_setaffinity(0, {1})
    setups = args.setups.split(",")
    results: dict[str, list[dict]] = {s: [] for s in setups}
    with tempfile.TemporaryDirectory(prefix="vigil-cluster-bench-") as tmp:
        for run in range(args.repeat):
            for s in setups:
                r = run_setup(s, args.writes, Path(tmp))
                results[s].append(r)
                print(f"run {run + 1} {s:14} p50 {r['p50']:7.0f} µs  p99 {r['p99']:7.0f} µs  steal {r['steal'] * 100:.2f}%",
                      flush=True)
    print(f"\nmedians of {args.repeat} runs, {args.writes} sequential pin.create each (vigild + nats-server on CPU 0, client on CPU 1):")
    base = statistics.median(r["p50"] for r in results[setups[0]])
    for s in setups:
        p50 = statistics.median(r["p50"] for r in results[s])
        p99 = statistics.median(r["p99"] for r in results[s])
        print(f"  {s:14} p50 {p50:7.0f} µs  p99 {p99:7.0f} µs  p50 − {setups[0]}: {p50 - base:+6.0f} µs")


if __name__ == "__main__":
    main()
