#!/usr/bin/env bash
# permessage-deflate message path: speed of the uncompressed path before (the base revision's
# VigilWire) and after (this tree's), the compressed echo's speed, and heap allocations per
# compressed echo counted by valgrind: (allocs(N2) - allocs(N1)) / (N2 - N1), so start-up cancels.
#   benchmarks/deflate_bench.sh [BASE_REV]     default BASE_REV: main
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BASE="${1:-main}"
OUT="$ROOT/.build/deflate-bench"
rm -rf "$OUT/base-wire" && mkdir -p "$OUT/modules" "$OUT/base-wire"
FLAGS=(-O -parse-as-library -swift-version 6)
swiftc "${FLAGS[@]}" -module-name VigilBytes -emit-module -emit-module-path "$OUT/modules/VigilBytes.swiftmodule" \
    -c "$ROOT"/Sources/VigilBytes/*.swift -o "$OUT/VigilBytes.o"
common=(-I "$ROOT/Sources/COpenSSL" -I "$ROOT/Sources/CZlib" -I "$OUT/modules" "$OUT/VigilBytes.o" -lcrypto -lz)
swiftc "${FLAGS[@]}" -module-name DeflateBench "${common[@]}" "$ROOT"/Sources/VigilWire/*.swift \
    "$ROOT/benchmarks/DeflateBench.swift" -o "$OUT/deflatebench"
# The base revision's VigilWire, for the plain path only (it has no Deflater: the echo mode is
# compiled out by building only the plain half).
git -C "$ROOT" archive "$BASE" Sources/VigilWire | tar -x -C "$OUT/base-wire"
sed -e '/case "echo": echo(n/d' -e '/static func echo/,$d' "$ROOT/benchmarks/DeflateBench.swift" > "$OUT/PlainBench.swift"
echo "}" >> "$OUT/PlainBench.swift"
swiftc "${FLAGS[@]}" -module-name DeflateBench "${common[@]}" "$OUT"/base-wire/Sources/VigilWire/*.swift \
    "$OUT/PlainBench.swift" -o "$OUT/plainbench-base"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1 /proc/loadavg)"
for run in 1 2 3; do
  echo "run $run: base $("$OUT/plainbench-base" plain 2000) | this tree $("$OUT/deflatebench" plain 2000)"
done
# Wall time on a shared 2-core machine varies by several percent; instructions do not.
instructions() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'; }
for binary in plainbench-base deflatebench; do
  a=$(instructions "$OUT/$binary" plain 100); b=$(instructions "$OUT/$binary" plain 300)
  echo "uncompressed path, $binary: $(( (b - a) / 200 )) instructions per 1,000 messages (callgrind)"
done
for memory in 8 1; do for run in 1 2 3; do "$OUT/deflatebench" echo 200000 "$memory"; done; done
count() { valgrind --tool=memcheck --leak-check=no "$OUT/deflatebench" echo "$1" 2>&1 >/dev/null \
            | sed -n 's/.*total heap usage: \([0-9,]*\) allocs.*/\1/p' | tr -d ,; }
a=$(count 1000); b=$(count 11000)
echo "heap allocations per compressed echo (valgrind): $(( (b - a) / 10000 )) ($a at 1000, $b at 11000)"
