#!/usr/bin/env bash
# Instructions per re-subscribe of a panning map, counted by callgrind: the measured loop of
# `vigil-bench pan` (the hub's subscribe and the reply's encoding, for a seeded city: 6,000 pins,
# 5,000 subscribers, 7.5 km views of ~250 pins), so the figure does not move with the machine's
# load the way a time does. Takes one or more vigil-bench binaries (e.g. an old build's and this
# one's) and prints the count for each, RUNS times (default 3).
#   benchmarks/pan_instructions.sh /path/to/old/vigil-bench .build/release/vigil-bench
set -euo pipefail
RUNS=${RUNS:-3}
PANS=${PANS:-1000}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# Swift's hashing is seeded per process; a fixed seed keeps the dictionaries, and so the count, the same.
export SWIFT_DETERMINISTIC_HASHING=1
for bench in "$@"; do
  # valgrind 3.19 cannot read the DWARF Swift 6 emits; the symbol table (kept) is all callgrind needs.
  objcopy --strip-debug "$bench" "$TMP/bench"
  counts=()
  for _ in $(seq "$RUNS"); do
    valgrind --tool=callgrind --callgrind-out-file="$TMP/out" --toggle-collect='*panLoop*' \
      "$TMP/bench" pan --runs 1 --pans "$PANS" --viewport-km 7.5 >"$TMP/stdout" 2>"$TMP/stderr"
    total=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$TMP/stderr")
    counts+=("$((total / PANS))")
  done
  echo "$bench: instructions per re-subscribe: ${counts[*]}   ($(grep 'pins per reply' "$TMP/stdout" | sed 's/^ *//'))"
done
