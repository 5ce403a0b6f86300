#!/usr/bin/env python3
"""What TLS and permessage-deflate cost: daemon RSS per idle connection and daemon CPU per
delivered map event, over ws://, wss://, ws:// with deflate and wss:// with deflate, in one run.

The daemon (benchmarks/vigild-bench.yaml plus a TLS listener with a throwaway certificate made
here) is pinned to CPU 0 and vigil-load to CPU 1 for the fan-out runs. Each figure is the median
of --repeat runs; the transports alternate within each round so they share the machine's weather.

    swift build -c release --product vigild && swift build -c release --product vigil-load
    python3 benchmarks/transport_costs.py [--repeat 3] [--idle 15000] [--out FILE]

Reported: idle RSS per connection (KiB; a compressing connection holds no zlib state between
messages); for 1,000 subscribers in one viewport with 10 closed-loop publishers: deliveries/s,
the daemon's CPU time per delivery (µs; what the daemon pays whatever the client's speed), and
the client's CPU (a client at ~100% limits the rate, not the daemon).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))
sys.path.insert(0, str(REPO / "benchmarks"))

from compare_builds import steal_share, cpu_times  # noqa: E402
from vigilproc import Vigild, write_config  # noqa: E402

BIN = REPO / ".build" / "release"
TRANSPORTS = [("ws", False, False), ("wss", True, False), ("ws+deflate", False, True), ("wss+deflate", True, True)]


def certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "1", "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def run(config: Path, args: list[str], tls: bool, deflate: bool, pin: bool) -> dict:
    import json
    daemon = Vigild(BIN / "vigild", config, listen="127.0.0.1:0", tls=True)
    daemon.start()
    if pin:
        os.sched_setaffinity(daemon.pid, {0})
    out = Path(tempfile.mkstemp(suffix=".json")[1])
    url = f"wss://127.0.0.1:{daemon.tls_port}/v1" if tls else f"ws://127.0.0.1:{daemon.port}/v1"
    argv = (["taskset", "-c", "1"] if pin else []) + [str(BIN / "vigil-load"), *args, "--url", url,
                                                    "--server-pid", str(daemon.pid), "--json", str(out), "--no-progress"]
    if deflate:
        argv.append("--deflate")
    before = cpu_times()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    steal = steal_share(before, cpu_times())
    daemon.stop()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    report = json.loads(out.read_text())
    out.unlink()
    report["steal"] = steal
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--idle", type=int, default=15000, help="idle connections held (fds permitting)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vigil-transport-"))
    cert, key = certificate(work)
    base = (REPO / "benchmarks" / "vigild-bench.yaml").read_text()
    config = work / "vigild.yaml"
    config.write_text(base + f'\ntls:\n  listen: "127.0.0.1:0"\n  certificate: "{cert}"\n  private_key: "{key}"\n')
    fanout = ["map", "--subscribers", "1000", "--publishers", "10", "--rate", "0", "--window", "16",
              "--pins-per-publisher", "20", "--same-viewport", "--region", "52.45,13.30,52.55,13.50", "--duration", "10"]
    idle = ["idle", "--connections", str(args.idle), "--duration", "5"]
    results: dict[str, dict[str, list[float]]] = {name: {} for name, _, _ in TRANSPORTS}
    for attempt in range(args.repeat):
        for name, tls, deflate in TRANSPORTS:
            print(f"{name}: round {attempt + 1}/{args.repeat}", file=sys.stderr, flush=True)
            r = run(config, idle, tls, deflate, pin=False)
            results[name].setdefault("idle RSS KiB per connection", []).append(r["figures"]["RSS/conn KiB"])
            r = run(config, fanout, tls, deflate, pin=True)
            delivered = r["messages"]["delivered"]
            results[name].setdefault("deliveries/s", []).append(r["messages"]["delivered_per_s"])
            results[name].setdefault("daemon µs CPU per delivery", []).append(r["server"]["cpu_s"] * 1e6 / delivered)
            results[name].setdefault("daemon CPU %", []).append(r["server"]["cpu_percent"])
            results[name].setdefault("client CPU %", []).append(r["client"]["cpu_percent"])
            results[name].setdefault("steal %", []).append(r["steal"] * 100)
    keys = list(results["ws"])
    lines = [f"Machine: {os.cpu_count()} CPUs; fan-out runs with the daemon on CPU 0 and vigil-load on CPU 1; "
             f"median of {args.repeat} rounds (all runs in brackets).", "",
             "| measurement | " + " | ".join(name for name, _, _ in TRANSPORTS) + " |",
             "| --- |" + " --- |" * len(TRANSPORTS)]
    for key in keys:
        cells = []
        for name, _, _ in TRANSPORTS:
            values = results[name][key]
            fmt = (lambda v: f"{v:,.0f}") if max(values) >= 100 else (lambda v: f"{v:.3f}")
            cells.append(f"{fmt(statistics.median(values))} ({', '.join(fmt(v) for v in values)})")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
