#!/usr/bin/env bash
# Builds the uWebSockets reference server of benchmarks/fanout_compare.py into
# benchmarks/reference/.build-uws/uws_peer (git-ignored). Only uws_peer.cpp is ours; uWebSockets
# and uSockets (Apache-2.0) are read from checkouts outside the repository and never committed.
#
#   benchmarks/reference/build_uws.sh                      # clones both from GitHub into .build-uws/src
#   UWS_SRC=/path/to/uWebSockets USOCKETS_SRC=/path/to/uSockets benchmarks/reference/build_uws.sh
#
# UWS_SRC / USOCKETS_SRC may be work trees or bare git directories (such as the snapshots the
# project's `fetch` tool leaves in /work/.mirror/uNetworking+uWebSockets/repo and
# /work/.mirror/uNetworking+uSockets/repo); a git directory is exported with `git archive` at
# UWS_REF / USOCKETS_REF (default HEAD). Without them the script clones
# https://github.com/uNetworking/uWebSockets and https://github.com/uNetworking/uSockets.
# The figures in docs/BENCHMARKS.md name the commits they were built from (printed below).
#
# Flags follow uWebSockets' own build (build.c): -O3 -flto, no TLS, no zlib; -march=x86-64-v3 (AVX2)
# instead of its -march=native, so that valgrind 3.19 (no AVX-512) can count its instructions.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT="$HERE/.build-uws"
mkdir -p "$OUT/src"

# export NAME SOURCE REF URL: puts a plain tree of SOURCE (or a fresh clone of URL) in $OUT/src/NAME.
export_tree() {
    local name=$1 src=$2 ref=$3 url=$4 dest="$OUT/src/$1"
    rm -rf "$dest"
    mkdir -p "$dest"
    if [ -z "$src" ]; then
        git clone --quiet --depth 1 "$url" "$dest"
        src="$dest"
    elif [ -d "$src/.git" ] || git --git-dir="$src" rev-parse --git-dir >/dev/null 2>&1; then
        local gd="$src"; [ -d "$src/.git" ] && gd="$src/.git"
        git --git-dir="$gd" archive "$ref" | tar -x -C "$dest"
        echo "$name: $(git --git-dir="$gd" rev-parse "$ref")" >>"$OUT/commits.txt"
        return
    else
        cp -a "$src/." "$dest/"
    fi
    echo "$name: $(git -C "$dest" rev-parse HEAD 2>/dev/null || echo unknown)" >>"$OUT/commits.txt"
}

: >"$OUT/commits.txt"
export_tree uWebSockets "${UWS_SRC:-}" "${UWS_REF:-HEAD}" https://github.com/uNetworking/uWebSockets
export_tree uSockets "${USOCKETS_SRC:-}" "${USOCKETS_REF:-HEAD}" https://github.com/uNetworking/uSockets
cat "$OUT/commits.txt"

US="$OUT/src/uSockets"
UWS="$OUT/src/uWebSockets"
mkdir -p "$OUT/obj"
rm -f "$OUT"/obj/*.o
# uSockets: plain epoll, no TLS (vigild's ws:// listener is what is compared).
(cd "$OUT/obj" && ${CC:-cc} -O3 -march=${UWS_MARCH:-x86-64-v3} -flto=auto -DLIBUS_NO_SSL -std=c11 -I"$US/src" \
    -c "$US"/src/*.c "$US"/src/eventing/*.c)
${CXX:-g++} -O3 -march=${UWS_MARCH:-x86-64-v3} -flto=auto -std=c++2b -w -DUWS_NO_ZLIB -DLIBUS_NO_SSL \
    -I"$UWS/src" -I"$US/src" "$HERE/uws_peer.cpp" "$OUT"/obj/*.o -o "$OUT/uws_peer"
echo "built $OUT/uws_peer"
