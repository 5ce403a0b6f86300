/// How a token budget refills: at most `capacity` tokens held, `refill` tokens added every
/// `periodMs`, continuously (not in steps). Kept apart from the level (`TokenLevel`) so that a
/// table of many buckets with one rule (per-address budgets) stores 16 bytes an entry, not the rule
/// again in every entry.
public struct TokenRate: Equatable, Sendable {
    public var capacity: Int
    public var refill: Int
    public var periodMs: Int64

    public init(capacity: Int, refill: Int, periodMs: Int64) {
        precondition(capacity > 0 && refill > 0 && periodMs > 0, "a token rate holds and refills something")
        self.capacity = capacity
        self.refill = refill
        self.periodMs = periodMs
    }

    /// `refill` tokens a minute.
    public static func perMinute(_ refill: Int, capacity: Int) -> TokenRate {
        TokenRate(capacity: capacity, refill: refill, periodMs: 60_000)
    }

    /// `refill` tokens an hour.
    public static func perHour(_ refill: Int, capacity: Int) -> TokenRate {
        TokenRate(capacity: capacity, refill: refill, periodMs: 3_600_000)
    }

    /// `refill` tokens a second.
    public static func perSecond(_ refill: Int, capacity: Int) -> TokenRate {
        TokenRate(capacity: capacity, refill: refill, periodMs: 1_000)
    }

    /// Thousandths of a token: levels are kept in them so that refills need no floating point.
    var milliCapacity: Int64 { Int64(capacity) * 1000 }
    /// Thousandths of a token added per `periodMs`.
    var milliRefill: Int64 { Int64(refill) * 1000 }
}

/// The level of one token bucket, in thousandths of a token, as an anchor: at time `t` (ms, any
/// monotonic clock) it holds `min(capacity, milli + ⌊(t − anchorMs) · refill / period⌋)`.
///
/// Taking a token subtracts from `milli` and leaves the anchor where it is, so the fraction of a
/// thousandth that time has earned is never rounded away and `take`'s retry time is exact: the
/// first millisecond at which a token is there, not an estimate. The anchor moves forward by
/// whole periods (which keeps every product below `period × refill × 1000`, far from overflow
/// however long a bucket sits idle), and to the present when the bucket is full.
public struct TokenLevel: Equatable, Sendable {
    private var milli: Int64
    private var anchorMs: Int64

    /// A full bucket at `nowMs`.
    public init(full rate: TokenRate, nowMs: Int64) {
        milli = rate.milliCapacity
        anchorMs = nowMs
    }

    /// A level as `parts` gave it (for a store that keeps many levels in narrower fields).
    public init(parts: (milli: Int64, anchorMs: Int64)) {
        (milli, anchorMs) = parts
    }

    /// The two numbers that are the level: thousandths of a token, between 0 and the rate's
    /// `capacity × 1000`, and the anchor's time.
    public var parts: (milli: Int64, anchorMs: Int64) { (milli, anchorMs) }

    /// Takes one token, or says in how many milliseconds one will be there (at least 1).
    public mutating func take(_ rate: TokenRate, nowMs: Int64) -> Int64? {
        let held = level(rate, nowMs: nowMs)
        if held >= 1000 {
            milli -= 1000
            return nil
        }
        // The first t with milli + ⌊(t − anchor) · R / P⌋ ≥ 1000 is anchor + ⌈(1000 − milli) · P / R⌉.
        return anchorMs + Self.ceilDiv((1000 - milli) * rate.periodMs, rate.milliRefill) - nowMs
    }

    /// Whole tokens held at `nowMs`.
    public mutating func tokens(_ rate: TokenRate, nowMs: Int64) -> Int {
        Int(level(rate, nowMs: nowMs) / 1000)
    }

    /// The first time (ms) at which the bucket is full again, if nothing is taken meanwhile
    /// (`nowMs` or earlier when it is full already).
    public func fullAt(_ rate: TokenRate) -> Int64 {
        if milli >= rate.milliCapacity { return anchorMs }
        return anchorMs + Self.ceilDiv((rate.milliCapacity - milli) * rate.periodMs, rate.milliRefill)
    }

    /// Brings the anchor to `nowMs` as far as whole periods allow and returns the level there.
    /// A clock that goes back (`nowMs` before the anchor) refills nothing.
    private mutating func level(_ rate: TokenRate, nowMs: Int64) -> Int64 {
        guard nowMs > anchorMs else { return min(milli, rate.milliCapacity) }
        let elapsed = nowMs - anchorMs
        if elapsed >= rate.periodMs {
            let periods = elapsed / rate.periodMs
            // Enough periods to fill from any level reachable (≥ −refill): full, anchored now.
            if periods > Int64(rate.capacity / rate.refill) + 2 || milli + periods * rate.milliRefill >= rate.milliCapacity {
                milli = rate.milliCapacity
                anchorMs = nowMs
                return milli
            }
            milli += periods * rate.milliRefill
            anchorMs += periods * rate.periodMs
        }
        let held = milli + (nowMs - anchorMs) * rate.milliRefill / rate.periodMs
        if held >= rate.milliCapacity {
            milli = rate.milliCapacity
            anchorMs = nowMs
            return milli
        }
        return held
    }

    private static func ceilDiv(_ a: Int64, _ b: Int64) -> Int64 {
        a <= 0 ? 0 : (a + b - 1) / b
    }
}
