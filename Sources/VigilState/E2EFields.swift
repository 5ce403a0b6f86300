import VigilCore

/// The binary forms of an end-to-end encrypted stream's parts (docs/design/e2e-streams.md), for
/// the journal records (kinds 33, 34, event kinds 7, 8) and snapshot version 9 that hold them.
///
///     kid      16 bytes (the id's bytes, not its text)
///     sealed   u32 byte count (28 ... maxSealedBytes) + the bytes as the client sent them
///     point    kid, status u8 (PanicFields' codes), sealed
///     keys     kid, u32 box count, then per box: member u32 (>= 1, strictly increasing), sealed
///
/// A sealed value is stored as the opaque bytes it is: the state directory holds nothing the
/// server could read a position from. `vigild state inspect` shows sizes only (`sizes`).
enum E2EFields {
    /// The largest sealed value a state file may hold: the config's largest cap
    /// (`panic.sealed_max_bytes`, at most 65,536). A larger count is damage, refused before any
    /// byte is copied.
    static let maxSealedBytes = 65_536
    static let minimumSealedBytes = 4 + SealedBytes.minimumBytes
    static let minimumBoxBytes = 4 + minimumSealedBytes

    static func write(_ kid: E2EKeyID, to w: inout StateWriter) {
        w.bytes.append(contentsOf: kid.bytes)
    }

    static func readKeyID(_ r: inout StateReader) throws(StateError) -> E2EKeyID {
        E2EKeyID(bytes: try r.bytes(16))
    }

    static func write(_ sealed: SealedBytes, to w: inout StateWriter) {
        w.u32(UInt32(truncatingIfNeeded: sealed.count))
        w.bytes.append(contentsOf: sealed.bytes)
    }

    static func readSealed(_ r: inout StateReader) throws(StateError) -> SealedBytes {
        let at = r.offset
        let n = Int(try r.u32())
        guard n >= SealedBytes.minimumBytes, n <= maxSealedBytes else {
            throw r.invalid("sealed value of \(n) bytes is outside \(SealedBytes.minimumBytes)...\(maxSealedBytes)", at: at)
        }
        return SealedBytes(bytes: try r.bytes(n))
    }

    static func write(_ point: SealedPoint, to w: inout StateWriter) {
        write(point.kid, to: &w)
        w.u8(PanicFields.code(point.status))
        write(point.sealed, to: &w)
    }

    static func readPoint(_ r: inout StateReader) throws(StateError) -> SealedPoint {
        let kid = try readKeyID(&r)
        let status = try PanicFields.readStatus(&r)
        return SealedPoint(kid: kid, status: status, sealed: try readSealed(&r))
    }

    static func write(_ keys: E2EKeys, to w: inout StateWriter) {
        write(keys.kid, to: &w)
        w.u32(UInt32(truncatingIfNeeded: keys.boxes.count))
        for box in keys.boxes {
            w.u32(box.member)
            write(box.box, to: &w)
        }
    }

    static func readKeys(_ r: inout StateReader) throws(StateError) -> E2EKeys {
        let kid = try readKeyID(&r)
        let n = try r.count(of: "member box", minimumElementBytes: minimumBoxBytes)
        var boxes: [MemberBox] = []
        boxes.reserveCapacity(n)
        var previous: UInt32 = 0
        for _ in 0..<n {
            let at = r.offset
            let member = try r.u32()
            guard member > previous else { throw r.invalid("member box \(member) is not after \(previous)", at: at) }
            previous = member
            boxes.append(MemberBox(member: member, box: try readSealed(&r)))
        }
        return E2EKeys(kid: kid, boxes: boxes)
    }

    /// What `vigild state inspect` may say of an e2e stream's keys: counts and sizes, never the
    /// bytes, the kid or a member's number.
    static func sizes(_ keys: E2EKeys) -> (boxes: Int, boxBytes: Int) {
        (keys.boxes.count, keys.boxBytes)
    }
}
