# Shared by Tests/fuzz/run (the bounded CI run) and Tests/fuzz/soak (long runs); sourced, not run.
#   fuzz_build               builds every target into .build/fuzz (a failing step prints its log, exits)
#   fuzz_run TARGET SECONDS  runs one target; non-zero on a crash, trap, failed precondition or oracle
#                            difference, whose input libFuzzer saves as .build/fuzz/TARGET-crash-…
# Corpora persist in .build/fuzz-corpus-TARGET; targets with seeds in Tests/fuzz/seeds/TARGET start
# from them.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FUZZ_TARGETS=(wire json hub deflate decoder snapshot journal nats response push)
OUT="$ROOT/.build/fuzz"
# Swift's own crash backtracer would take over a trap (and can sit for minutes symbolicating a
# sanitizer-sized process); libFuzzer's handler reports it and writes the input instead.
export SWIFT_BACKTRACE=enable=no

# Compiler and linker chatter (gold warns about every ASan helper symbol) goes to a log, shown
# only when a step fails.
quietly() { local log="$OUT/$1.log"; shift; "$@" >"$log" 2>&1 || { cat "$log"; exit 1; }; }

fuzz_build() {
  mkdir -p "$OUT"
  # SwiftPM's executable entry point clashes with libFuzzer's main, so the targets are built by
  # swiftc: the module's sources and the entry point in one module.
  local FLAGS=(-O -sanitize=fuzzer,address -parse-as-library -swift-version 6)
  # VigilBytes (ByteChunk), which both VigilWire and the JSON writer import, as a module of its own.
  mkdir -p "$OUT/modules"
  quietly bytes-build swiftc "${FLAGS[@]}" -module-name VigilBytes -emit-module -emit-module-path "$OUT/modules/VigilBytes.swiftmodule" \
      -c "$ROOT"/Sources/VigilBytes/*.swift -o "$OUT/VigilBytes.o"
  local WIRE=(-I "$ROOT/Sources/COpenSSL" -I "$ROOT/Sources/CZlib" -I "$OUT/modules" "$ROOT"/Sources/VigilWire/*.swift
        "$ROOT/Tests/fuzz/FuzzChunks.swift" "$OUT/VigilBytes.o" -lcrypto -lz)
  quietly wire-build swiftc "${FLAGS[@]}" -module-name WireFuzz "${WIRE[@]}" "$ROOT/Tests/fuzz/WireFuzz.swift" -o "$OUT/wirefuzz"
  quietly deflate-build swiftc "${FLAGS[@]}" -module-name DeflateFuzz "${WIRE[@]}" "$ROOT/Tests/fuzz/DeflateFuzz.swift" -o "$OUT/deflatefuzz"
  quietly response-build swiftc "${FLAGS[@]}" -module-name ResponseFuzz "${WIRE[@]}" "$ROOT/Tests/fuzz/ResponseFuzz.swift" -o "$OUT/responsefuzz"
  quietly json-build swiftc "${FLAGS[@]}" -I "$OUT/modules" -module-name JSONFuzz \
      "$ROOT"/Sources/VigilCore/JSON/*.swift "$ROOT/Tests/fuzz/JSONFuzz.swift" "$ROOT/Tests/fuzz/JSONFuzzMain.swift" \
      "$OUT/VigilBytes.o" -o "$OUT/jsonfuzz"
  # The hub and the state readers need whole modules (VigilCore imports VigilGeo and
  # swift-collections' HeapModule, which takes that package's own compiler settings), so SwiftPM
  # builds them, instrumented, in a scratch directory of their own (the everyday .build stays
  # uninstrumented); swiftc then compiles the entry points against their modules and links their objects.
  # The sanitizers go in one -sanitize= flag: swiftc keeps only the last of several, so SwiftPM's
  # `--sanitize fuzzer --sanitize address` (two flags) would build without coverage counters, and
  # libFuzzer would mutate blind over these modules.
  local SPM=(swift build --package-path "$ROOT" -c release --target VigilState --scratch-path "$ROOT/.build/fuzz-spm"
       -Xswiftc -sanitize=fuzzer,address)
  quietly state-modules "${SPM[@]}"
  # The NATS codec: a second target in the same scratch directory (VigilCore's objects are shared).
  quietly nats-modules swift build --package-path "$ROOT" -c release --target VigilNATS --scratch-path "$ROOT/.build/fuzz-spm" \
      -Xswiftc -sanitize=fuzzer,address
  # VigilPush (and VigilWire, which it imports): a third target in the same scratch directory.
  quietly push-modules swift build --package-path "$ROOT" -c release --target VigilPush --scratch-path "$ROOT/.build/fuzz-spm" \
      -Xswiftc -sanitize=fuzzer,address
  local BIN OBJECTS=() STATE_OBJECTS=() module
  BIN="$("${SPM[@]}" --show-bin-path)"
  for module in VigilCore VigilGeo VigilBytes HeapModule InternalCollectionsUtilities; do OBJECTS+=("$BIN/$module.build"/*.o); done
  STATE_OBJECTS=("${OBJECTS[@]}" "$BIN/VigilState.build"/*.o)
  quietly decoder-build swiftc "${FLAGS[@]}" -I "$BIN/Modules" -I "$BIN" -module-name DecoderFuzz \
      "$ROOT/Tests/fuzz/DecoderFuzz.swift" "${OBJECTS[@]}" -o "$OUT/decoderfuzz"
  quietly hub-build swiftc "${FLAGS[@]}" -I "$BIN/Modules" -I "$BIN" -module-name HubFuzz \
      "$ROOT/Tests/VigilTestSupport/MapHubOracle.swift" "$ROOT/Tests/VigilTestSupport/CheckedMapHub.swift" \
      "$ROOT/Tests/VigilTestSupport/PinNotice.swift" "$ROOT/Tests/fuzz/HubScript.swift" "$ROOT/Tests/fuzz/HubFuzz.swift" \
      "${OBJECTS[@]}" -o "$OUT/hubfuzz"
  # VigilState hashes with libcrypto (the state digest): its C module and the library.
  quietly snapshot-build swiftc "${FLAGS[@]}" -I "$BIN/Modules" -I "$BIN" -I "$ROOT/Sources/COpenSSL" -module-name SnapshotFuzz \
      "$ROOT/Tests/fuzz/SnapshotFuzz.swift" "${STATE_OBJECTS[@]}" -lcrypto -o "$OUT/snapshotfuzz"
  quietly nats-build swiftc "${FLAGS[@]}" -I "$BIN/Modules" -I "$BIN" -module-name NATSFuzz \
      "$ROOT/Tests/fuzz/FuzzChunks.swift" "$ROOT/Tests/fuzz/NATSFuzz.swift" "${OBJECTS[@]}" "$BIN/VigilNATS.build"/*.o -o "$OUT/natsfuzz"
  quietly push-build swiftc "${FLAGS[@]}" -I "$BIN/Modules" -I "$BIN" -I "$ROOT/Sources/COpenSSL" -I "$ROOT/Sources/CZlib" \
      -module-name PushFuzz "$ROOT/Tests/fuzz/PushFuzz.swift" "$BIN/VigilPush.build"/*.o "$BIN/VigilWire.build"/*.o \
      "$BIN/VigilBytes.build"/*.o -lcrypto -lz -o "$OUT/pushfuzz"
  quietly journal-build swiftc "${FLAGS[@]}" -I "$BIN/Modules" -I "$BIN" -I "$ROOT/Sources/COpenSSL" -module-name JournalFuzz \
      "$ROOT/Tests/fuzz/JournalFuzz.swift" "${STATE_OBJECTS[@]}" -lcrypto -o "$OUT/journalfuzz"
}

fuzz_run() {
  local target="$1" seconds="$2" corpus="$ROOT/.build/fuzz-corpus-$1" log="$OUT/$1-run.log"
  mkdir -p "$corpus"
  if [ -d "$ROOT/Tests/fuzz/seeds/$target" ] && [ -z "$(ls -A "$corpus")" ]; then cp "$ROOT/Tests/fuzz/seeds/$target"/* "$corpus/"; fi
  # Snapshots and journal segments are longer than a network message: room for a few records.
  local max_len=1024
  case "$target" in snapshot|journal) max_len=4096 ;; esac
  if "$OUT/${target}fuzz" -max_total_time="$seconds" -max_len="$max_len" -print_final_stats=1 \
      -artifact_prefix="$OUT/$target-" "$corpus" >"$log" 2>&1; then
    grep -E "stat::number_of_executed_units|stat::new_units_added" "$log" | tr '\n' ' '
    echo
    echo "fuzz[$target]: no crash in ${seconds} s"
  else
    grep -E "Fatal error|Precondition failed|ERROR|SUMMARY|Test unit written" "$log" | head -n 12
    echo "fuzz[$target]: FAILED (log $log; replay: $OUT/${target}fuzz ARTIFACT)"
    return 1
  fi
}
