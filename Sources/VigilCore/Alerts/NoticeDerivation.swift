/// The notices a change causes, and the notices a state implies. Both come from here, so the
/// notice a handler posts and the one a restart rebuilds from the restored state are the same
/// notice, with the same id (docs/design/alerts.md, "Notices").
extension Notice {
    /// A panic stream of `circle` started: to the members.
    public static func panicStarted(_ stream: PanicStream, circle: CircleID, ttlMs: Int64) -> Notice {
        make(.panicStarted, stream, circle: circle, at: stream.startedAt, ttlMs: ttlMs)
    }

    /// The stream's safety timer passed: to the members.
    public static func panicEscalated(_ stream: PanicStream, circle: CircleID, at: Int64, ttlMs: Int64) -> Notice {
        make(.panicEscalated, stream, circle: circle, at: at, ttlMs: ttlMs)
    }

    /// The stream ended: to the members.
    public static func panicEnded(_ stream: PanicStream, circle: CircleID, at: Int64, ttlMs: Int64) -> Notice {
        make(.panicEnded, stream, circle: circle, at: at, ttlMs: ttlMs)
    }

    /// A member asked "are you safe?": to the owner.
    public static func checkinRequested(_ circle: CircleID, ask: CheckinAsk, ttlMs: Int64) -> Notice {
        Notice(id: NoticeID(kind: .checkinRequested, circle: circle, at: ask.at, member: ask.member), circle: circle, stream: nil,
               status: nil, audience: .owner, expiresAt: PanicHub.saturatingSum(ask.at, ttlMs))
    }

    /// The owner answered "safe": to every member.
    public static func checkinAnswered(_ circle: CircleID, answer: CheckinAnswer, ttlMs: Int64) -> Notice {
        Notice(id: NoticeID(kind: .checkinAnswered, circle: circle, at: answer.at), circle: circle, stream: nil, status: nil,
               audience: .members(except: nil), expiresAt: PanicHub.saturatingSum(answer.at, ttlMs))
    }

    /// Every notice a stream of `circle` implies, in the order they happened: its start, its
    /// escalation, its end, each that happened. Whether each is still worth sending is the
    /// board's to judge (by its time to live).
    public static func implied(by stream: PanicStream, circle: CircleID, ttlMs: Int64) -> [Notice] {
        var out = [panicStarted(stream, circle: circle, ttlMs: ttlMs)]
        if let at = stream.missedCheckInAt { out.append(panicEscalated(stream, circle: circle, at: at, ttlMs: ttlMs)) }
        if let end = stream.ended { out.append(panicEnded(stream, circle: circle, at: end.at, ttlMs: ttlMs)) }
        return out
    }

    /// Every notice a circle implies: its unanswered requests, and its last answer.
    public static func implied(by circle: CheckinCircle, ttlMs: Int64) -> [Notice] {
        var out = circle.requests.map { checkinRequested(circle.id, ask: $0, ttlMs: ttlMs) }
        if let answer = circle.answer { out.append(checkinAnswered(circle.id, answer: answer, ttlMs: ttlMs)) }
        return out
    }

    private static func make(_ kind: NoticeKind, _ stream: PanicStream, circle: CircleID, at: Int64, ttlMs: Int64) -> Notice {
        Notice(id: NoticeID(kind: kind, stream: stream.id, at: at), circle: circle, stream: stream.id, status: stream.status,
               audience: .members(except: nil), expiresAt: PanicHub.saturatingSum(at, ttlMs))
    }
}
