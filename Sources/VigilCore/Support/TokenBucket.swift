/// A token bucket: `capacity` tokens, refilled continuously at `perMinute` a minute. The
/// per-session limits of one connection; a table of many buckets under one rule keeps
/// `TokenLevel`s and the `TokenRate` once instead (see `AddressBudgets`).
///
/// Times are milliseconds on any monotonic clock. The retry time `take` returns is exact: a take
/// at that time succeeds and one a millisecond earlier does not (see `TokenLevel`).
public struct TokenBucket: Sendable {
    public let rate: TokenRate
    private var level: TokenLevel

    public init(capacity: Int, perMinute: Int, nowMs: Int64) {
        self.init(rate: .perMinute(perMinute, capacity: capacity), nowMs: nowMs)
    }

    /// A full bucket with any rate.
    public init(rate: TokenRate, nowMs: Int64) {
        self.rate = rate
        self.level = TokenLevel(full: rate, nowMs: nowMs)
    }

    public var capacity: Int { rate.capacity }
    /// Tokens a minute (rounded down for a rate given over another period).
    public var perMinute: Int { Int(Int64(rate.refill) * 60_000 / rate.periodMs) }

    /// Takes one token, or returns how many milliseconds until one is available.
    public mutating func take(nowMs: Int64) -> Int64? {
        level.take(rate, nowMs: nowMs)
    }
}
