/// The `idempotency:` section (config/vigild.yaml, docs/LIMITS.md): how long answers are kept for
/// idempotency keys and how many.
public struct IdempotencySettings: Equatable, Sendable {
    /// How long a kept answer lives after it was first given (`window_s`, default 24 h).
    public var windowSeconds: Int
    public var windowMs: Int64 { Int64(windowSeconds) * 1000 }
    /// Kept answers in all (`max_keys`, default 100,000).
    public var maxKeys: Int
    /// Kept answers per client address (`max_keys_per_address`, default 1,000): one network
    /// cannot push everyone else's keys out.
    public var maxKeysPerAddress: Int

    public init(windowSeconds: Int = 86_400, maxKeys: Int = 100_000, maxKeysPerAddress: Int = 1_000) {
        self.windowSeconds = windowSeconds
        self.maxKeys = maxKeys
        self.maxKeysPerAddress = maxKeysPerAddress
    }
}
