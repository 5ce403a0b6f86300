// libFuzzer entry point for the snapshot reader; built and run by Tests/fuzz/run.
// Linked against the instrumented VigilState, VigilCore and VigilGeo modules.
//
// Every input goes to `SnapshotCodec.decode` with the checksum off (so random bytes reach the field
// decoders) and with it on. A file that decodes must re-encode to bytes that decode again to the
// same encoding (the format is canonical) and the same state digest, and `verify` must agree with
// the checked decode.
// Seeds: Tests/fuzz/seeds/snapshot, written by the real encoder (SnapshotFuzzSeedTests).
import VigilState

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let checked = try? SnapshotCodec.decode(bytes)
    precondition((checked != nil) == (SnapshotCodec.verify(bytes) && (try? SnapshotCodec.decode(bytes, verifyingChecksum: false)) != nil),
                 "verify and the checked decode disagree")
    guard let snapshot = try? SnapshotCodec.decode(bytes, verifyingChecksum: false) else { return 0 }
    let encoded = SnapshotCodec.encode(snapshot)
    guard let again = try? SnapshotCodec.decode(encoded) else { preconditionFailure("a decoded snapshot re-encodes to bytes that do not decode") }
    precondition(SnapshotCodec.encode(again) == encoded, "re-encoding is not stable")
    precondition(again.pins.count == snapshot.pins.count && again.streams.count == snapshot.streams.count, "counts changed")
    precondition(again.replicatedSequence == snapshot.replicatedSequence, "the cluster sequence changed")
    // The state digest of what was read survives the round trip (any time: here, the snapshot's own).
    let rules = StateDigest.Rules(now: snapshot.takenAt, endedGraceMs: 3_600_000, circleIdleLifetimeMs: 2_592_000_000)
    precondition(StateDigest.of(snapshot: again, rules: rules) == StateDigest.of(snapshot: snapshot, rules: rules), "the digest changed")
    return 0
}
