#!/usr/bin/env bash
# `vigil-load clusters` against a fresh vigild per run (docs/BENCHMARKS.md, "Cluster subscriptions"):
# vigild pinned to CPU 0, vigil-load to CPU 1, config benchmarks/vigild-bench.yaml (per-session
# limits lifted; cluster_interval_ms at its default, 1000). Prints each run's table and the steal
# (percent of CPU time, from /proc/stat) over the run. Usage:
#   benchmarks/cluster_load.sh [RUNS] [vigil-load clusters options...]
# Default options: 10,000 subscribers, 10 publishers at 200 ops/s, 100 pins each, 20 s.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
shift || true
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(--subscribers 10000 --publishers 10 --rate 200 --pins-per-publisher 100 --prefill --duration 20)
PORT=${PORT:-18431}
steal() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
for run in $(seq 1 "$RUNS"); do
  taskset -c 0 .build/release/vigild --config benchmarks/vigild-bench.yaml --listen "127.0.0.1:$PORT" --admin-listen off \
    2>/tmp/cluster_load_vigild.log &
  PID=$!
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
  read -r s0 t0 < <(steal)
  status=0
  taskset -c 1 .build/release/vigil-load clusters --url "ws://127.0.0.1:$PORT/v1" --server-pid "$PID" --no-progress \
    --json "/tmp/cluster_load_$run.json" "${ARGS[@]}" || status=$?
  read -r s1 t1 < <(steal)
  kill "$PID"; wait "$PID" || true
  echo "run $run: exit $status, steal $(awk -v a=$((s1 - s0)) -v b=$((t1 - t0)) 'BEGIN{printf "%.2f", 100*a/b}')%, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
