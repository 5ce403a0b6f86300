import VigilCore

/// A kept answer's bytes, shared by the journal's `answerKept` record (kind 32) and snapshots
/// (version 8 and later):
///
///     lookup 32, request digest 32, createdAt i64, sealed u32 length (28 to 1 MiB) + bytes
enum KeptAnswerFields {
    /// The fewest bytes one can take (an empty answer sealed: nonce and tag).
    static let minimumBytes = 32 + 32 + 8 + 4 + 28

    static func write(_ a: KeptAnswer, to w: inout StateWriter) {
        w.bytes.append(contentsOf: a.lookup)
        w.bytes.append(contentsOf: a.requestDigest)
        w.i64(a.createdAt)
        w.u32(UInt32(truncatingIfNeeded: a.sealed.count))
        w.bytes.append(contentsOf: a.sealed)
    }

    static func read(_ r: inout StateReader) throws(StateError) -> KeptAnswer {
        let lookup = try r.bytes(KeptAnswer.digestBytes)
        let digest = try r.bytes(KeptAnswer.digestBytes)
        let createdAt = try r.time()
        let at = r.offset
        let length = Int(try r.u32())
        guard length >= 28, length <= KeptAnswer.maxSealedBytes else {
            throw r.invalid("sealed answer of \(length) bytes (28 to \(KeptAnswer.maxSealedBytes))", at: at)
        }
        return KeptAnswer(lookup: lookup, requestDigest: digest, createdAt: createdAt, sealed: try r.bytes(length))
    }
}
