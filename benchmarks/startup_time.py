#!/usr/bin/env python3
"""Start-up cost of vigild builds side by side (issue 28 §1: the static Swift runtime against the
dynamic one): `vigild --version` (exec, loading, the runtime's start; nothing else) and the time
from exec to the "listening on" line with the built-in defaults on 127.0.0.1:0 and no state, the
median of --runs alternating runs each; plus the file size and the libraries each one loads.

    python3 benchmarks/startup_time.py .build/release/vigild .build-static/release/vigild
"""
import argparse
import os
import re
import statistics
import subprocess
import time

ap = argparse.ArgumentParser()
ap.add_argument("binaries", nargs="+")
ap.add_argument("--runs", type=int, default=20)
args = ap.parse_args()
version = {b: [] for b in args.binaries}
ready = {b: [] for b in args.binaries}
for _ in range(args.runs):
    for b in args.binaries:
        t = time.perf_counter()
        subprocess.run([b, "--version"], check=True, capture_output=True)
        version[b].append(time.perf_counter() - t)
        t = time.perf_counter()
        p = subprocess.Popen([b, "--listen", "127.0.0.1:0", "--admin-listen", "off"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        for line in p.stdout:
            if re.search(r"listening on \S+:\d+", line):
                ready[b].append(time.perf_counter() - t)
                break
        p.terminate()
        p.wait(timeout=10)
for b in args.binaries:
    libs = subprocess.run(["ldd", b], capture_output=True, text=True).stdout.count("=>")
    print(f"{b}: {os.path.getsize(b) / 1e6:.1f} MB, {libs} shared libraries (ldd), "
          f"--version {statistics.median(version[b]) * 1000:.1f} ms, ready {statistics.median(ready[b]) * 1000:.1f} ms "
          f"(median of {args.runs})")
