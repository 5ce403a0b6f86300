@testable import VigilCore

/// Deterministic stand-in for OpenSSL: a seeded generator, and a digest that is a keyed mix of the
/// token's bytes (collision-free enough for tests; the daemon uses SHA-256).
final class TestSecrets: Secrets {
    private var state: UInt64
    init(seed: UInt64 = 0x9E37_79B9_7F4A_7C15) { state = seed }

    func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    func randomBytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) }
    }

    func digest(ofToken token: String) -> TokenDigest {
        var h: [UInt64] = [0xCBF2_9CE4_8422_2325, 0x1000_0000_01B3, 0x84222325, 0xDEAD_BEEF]
        for (i, b) in token.utf8.enumerated() {
            h[i % 4] = (h[i % 4] ^ UInt64(b)) &* 0x100_0000_01B3
        }
        var bytes: [UInt8] = []
        for w in h { for j in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: w >> UInt64(j * 8))) } }
        return TokenDigest(bytes: bytes)
    }
}
