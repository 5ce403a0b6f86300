#!/usr/bin/env python3
"""Idle-connection memory benchmark for vigild.

Opens N WebSocket connections to /v1 (default 10,000), waits until every one is
upgraded, and reports the daemon's resident memory before and after, per connection,
and its fd count before, while open, and after closing.

    # start a release build itself (default config; listens on 127.0.0.1:<ephemeral>)
    swift build -c release --product vigild
    python3 benchmarks/idle_connections.py --connections 10000 --json idle.json

    # or measure a daemon that is already running
    python3 benchmarks/idle_connections.py --pid 1234 --port 8080

The connection code is the end-to-end suite's (Tests/e2e/wsraw.py, wsbulk.py,
vigilproc.py), so the benchmark and ``Tests/e2e/test_idle.py`` measure the same thing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))

import wsbulk  # noqa: E402
from vigilproc import Vigild, default_binary, raise_own_nofile, write_config  # noqa: E402
from wsraw import http_get  # noqa: E402


class Attached:
    """The bits of ``Vigild`` the benchmark needs, for a daemon it did not start."""

    def __init__(self, pid: int, port: int):
        self.pid, self.port = pid, port

    fd_count = Vigild.fd_count
    _status = Vigild._status
    rss_kib = Vigild.rss_kib
    rss_anon_kib = Vigild.rss_anon_kib
    wait_fds_at_most = Vigild.wait_fds_at_most
    wait_fds_at_least = Vigild.wait_fds_at_least


def machine() -> dict:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version()}


def measure(d, n: int, path: str, window: int) -> dict:
    # Warm-up: one request and one WebSocket, so lazily allocated state is in the baseline.
    fds_start = d.fd_count()
    assert http_get(d.port, "/healthz").status == 200
    warm = wsbulk.open_upgraded(d.port, 1, path=path)
    wsbulk.close_all(warm.opened)
    fds_before = d.wait_fds_at_most(fds_start, 2.0)
    rss_before, anon_before = d.rss_kib(), d.rss_anon_kib()

    res = wsbulk.open_upgraded(d.port, n, path=path, window=window, timeout=120)
    try:
        if res.failures:
            raise SystemExit(f"{len(res.opened)}/{n} upgraded: {res.failure_summary()}")
        fds_open = d.wait_fds_at_least(fds_before + n, 10)
        healthz = http_get(d.port, "/healthz").status
        rss_open, anon_open = d.rss_kib(), d.rss_anon_kib()
    finally:
        wsbulk.close_all(res.opened)
    t_close = time.monotonic()
    fds_after = d.wait_fds_at_most(fds_before, 30)
    return {
        "connections": n,
        "path": path,
        "upgrade_seconds": round(res.elapsed, 3),
        "rss_before_kib": rss_before,
        "rss_open_kib": rss_open,
        "rss_anon_before_kib": anon_before,
        "rss_anon_open_kib": anon_open,
        "kib_per_connection": round((rss_open - rss_before) / n, 3),
        "anon_kib_per_connection": round((anon_open - anon_before) / n, 3),
        "fds_before": fds_before,
        "fds_open": fds_open,
        "fds_after_close": fds_after,
        "fds_released_seconds": round(time.monotonic() - t_close, 3),
        "healthz_while_open": healthz,
        "machine": machine(),
    }


def print_table(r: dict) -> None:
    rows = [
        ("connections", f"{r['connections']}"),
        ("upgraded in", f"{r['upgrade_seconds']:.2f} s"),
        ("RSS before", f"{r['rss_before_kib']} KiB (anon {r['rss_anon_before_kib']})"),
        ("RSS with connections", f"{r['rss_open_kib']} KiB (anon {r['rss_anon_open_kib']})"),
        ("KiB per connection", f"{r['kib_per_connection']:.3f} (anon {r['anon_kib_per_connection']:.3f})"),
        ("fds before / open / after close", f"{r['fds_before']} / {r['fds_open']} / {r['fds_after_close']}"),
        ("/healthz while open", f"{r['healthz_while_open']}"),
        ("machine", f"{r['machine']['cpu']}, {r['machine']['cores']} cores, Linux {r['machine']['kernel']}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--path", default="/v1")
    ap.add_argument("--window", type=int, default=512, help="handshakes in flight at once")
    ap.add_argument("--binary", type=Path, default=None, help="vigild to start (default: VIGILD or the release build)")
    ap.add_argument("--config", type=Path, default=None, help="config file for the started daemon (default: empty)")
    ap.add_argument("--pid", type=int, help="attach to a running vigild instead of starting one")
    ap.add_argument("--port", type=int, help="its port on 127.0.0.1 (with --pid)")
    ap.add_argument("--json", type=Path, help="also write the result as JSON")
    args = ap.parse_args()
    if (args.pid is None) != (args.port is None):
        ap.error("--pid and --port go together")

    limit = raise_own_nofile()
    if limit < args.connections + 256:
        ap.error(f"RLIMIT_NOFILE hard limit {limit} is too low for {args.connections} connections")

    daemon = None
    if args.pid is not None:
        target = Attached(args.pid, args.port)
    else:
        binary = args.binary or default_binary()
        if not binary.is_file():
            ap.error(f"{binary} not found: swift build -c release --product vigild")
        tmp = tempfile.TemporaryDirectory(prefix="vigil-bench-")
        config = args.config or write_config(Path(tmp.name) / "bench.yaml", {})
        daemon = target = Vigild(binary, config, listen="127.0.0.1:0").start()
    try:
        result = measure(target, args.connections, args.path, args.window)
    finally:
        if daemon is not None:
            rc = daemon.stop(timeout=10)
            if rc != 0:
                print(f"warning: vigild exit code {rc}\n{daemon.log_tail(20)}", file=sys.stderr)
    print_table(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
