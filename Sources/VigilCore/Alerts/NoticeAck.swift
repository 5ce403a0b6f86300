/// "I have seen it": the owner or a member of a circle acknowledged a notice, from any of its
/// devices (`checkin.ack`). Durable and told to the circle (`checkin.acked`), so the person in
/// danger and the other members see who has seen it and when; it cancels the same notice on the
/// holder's other devices, and stops the escalation ladder (`push.escalation`) of that notice.
/// Kept with the circle (`CheckinHub.acks`), dropped with it, and forgotten with the notice.
public struct NoticeAck: Equatable, Sendable {
    public let circle: CircleID
    /// The notice as first sent (`NoticeID.base`), whichever step the holder saw.
    public let notice: NoticeID
    public let by: CheckinRole
    public let at: Int64

    public init(circle: CircleID, notice: NoticeID, by: CheckinRole, at: Int64) {
        self.circle = circle
        self.notice = notice.base
        self.by = by
        self.at = at
    }
}

extension CheckinHub {
    /// Records an acknowledgement; nil when the circle is not held or the holder acknowledged the
    /// notice already (the first one counts: its time is what the others see).
    @discardableResult
    public mutating func recordAck(_ ack: NoticeAck) -> NoticeAck? {
        guard circles[ack.circle] != nil else { return nil }
        var held = acks[ack.circle] ?? []
        guard !held.contains(where: { $0.notice == ack.notice && $0.by == ack.by }) else { return nil }
        held.append(ack)
        acks[ack.circle] = held
        return ack
    }

    /// The circle's acknowledgements, oldest first.
    public func acks(of circle: CircleID) -> [NoticeAck] { acks[circle] ?? [] }

    /// Whether anyone acknowledged the notice (any step of it).
    public func isAcknowledged(_ notice: NoticeID, in circle: CircleID) -> Bool {
        acks[circle]?.contains { $0.notice == notice.base } ?? false
    }

    /// Every acknowledgement held, by circle, oldest first (for snapshots).
    public func exportAcks() -> [NoticeAck] {
        acks.keys.sorted().flatMap { acks[$0]! }
    }

    /// Forgets the acknowledgements of notices made before `cutoff`.
    public mutating func forgetAcks(before cutoff: Int64) {
        for (id, held) in acks {
            let kept = held.filter { $0.notice.at >= cutoff }
            acks[id] = kept.isEmpty ? nil : kept
        }
    }
}

extension CheckinHub {
    /// The most acknowledgements a circle keeps (the oldest go first): bounded whatever its
    /// members acknowledge.
    public static let maxAcksPerCircle = 1_000

    /// `checkin.ack`: the owner or a live member (`credential`) says it has seen `notice`. The
    /// notice must be one of this circle's (`belongs`: the application's judgement for a
    /// stream's notice, whose stream the panic hub holds), meant for the caller (its audience),
    /// and within its time to live (`ttlMs`). The first acknowledgement of a notice by a holder
    /// is recorded and told to everyone listening; a second is `.success(nil)`: nothing changed.
    public mutating func acknowledge(_ id: CircleID, credential: CheckinCredential, notice: NoticeID?, belongs: Bool,
                                     ttlMs: Int64, secrets: Secrets, now: Int64, out: inout [CheckinDelivery])
        -> Result<NoticeAck?, CheckinFailure> {
        guard let role = holder(of: id, credential, secrets: secrets) else { return .failure(.forbidden) }
        guard let notice, belongs, notice.at <= now + 60_000, PanicHub.saturatingSum(notice.at, ttlMs) > now,
              Self.audience(of: notice).includes(role)
        else { return .failure(.unknownNotice) }
        guard let ack = recordAck(NoticeAck(circle: id, notice: notice, by: role, at: now)) else { return .success(nil) }
        if let held = acks[id], held.count > Self.maxAcksPerCircle { acks[id] = Array(held.suffix(Self.maxAcksPerCircle)) }
        var label: String?
        if case .member(let m) = role { label = circles[id]?.member(m)?.label }
        deliver(.acked(ack, label: label), of: id, out: &out)
        return .success(ack)
    }

    /// Whom a notice of this kind goes to (`Notice`'s audience, by kind alone).
    static func audience(of notice: NoticeID) -> NoticeAudience {
        notice.kind == .checkinRequested ? .owner : .members(except: nil)
    }
}
