#!/usr/bin/env bash
# Snapshot put/get through a JetStream object store (docs/CLUSTER.md, "Snapshots in JetStream"):
# a fresh `nats-server -js` (file storage in a temporary directory) pinned to CPU 0,
# `vigil-bench snapshot-store` (release build) pinned to CPU 1. Prints each run's row, the
# medians per size, and the steal (percent of CPU time, from /proc/stat) over the whole run.
# Usage: [ACKS=N] benchmarks/snapshot_store.sh [RUNS] [SIZES_MIB...]   (default: 3 runs of 10 and
# 100 MiB; ACKS, the chunk acknowledgements awaited at once, default SnapshotStoreSettings')
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
shift || true
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(10 100)
PORT=${PORT:-18442}
STORE=$(mktemp -d /tmp/vigil-snapshot-bench.XXXXXX)
steal() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
taskset -c 0 nats-server -js -a 127.0.0.1 -p "$PORT" -sd "$STORE" -l "$STORE/server.log" &
PID=$!
trap 'kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; rm -rf "$STORE"' EXIT
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
echo "nats-server $(nats-server --version | awk '{print $2}'), vigil-bench $(git rev-parse --short HEAD), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
read -r s0 t0 < <(steal)
taskset -c 1 .build/release/vigil-bench snapshot-store --nats "nats://127.0.0.1:$PORT" --runs "$RUNS" ${ACKS:+--acks "$ACKS"} --mib "${SIZES[@]}"
read -r s1 t1 < <(steal)
echo "steal $(awk -v a=$((s1 - s0)) -v b=$((t1 - t0)) 'BEGIN{printf "%.2f", 100*a/b}')%, load $(cut -d' ' -f1-3 /proc/loadavg)"
