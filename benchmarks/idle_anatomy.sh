#!/usr/bin/env bash
# What an idle /v1 connection holds on vigild's heap, by allocation site: massif snapshots of a
# vigild under valgrind with no connections and then with N idle connections held (upgraded,
# welcome flushed), taken on demand through vgdb, and each site's growth divided by N.
# The docs' per-connection table (docs/BENCHMARKS.md, "What an idle connection is made of") comes
# from this. RSS (fanout_compare.py's idle figure) adds malloc's and the page allocator's slack.
#
#   swift build -c release --product vigild
#   benchmarks/idle_anatomy.sh [vigild] [N]         # N defaults to 4000
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-.build/release/vigild}
N=${2:-4000}
PORT=${PORT:-9571}
TMP=$(mktemp -d)
trap 'kill "$VG" 2>/dev/null || true; rm -rf "$TMP"' EXIT
# valgrind 3.19 cannot read the DWARF Swift 6 emits; the symbol table (kept) is all massif needs.
objcopy --strip-debug "$BIN" "$TMP/vigild"
cc -O2 -o "$TMP/fanout_client" benchmarks/fanout_client.c
VIGIL_ADMIN_LISTEN=127.0.0.1:0 valgrind --tool=massif --vgdb=yes --massif-out-file="$TMP/massif.out" --threshold=0.1 \
    "$TMP/vigild" --config benchmarks/vigild-bench.yaml --listen "127.0.0.1:$PORT" >"$TMP/vigild.log" 2>&1 &
VG=$!
for _ in $(seq 200); do grep -q "listening on" "$TMP/vigild.log" && break; sleep 0.1; done
# One connection first, gone before the "before" snapshot: what vigild sets up once, on its first
# handshake (libcrypto's provider for the SHA-1), is not a cost of each connection.
exec 3> >("$TMP/fanout_client" --port "$PORT" --idle 1 >"$TMP/warm.out")
for _ in $(seq 600); do grep -q "^ready" "$TMP/warm.out" 2>/dev/null && break; sleep 0.1; done
exec 3>&-
sleep 1  # the close handled (nothing marks that moment)
vgdb --pid="$VG" detailed_snapshot "$TMP/before" >/dev/null
exec 3> >("$TMP/fanout_client" --port "$PORT" --idle "$N" >"$TMP/client.out")
for _ in $(seq 600); do grep -q "^ready" "$TMP/client.out" 2>/dev/null && break; sleep 0.1; done
sleep 1  # every welcome flushed (nothing marks that moment)
vgdb --pid="$VG" detailed_snapshot "$TMP/after" >/dev/null
exec 3>&-
python3 - "$TMP/before" "$TMP/after" "$N" <<'PY'
import re, sys
def sites(path):
    """Bytes per allocation site one level below the allocator (swift_allocObject / slowAlloc / malloc)."""
    out, total = {}, 0
    for line in open(path):
        m = re.match(r"mem_heap_B=(\d+)", line)
        if m: total += int(m.group(1))
        m = re.match(r"mem_heap_extra_B=(\d+)", line)
        if m: total += int(m.group(1))
    text = open(path).read()
    # massif's tree: "n<k>: <bytes> 0xADDR: fn (in ...)"; depth by leading spaces
    stack = []
    for line in text.splitlines():
        m = re.match(r"( *)n\d+: (\d+) (.*)", line)
        if not m: continue
        depth, size, what = len(m.group(1)), int(m.group(2)), m.group(3)
        fn = re.sub(r" \(in .*\)$", "", what.split(": ", 1)[-1])
        stack = stack[:depth] + [fn]
        names = [s for s in stack if not re.search(r"malloc|alloc-fns|swift_slowAlloc|swift_allocObject|operator new|realloc|calloc", s)]
        if len(names) == 1 and depth == len(stack) - 1:
            out[names[0]] = out.get(names[0], 0) + size
    return out, total
b, tb = sites(sys.argv[1]); a, ta = sites(sys.argv[2]); n = int(sys.argv[3])
print(f"heap growth per connection (useful + malloc's own header/padding): {(ta - tb) / n:.0f} B at {n} connections")
rows = sorted(((a.get(k, 0) - b.get(k, 0)) / n, k) for k in set(a) | set(b))
for per, k in reversed(rows):
    if abs(per) >= 1:
        print(f"{per:8.1f} B  {k}")
PY
