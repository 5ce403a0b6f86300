/// How long to wait before the next connection attempt: exponential from `baseMs` up to `maxMs`,
/// with "equal jitter" (half the delay fixed, half random) so that nodes that lost the same
/// server do not all come back in the same millisecond. A success resets it.
public struct NATSReconnectBackoff: Equatable, Sendable {
    public let baseMs: Int64
    public let maxMs: Int64
    /// Failed attempts since the last success.
    public private(set) var failures = 0

    public init(baseMs: Int64, maxMs: Int64) {
        precondition(baseMs > 0 && maxMs >= baseMs)
        self.baseMs = baseMs
        self.maxMs = maxMs
    }

    /// The delay before the next attempt after one more failure.
    public mutating func nextDelayMs(using random: inout some RandomNumberGenerator) -> Int64 {
        let shift = min(failures, 30)
        failures += 1
        let ceiling = min(maxMs, baseMs << Int64(shift))
        let half = ceiling / 2
        return ceiling - half + Int64.random(in: 0...half, using: &random)
    }

    public mutating func succeeded() { failures = 0 }
}
