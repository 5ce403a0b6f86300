import VigilCore

/// A notice settlement's bytes, as the journal (record kind 30) and snapshots (version 7) keep
/// it: circle id 16, notice id 29 (`NoticeID.bytes`), subscription id 16, settlement u8.
enum NoticeFields {
    static let byteCount = 16 + NoticeID.byteCount + 16 + 1

    static func write(_ s: NoticeSettlement, to w: inout StateWriter) {
        w.circleID(s.circle)
        w.bytes.append(contentsOf: s.notice.bytes)
        w.word(s.subscription.high)
        w.word(s.subscription.low)
        w.u8(s.settlement.rawValue)
    }

    static func read(_ r: inout StateReader) throws(StateError) -> NoticeSettlement {
        let circle = try r.circleID()
        let at = r.offset
        guard let notice = NoticeID(bytes: try r.bytes(NoticeID.byteCount)) else { throw r.invalid("unknown notice kind", at: at + 16) }
        let subscription = SubscriptionID(high: try r.word(), low: try r.word())
        let code = try r.u8()
        guard let settlement = DeliverySettlement(rawValue: code) else { throw r.invalid("unknown settlement \(code)", at: r.offset - 1) }
        return NoticeSettlement(circle: circle, notice: notice, subscription: subscription, settlement: settlement)
    }
}
