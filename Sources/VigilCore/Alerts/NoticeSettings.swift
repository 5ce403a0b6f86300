/// How notices are retried, and how many may wait (config `push.*`, docs/OPERATIONS.md).
public struct NoticeSettings: Equatable, Sendable {
    /// The first retry's delay; each further one doubles it (with jitter), up to `maxRetryMs`.
    public var firstRetryMs: Int64 = 1_000
    public var maxRetryMs: Int64 = 300_000
    /// A `Retry-After` longer than this is cut to it (a push service cannot park a notice for a day).
    public var maxRetryAfterMs: Int64 = 3_600_000
    /// Deliveries waiting or in flight, in all. A notice that would pass it is refused for the
    /// subscriptions that do not fit (counted), never queued without bound.
    public var maxPending = 100_000
    /// How long a notice is attempted after the change that caused it (and how long its
    /// settled deliveries are remembered, so that a restart does not send them again).
    public var ttlMs: Int64 = 86_400_000

    public init() {}
}
