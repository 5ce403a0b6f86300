/// A token bucket: `capacity` tokens, refilled continuously at `perMinute` a minute.
///
/// Times are milliseconds on any monotonic clock; the bucket stores its level in thousandths of a
/// token so that refills need no floating point.
public struct TokenBucket: Sendable {
    public let capacity: Int
    public let perMinute: Int
    private var milliTokens: Int64
    private var lastMs: Int64

    public init(capacity: Int, perMinute: Int, nowMs: Int64) {
        precondition(capacity > 0 && perMinute > 0)
        self.capacity = capacity
        self.perMinute = perMinute
        self.milliTokens = Int64(capacity) * 1000
        self.lastMs = nowMs
    }

    /// Takes one token, or returns how many milliseconds until one is available.
    public mutating func take(nowMs: Int64) -> Int64? {
        refill(nowMs)
        if milliTokens >= 1000 {
            milliTokens -= 1000
            return nil
        }
        // One token is 60,000 / perMinute ms of refill; scale the missing thousandths.
        let missing = 1000 - milliTokens
        return max(1, (missing * 60_000 + Int64(perMinute) * 1000 - 1) / (Int64(perMinute) * 1000))
    }

    private mutating func refill(_ nowMs: Int64) {
        guard nowMs > lastMs else { return }
        let gained = (nowMs - lastMs) * Int64(perMinute) * 1000 / 60_000
        if gained > 0 {
            milliTokens = min(Int64(capacity) * 1000, milliTokens + gained)
            // Advance only by the time that produced whole thousandths, keeping the remainder.
            lastMs += gained * 60_000 / (Int64(perMinute) * 1000)
            if milliTokens == Int64(capacity) * 1000 { lastMs = nowMs }
        }
    }
}
