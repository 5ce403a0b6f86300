/// SplitMix64 (Steele, Lea, Flood 2014): a tiny seeded generator, 64 bits of state and a few
/// instructions per value.
///
/// It seeds `SeededRandom` here, and it is the project's one seeded generator for everything that
/// must replay exactly from a seed but needs no statistical strength: the load client's mask keys,
/// vigil-bench's scenarios, and every property test (through VigilTestSupport). One copy, so a
/// seed means the same sequence everywhere. Not for secrets.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public var state: UInt64

    public init(state: UInt64) {
        self.state = state
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A double in `lo ..< hi` from the top 53 bits of one value: exactly one draw per call, so a
    /// scenario's sequence depends only on how many values it asked for (the standard library's
    /// `Double.random(in:using:)` promises no particular draws).
    public mutating func double(_ lo: Double, _ hi: Double) -> Double {
        lo + (hi - lo) * Double(next() >> 11) / Double(1 << 53)
    }
}
