import VigilCore
import VigilLoad

/// Deterministic stand-in for OpenSSL in tests: random bytes from a seeded generator, and a
/// digest that is a keyed mix of the token's bytes (collision-free enough for tests; the daemon
/// uses SHA-256). The same seed gives the same ids and tokens on every run.
///
/// A class, as `Secrets` is used: the hubs take it by value of the protocol and draw from it, so
/// every draw must advance one shared state. Also the dice of random tests (`next`, `roll`, `unit`).
public final class TestSecrets: Secrets {
    private var generator: SplitMix64

    public init(seed: UInt64 = 0x9E37_79B9_7F4A_7C15) {
        generator = SplitMix64(state: seed)
    }

    public func next() -> UInt64 { generator.next() }

    /// 0 ..< n.
    public func roll(_ n: Int) -> Int { Int(next() % UInt64(n)) }

    /// A double in 0 ..< 1.
    public func unit() -> Double { generator.double(0, 1) }

    public func randomBytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) }
    }

    public func digest(ofToken token: String) -> TokenDigest {
        var h: [UInt64] = [0xCBF2_9CE4_8422_2325, 0x1000_0000_01B3, 0x8422_2325, 0xDEAD_BEEF]
        for (i, b) in token.utf8.enumerated() {
            h[i % 4] = (h[i % 4] ^ UInt64(b)) &* 0x100_0000_01B3
        }
        var bytes: [UInt8] = []
        for w in h { for j in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: w >> UInt64(j * 8))) } }
        return TokenDigest(bytes: bytes)
    }
}
