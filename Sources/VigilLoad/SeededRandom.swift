/// A seeded `RandomNumberGenerator` (xoshiro256**, seeded through SplitMix64), so that a run
/// repeats exactly with the same `--seed`: the same areas, positions and op order.
///
/// Why not `SystemRandomNumberGenerator`: it cannot be seeded. Why xoshiro256**: fast (a few
/// instructions per value), 256 bits of state, and good statistical quality; SplitMix64 spreads
/// a small seed (0, 1, 2 ...) over the whole state, as the algorithm's authors recommend, and
/// never yields the all-zero state xoshiro must avoid. Not for secrets.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var s0: UInt64
    private var s1: UInt64
    private var s2: UInt64
    private var s3: UInt64

    public init(seed: UInt64) {
        var mix = SplitMix64(state: seed)
        s0 = mix.next()
        s1 = mix.next()
        s2 = mix.next()
        s3 = mix.next()
    }

    public mutating func next() -> UInt64 {
        let result = rotl(s1 &* 5, 7) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = rotl(s3, 45)
        return result
    }

    /// An independent generator for one connection or one actor, derived from this one, so each
    /// gets its own stream and the streams do not depend on how the actors interleave.
    public mutating func fork() -> SeededRandom {
        SeededRandom(seed: next())
    }

    private func rotl(_ x: UInt64, _ k: UInt64) -> UInt64 {
        (x << k) | (x >> (64 - k))
    }
}
