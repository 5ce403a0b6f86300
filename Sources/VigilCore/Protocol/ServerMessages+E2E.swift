/// The parts of the panic messages that show an end-to-end encrypted stream's sealed points
/// (docs/PROTOCOL.md, "End-to-end encrypted streams"), written by `panicEvent` and the state
/// encoder (ServerMessages+Panic.swift).
extension ServerMessages {
    /// A sealed point's members, written where a clear point writes `lat`, `lon` and the rest:
    /// `sealed`, `kid` and the `status` it was sealed for. The seq it was sealed for is the
    /// event's (written by the caller) or, in the escalation's `last`, written by `sealedLast`.
    static func sealedPoint(_ p: SealedPoint, into w: inout JSONWriter) {
        w.key("sealed"); w.string(p.sealed.text)
        w.key("kid"); w.string(p.kid.text)
        w.key("status"); w.string(p.status.rawValue)
    }

    /// The escalation's `last` of an e2e stream, followed by `"position_known":false`: the
    /// server cannot know where the person is, and says so, so no client takes the absence of
    /// coordinates for a position.
    ///
    ///     "last":{"sealed":…,"kid":…,"status":…,"seq":N,"at":T},"position_known":false
    static func sealedLast(_ p: SealedPoint, seq: UInt64, at: Int64, into w: inout JSONWriter) {
        w.key("last")
        w.beginObject()
        sealedPoint(p, into: &w)
        w.key("seq"); w.int(Int64(clamping: seq))
        w.key("at"); w.int(at)
        w.endObject()
        w.key("position_known"); w.bool(false)
    }
}
