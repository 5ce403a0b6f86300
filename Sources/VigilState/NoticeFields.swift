import VigilCore

/// A notice settlement's bytes, as the journal (record kind 30) and snapshots (version 7) keep
/// it: circle id 16, notice id 30 (`NoticeID.bytes`), subscription id 16, settlement u8.
enum NoticeFields {
    static let byteCount = 16 + NoticeID.byteCount + 16 + 1

    static func write(_ s: NoticeSettlement, to w: inout StateWriter) {
        w.circleID(s.circle)
        w.bytes.append(contentsOf: s.notice.bytes)
        w.word(s.subscription.high)
        w.word(s.subscription.low)
        w.u8(s.settlement.rawValue)
    }

    /// An acknowledgement: circle id 16, notice id 30, by u32 (0 the owner), at i64.
    static let ackByteCount = 16 + NoticeID.byteCount + 4 + 8

    static func write(_ a: NoticeAck, to w: inout StateWriter) {
        w.circleID(a.circle)
        w.bytes.append(contentsOf: a.notice.bytes)
        switch a.by {
        case .owner: w.u32(0)
        case .member(let m): w.u32(m)
        }
        w.i64(a.at)
    }

    static func readAck(_ r: inout StateReader) throws(StateError) -> NoticeAck {
        let circle = try r.circleID()
        let notice = try readNotice(&r)
        guard notice.step == 0 else { throw r.invalid("an acknowledgement names the notice as first sent (step 0)", at: r.offset - 1) }
        let by = try r.u32()
        return NoticeAck(circle: circle, notice: notice, by: by == 0 ? .owner : .member(by), at: try r.time())
    }

    static func readNotice(_ r: inout StateReader) throws(StateError) -> NoticeID {
        let at = r.offset
        guard let notice = NoticeID(bytes: try r.bytes(NoticeID.byteCount)) else { throw r.invalid("unknown notice kind", at: at + 16) }
        return notice
    }

    static func read(_ r: inout StateReader) throws(StateError) -> NoticeSettlement {
        let circle = try r.circleID()
        let notice = try readNotice(&r)
        let subscription = SubscriptionID(high: try r.word(), low: try r.word())
        let code = try r.u8()
        guard let settlement = DeliverySettlement(rawValue: code) else { throw r.invalid("unknown settlement \(code)", at: r.offset - 1) }
        return NoticeSettlement(circle: circle, notice: notice, subscription: subscription, settlement: settlement)
    }
}
