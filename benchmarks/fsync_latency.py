#!/usr/bin/env python3
"""How long an fdatasync of a journal-like append takes on this machine's disk: what the loop
waited for each time `fsync: interval` synced on the loop thread (issue 13).

    python3 benchmarks/fsync_latency.py [--dir /var/lib/vigil] [--appends 50] [--bytes 240000] [--repeat 3]

Appends --bytes (a 200 ms interval of journal records at 10,000 panic updates/s is ~240 KB) to a
file in --dir and fdatasyncs it, 20 ms apart, --appends times; prints the median, p90 and max
per run and the medians over --repeat runs. --dir should be on the disk vigild's state is on.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def one_run(directory: str, appends: int, size: int) -> list[float]:
    fd, path = tempfile.mkstemp(prefix="fsync-latency-", dir=directory)
    try:
        block, times = b"r" * size, []
        for _ in range(appends):
            os.write(fd, block)
            start = time.perf_counter()
            os.fdatasync(fd)
            times.append((time.perf_counter() - start) * 1e3)
            time.sleep(0.02)
        return sorted(times)
    finally:
        os.close(fd)
        os.unlink(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--appends", type=int, default=50)
    ap.add_argument("--bytes", type=int, default=240_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for i in range(args.repeat):
        t = one_run(args.dir, args.appends, args.bytes)
        row = (statistics.median(t), t[int(len(t) * 0.9)], t[-1])
        rows.append(row)
        print(f"run {i + 1}: fdatasync median {row[0]:.2f} ms, p90 {row[1]:.2f} ms, max {row[2]:.2f} ms")
    print("medians: " + ", ".join(f"{name} {statistics.median(r[k] for r in rows):.2f} ms"
                                  for k, name in enumerate(["median", "p90", "max"])))


if __name__ == "__main__":
    main()
