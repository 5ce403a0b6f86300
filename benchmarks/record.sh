#!/usr/bin/env bash
# Reruns every figure of docs/BENCHMARKS.md on this machine and writes the raw results to
# benchmarks/results/ (Markdown tables and each vigil-load run's JSON). About 20 minutes.
#
#   benchmarks/record.sh            # needs perf (Debian linux-perf) for the fan-out profile
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=benchmarks/results
mkdir -p "$OUT"
swift build -c release --product vigild
swift build -c release --product vigil-load
swift build -c release --product vigil-bench
echo "== vigil-load scenarios, each run 3 times (the median run is kept) =="
python3 benchmarks/load_record.py --repeat 3 --json-dir "$OUT/json" --out "$OUT/load.md"
echo "== where the time goes at fan-out saturation (perf) =="
benchmarks/profile_fanout.sh | tee "$OUT/profile-fanout.txt"
echo "== durable state: snapshot, restore, latency during a snapshot =="
python3 benchmarks/state_bench.py --out "$OUT/state.md"
echo "== panic latency under load, pinned, with the journal (issue 13) =="
python3 benchmarks/panic_latency.py --realtime 10 --state interval | tee "$OUT/panic-latency.md"
python3 benchmarks/fsync_latency.py | tee "$OUT/fsync-latency.txt"
echo "results in $OUT/"
