#!/usr/bin/env bash
# Instructions per pin update in `vigil-bench one-cell` (10,000 subscribers in one cell, every
# update reaching all of them), counted by callgrind, so the figure does not move with the
# machine's load. Two counts per binary: the hub's part (`MapHub.update`: the state change and
# the recipients found through the channels, where the reach rule sits) and the whole loop (the
# hub, encoding the event once and queueing it on every recipient). Takes vigil-bench binaries
# (e.g. one built before pins had a reach and this one), RUNS times each (default 3). With
# RANGE_M set, the pin gets that range_m and the subscribers viewer positions (this build only).
#   benchmarks/range_fanout_instructions.sh /tmp/vigil-base/vigil-bench .build/release/vigil-bench
set -euo pipefail
RUNS=${RUNS:-3}
EVENTS=${EVENTS:-200}
SUBSCRIBERS=${SUBSCRIBERS:-10000}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export SWIFT_DETERMINISTIC_HASHING=1
extra=()
if [ -n "${RANGE_M:-}" ]; then extra=(--range-m "$RANGE_M"); fi
for bench in "$@"; do
  # valgrind 3.19 cannot read the DWARF Swift 6 emits; the symbol table (kept) is all callgrind needs.
  objcopy --strip-debug "$bench" "$TMP/bench"
  hub=(); total=()
  for _ in $(seq "$RUNS"); do
    # The hub's part: everything under MapHub.update (mangled $s9VigilCore6MapHubV6update...).
    valgrind --tool=callgrind --callgrind-out-file="$TMP/out" --toggle-collect='$s9VigilCore6MapHubV6update*' \
      "$TMP/bench" one-cell --runs 1 --events "$EVENTS" --subscribers "$SUBSCRIBERS" "${extra[@]}" >"$TMP/stdout" 2>"$TMP/stderr"
    n=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$TMP/stderr")
    hub+=("$((n / EVENTS))")
    # The whole measured loop: the run's instructions minus the same run with one update (setup).
    valgrind --tool=callgrind --callgrind-out-file="$TMP/out" \
      "$TMP/bench" one-cell --runs 1 --events "$EVENTS" --subscribers "$SUBSCRIBERS" "${extra[@]}" >"$TMP/stdout" 2>"$TMP/stderr"
    with=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$TMP/stderr")
    valgrind --tool=callgrind --callgrind-out-file="$TMP/out" \
      "$TMP/bench" one-cell --runs 1 --events 1 --subscribers "$SUBSCRIBERS" "${extra[@]}" >"$TMP/stdout" 2>"$TMP/stderr"
    without=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$TMP/stderr")
    total+=("$(((with - without) / (EVENTS - 1)))")
  done
  echo "$bench${RANGE_M:+ (range_m $RANGE_M)}: instructions per update to $SUBSCRIBERS subscribers: hub ${hub[*]}; whole loop ${total[*]}"
done
