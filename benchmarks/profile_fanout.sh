#!/usr/bin/env bash
# Where the time goes at map fan-out saturation: perf samples of vigild (5 s, call graphs) while
# vigil-load drives 1,000 subscribers of one viewport with 10 closed-loop publishers.
# Prints the top symbols (kernel [k] and vigild [.]) and the user/kernel split.
#
#   swift build -c release --product vigild && swift build -c release --product vigil-load
#   benchmarks/profile_fanout.sh            # needs perf (Debian: linux-perf)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.build/release
PORT=${PORT:-9490}
OUT=$(mktemp -d)
VIGIL_ADMIN_LISTEN=127.0.0.1:0 "$BIN/vigild" --config benchmarks/vigild-bench.yaml --listen "127.0.0.1:$PORT" 2>"$OUT/vigild.log" &
VIGILD=$!
trap 'kill $VIGILD 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q "listening on" "$OUT/vigild.log" && break; sleep 0.1; done
"$BIN/vigil-load" map --url "ws://127.0.0.1:$PORT/v1" --subscribers 1000 --publishers 10 --rate 0 --window 16 \
    --pins-per-publisher 20 --same-viewport --region 52.45,13.30,52.55,13.50 --duration 12 --no-progress \
    --server-pid "$VIGILD" >"$OUT/load.txt" &
LOAD=$!
# Profile the middle of the measured window (the ramp-up of 1,010 connections takes about a second).
sleep 5
perf record -g -p "$VIGILD" -o "$OUT/perf.data" -- sleep 5 >/dev/null 2>&1
wait $LOAD
grep -E "^delivered|^cpu s|^client cpu" "$OUT/load.txt"
echo "--- vigild: share of samples in the kernel vs user space"
perf report -i "$OUT/perf.data" --no-children --sort dso 2>/dev/null | grep -E "^ +[0-9]" | head -6
echo "--- vigild: top symbols (self time)"
perf report -i "$OUT/perf.data" --no-children --sort symbol -g none 2>/dev/null | grep -E "^ +[0-9]" | head -25
