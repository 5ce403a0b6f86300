/// What one attempt to deliver a notice came to, as the sender read the push service's or the
/// relay's answer (RFC 8030 §5, Standard Webhooks).
public enum DeliveryResult: Equatable, Sendable {
    /// 2xx: the service took it.
    case accepted
    /// 404 or 410: the subscription is gone for good; it is removed.
    case gone
    /// Any other 4xx (but 429): the request will not get better by sending it again.
    case refused(status: Int)
    /// 429 or 503, with the `Retry-After` the service gave (ms), if any.
    case throttled(retryAfterMs: Int64?)
    /// 5xx, a timeout, a refused or dropped connection, a name that did not resolve.
    case failed
}

/// How a delivery ended. The raw values are the journal's: never renumber them.
public enum DeliverySettlement: UInt8, CaseIterable, Sendable {
    case delivered = 1
    case gone = 2
    case refused = 3
    /// Its notice's time to live passed before a service took it.
    case expired = 4
    /// A member acknowledged the notice from another device, or the subscription was removed.
    case cancelled = 5

    public var name: String {
        switch self {
        case .delivered: return "delivered"
        case .gone: return "gone"
        case .refused: return "refused"
        case .expired: return "expired"
        case .cancelled: return "cancelled"
        }
    }
}

/// What the board decided after an attempt.
public enum DeliveryStep: Equatable, Sendable {
    /// Try again at this time (unix ms).
    case retry(at: Int64)
    /// Done, for this reason: journal it (so a restart does not send it again).
    case settled(DeliverySettlement)
}

/// One notice to one subscription.
public struct DeliveryKey<Target: Hashable & Sendable>: Hashable, Sendable {
    public let notice: NoticeID
    public let target: Target

    public init(notice: NoticeID, target: Target) {
        self.notice = notice
        self.target = target
    }
}
