#!/usr/bin/env python3
"""Heap allocations per echoed message in vigild, counted by valgrind (instruction- and
timing-independent, so the figure is the same on a busy machine).

Runs the release vigild under `valgrind --tool=memcheck` twice, echoing M1 and then M2 messages
over one /echo connection, and reports (allocs(M2) - allocs(M1)) / (M2 - M1): the allocations the
steady-state message path costs, with start-up and the handshake cancelled out.

usage: benchmarks/echo_allocations.py [--small 500] [--large 5500] [--size 64] [--json FILE]
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from websockets.sync.client import connect

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VIGILD = os.environ.get("VIGILD", os.path.join(ROOT, ".build", "release", "vigild"))


def stripped_copy() -> str:
    """valgrind 3.19 cannot read the DWARF that Swift 6 emits; a copy without it runs fine."""
    path = os.path.join(tempfile.mkdtemp(prefix="vigil-allocs-"), "vigild")
    subprocess.run(["objcopy", "--strip-debug", VIGILD, path], check=True)
    return path


def run(binary: str, messages: int, size: int) -> int:
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(
        ["valgrind", "--tool=memcheck", "--leak-check=no", binary,
         "--config", os.path.join(ROOT, "config", "test.yaml"), "--listen", "127.0.0.1:0"],
        stderr=log, stdout=subprocess.DEVNULL)
    try:
        port = None
        deadline = time.monotonic() + 120
        while port is None:
            if time.monotonic() > deadline or proc.poll() is not None:
                log.seek(0)
                sys.exit("vigild under valgrind did not start:\n" + log.read())
            log.seek(0)
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", log.read())
            if m:
                port = int(m.group(1))
            else:
                time.sleep(0.1)  # valgrind start-up: nothing to await but the log line
        payload = "x" * size
        with connect(f"ws://127.0.0.1:{port}/echo", max_size=None, compression=None, open_timeout=60) as ws:
            for _ in range(messages):
                ws.send(payload)
                if ws.recv(timeout=60) != payload:
                    sys.exit("wrong echo")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        log.seek(0)
        text = log.read()
        m = re.search(r"total heap usage: ([\d,]+) allocs", text)
        if not m:
            sys.exit("no heap summary from valgrind:\n" + text[-2000:])
        return int(m.group(1).replace(",", ""))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", type=int, default=500)
    ap.add_argument("--large", type=int, default=5500)
    ap.add_argument("--size", type=int, default=64, help="message payload bytes")
    ap.add_argument("--json")
    a = ap.parse_args()
    binary = stripped_copy()
    small = run(binary, a.small, a.size)
    large = run(binary, a.large, a.size)
    per = (large - small) / (a.large - a.small)
    print(f"messages  allocs")
    print(f"{a.small:>8}  {small}")
    print(f"{a.large:>8}  {large}")
    print(f"allocations per echoed {a.size}-byte message: {per:.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"small": [a.small, small], "large": [a.large, large], "allocs_per_message": per, "size": a.size}, f)


if __name__ == "__main__":
    main()
