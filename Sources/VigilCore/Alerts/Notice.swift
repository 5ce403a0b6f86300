/// What a notice tells a contact who is not watching (docs/design/alerts.md, "Notices").
///
/// The raw values are the journal's and the notice id's bytes: never renumber them.
public enum NoticeKind: UInt8, CaseIterable, Sendable {
    /// A panic stream started for the circle: to its members.
    case panicStarted = 1
    /// The stream's safety timer passed without a check-in (the hub set it red): to its members.
    case panicEscalated = 2
    /// The stream ended (safe, cancelled, abandoned): to its members.
    case panicEnded = 3
    /// A member asked "are you safe?": to the owner.
    case checkinRequested = 4
    /// The owner answered "safe": to the members.
    case checkinAnswered = 5

    /// The name in push payloads, webhook bodies and metrics.
    public var name: String {
        switch self {
        case .panicStarted: return "panic_started"
        case .panicEscalated: return "panic_escalated"
        case .panicEnded: return "panic_ended"
        case .checkinRequested: return "checkin_requested"
        case .checkinAnswered: return "checkin_answered"
        }
    }

    /// Whether the notice is about a panic stream (its subject is the stream, not the circle).
    public var isAboutStream: Bool {
        switch self {
        case .panicStarted, .panicEscalated, .panicEnded: return true
        case .checkinRequested, .checkinAnswered: return false
        }
    }

    /// Danger and a question about it go out at `Urgency: high` (RFC 8030 §5.3): a phone in
    /// power saving wakes for them. An end or an answer can wait for the next wake-up.
    public var isUrgent: Bool {
        switch self {
        case .panicStarted, .panicEscalated, .checkinRequested: return true
        case .panicEnded, .checkinAnswered: return false
        }
    }
}

/// Who a notice goes to.
public enum NoticeAudience: Equatable, Sendable {
    /// The circle's owner (its subscriptions registered with the owner token).
    case owner
    /// Every live member of the circle but `except` (the member whose question it is, if any).
    case members(except: UInt32?)

    public func includes(_ role: CheckinRole) -> Bool {
        switch (self, role) {
        case (.owner, .owner): return true
        case (.members(let except), .member(let m)): return m != except
        default: return false
        }
    }
}

/// A notice's identity, derived from the change that caused it: the stream or circle, the kind,
/// the change's time, (for a question) the member who asked, and the escalation step (0: the
/// notice as first sent; k: the k-th step of `push.escalation`, sent again because nobody
/// acknowledged it). Derived rather than drawn, so
/// that the notice rebuilt from the restored state after a restart has the id it had before:
/// the push `Topic`'s sibling, the webhook id, and the key under which deliveries are settled.
public struct NoticeID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The stream's or the circle's 128-bit id.
    public let subjectHigh: UInt64
    public let subjectLow: UInt64
    public let kind: NoticeKind
    public let at: Int64
    /// The member who asked (`checkinRequested`); 0 otherwise.
    public let member: UInt32
    /// The escalation step.
    public let step: UInt8

    public init(kind: NoticeKind, subjectHigh: UInt64, subjectLow: UInt64, at: Int64, member: UInt32 = 0, step: UInt8 = 0) {
        self.kind = kind
        self.subjectHigh = subjectHigh
        self.subjectLow = subjectLow
        self.at = at
        self.member = member
        self.step = step
    }

    /// The same notice at escalation step `step`.
    public func atStep(_ step: UInt8) -> NoticeID {
        NoticeID(kind: kind, subjectHigh: subjectHigh, subjectLow: subjectLow, at: at, member: member, step: step)
    }

    /// The notice as first sent (what an acknowledgement is about, whichever step it came by).
    public var base: NoticeID { atStep(0) }

    public init(kind: NoticeKind, stream: StreamID, at: Int64) {
        self.init(kind: kind, subjectHigh: stream.high, subjectLow: stream.low, at: at)
    }

    public init(kind: NoticeKind, circle: CircleID, at: Int64, member: UInt32 = 0) {
        self.init(kind: kind, subjectHigh: circle.high, subjectLow: circle.low, at: at, member: member)
    }

    public static let byteCount = 30

    /// 16 bytes of subject, the kind, the time, the member and the step, big-endian.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.byteCount)
        func put<T: FixedWidthInteger>(_ v: T) {
            for i in (0..<(T.bitWidth / 8)).reversed() { out.append(UInt8(truncatingIfNeeded: v >> (i * 8))) }
        }
        put(subjectHigh)
        put(subjectLow)
        out.append(kind.rawValue)
        put(at)
        put(member)
        out.append(step)
        return out
    }

    /// The byte form read back; nil for anything else (a wrong length or an unknown kind).
    public init?(bytes: some Collection<UInt8>) {
        let b = Array(bytes)
        guard b.count == Self.byteCount, let kind = NoticeKind(rawValue: b[16]) else { return nil }
        func word<T: FixedWidthInteger>(_ from: Int, _: T.Type) -> T {
            var v: T = 0
            for i in 0..<(T.bitWidth / 8) { v = v << 8 | T(b[from + i]) }
            return v
        }
        self.init(kind: kind, subjectHigh: word(0, UInt64.self), subjectLow: word(8, UInt64.self),
                  at: word(17, Int64.self), member: word(25, UInt32.self), step: b[29])
    }

    /// Parses `description`; nil for anything else.
    public init?(_ text: String) {
        guard text.utf8.count == 40, let bytes = Base64URL.decode(text) else { return nil }
        self.init(bytes: bytes)
    }

    /// Unpadded base64url of the bytes (40 characters): the id clients ack and receivers dedupe by.
    public var description: String { Base64URL.encode(bytes) }

    public static func < (a: NoticeID, b: NoticeID) -> Bool {
        (a.at, a.subjectHigh, a.subjectLow, a.kind.rawValue, a.member, a.step) < (b.at, b.subjectHigh, b.subjectLow, b.kind.rawValue, b.member, b.step)
    }
}

/// One notice: what happened, in which circle, to whom, and until when it is worth delivering.
/// It holds no location, label or note: a payload is built from these fields alone.
public struct Notice: Equatable, Sendable {
    public let id: NoticeID
    public let circle: CircleID
    /// The stream, for the panic kinds.
    public let stream: StreamID?
    /// The stream's status when the notice was made (panic kinds).
    public let status: PanicStatus?
    public let audience: NoticeAudience
    /// After this (unix ms) the notice is no longer attempted.
    public let expiresAt: Int64

    public var kind: NoticeKind { id.kind }
    public var at: Int64 { id.at }

    public init(id: NoticeID, circle: CircleID, stream: StreamID?, status: PanicStatus?, audience: NoticeAudience, expiresAt: Int64) {
        self.id = id
        self.circle = circle
        self.stream = stream
        self.status = status
        self.audience = audience
        self.expiresAt = expiresAt
    }
}
