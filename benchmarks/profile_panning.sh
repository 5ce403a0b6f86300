#!/usr/bin/env bash
# Where the time goes when maps pan: perf samples of vigild (6 s, call graphs) while vigil-load
# drives 5,000 subscribers in one city, a fifth of them re-subscribing about once a second to
# views of ~250 pins (the panning measurement of benchmarks/compare_builds.py). The daemon runs on
# CPU 0 and the client on CPU 1. Prints the daemon's CPU per re-subscribe, the share of samples per
# library and the top symbols with their main callers.
#
#   swift build -c release --product vigild && swift build -c release --product vigil-load
#   benchmarks/profile_panning.sh            # needs perf (Debian: linux-perf)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.build/release
PORT=${PORT:-9491}
OUT=$(mktemp -d)
VIGIL_ADMIN_LISTEN=127.0.0.1:0 taskset -c 0 "$BIN/vigild" --config benchmarks/vigild-bench.yaml --listen "127.0.0.1:$PORT" 2>"$OUT/vigild.log" &
VIGILD=$!
trap 'kill $VIGILD 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q "listening on" "$OUT/vigild.log" && break; sleep 0.1; done
taskset -c 1 "$BIN/vigil-load" map --url "ws://127.0.0.1:$PORT/v1" --subscribers 5000 --publishers 10 \
    --pins-per-publisher 600 --prefill --rate 1 --region 52.35,13.10,52.65,13.70 --viewport-km 7.5 \
    --panning 0.2 --pan-interval 1 --duration 20 --no-progress --server-pid "$VIGILD" >"$OUT/load.txt" &
LOAD=$!
# The ramp-up (5,010 connections, 6,000 pins) takes a few seconds; sample well inside the window.
sleep 14
# cpu-clock: a VM without a PMU has no cycles event.
perf record -e cpu-clock -g -p "$VIGILD" -o "$OUT/perf.data" -- sleep 6 >/dev/null 2>&1
wait $LOAD
grep -E "re-subscribe|^cpu s|^client cpu" "$OUT/load.txt"
echo "--- vigild: share of samples per library"
perf report -i "$OUT/perf.data" --no-children --sort dso 2>/dev/null | grep -E "^ +[0-9]+\.[0-9]+%" | head -6 || true
echo "--- vigild: top symbols (self time)"
perf report -i "$OUT/perf.data" --no-children --sort symbol -g none 2>/dev/null | grep -E "^ +[0-9]" | head -15 | cut -c1-150 || true
# A leaf (memmove, swift_retain) keeps no frame of its own, so the first caller shown is its
# caller's caller: memmove "from MapHub.subscribe" is memmove from PinStore.query inlined there.
echo "--- callers of swift_retain and memmove"
for sym in swift_retain __memmove_avx512_unaligned_erms __memmove_avx_unaligned_erms; do
  perf report -i "$OUT/perf.data" --no-children --sort symbol -g caller,2,callee,function,percent --symbols="$sym" 2>/dev/null \
    | grep -E "^ +[0-9]+\.[0-9]+%|%--" | head -6 | cut -c1-150 || true
done
