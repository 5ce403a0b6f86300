/// Paces actions at a rate from a periodic tick: credit accrues with elapsed time, at most
/// `burst` of it, and each action spends one. A late tick sends what fell due meanwhile (up to the
/// burst) instead of losing it; a long stall does not turn into a flood.
public struct RatePacer: Sendable {
    public let perSecond: Double
    public let burst: Double
    private var credit = 0.0
    private var lastNs: UInt64?

    /// `burst` defaults to a tenth of a second's worth (at least one action).
    public init(perSecond: Double, burst: Double? = nil) {
        self.perSecond = Swift.max(0, perSecond)
        self.burst = Swift.max(1, burst ?? perSecond / 10)
    }

    /// Actions due at `nowNs` (the credit they use is spent).
    public mutating func due(nowNs: UInt64) -> Int {
        defer { lastNs = nowNs }
        guard let last = lastNs, perSecond > 0 else { return 0 }
        credit = Swift.min(burst, credit + Double(nowNs &- last) / 1e9 * perSecond)
        let n = Int(credit)
        credit -= Double(n)
        return n
    }

    /// Gives back credit for actions that could not be taken (nobody was ready).
    public mutating func refund(_ n: Int) {
        credit = Swift.min(burst, credit + Double(n))
    }
}

/// Random strings shaped like the server's identifiers (base64url, no padding): a stream id is 22
/// characters (128 bits), a token 43 (256 bits). What an attacker guessing them would send.
public enum GuessedSecret {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func make<R: RandomNumberGenerator>(length: Int, using rng: inout R) -> String {
        String(decoding: (0..<length).map { _ in alphabet[Int(rng.next() & 63)] }, as: UTF8.self)
    }

    public static func streamID<R: RandomNumberGenerator>(using rng: inout R) -> String { make(length: 22, using: &rng) }
    public static func token<R: RandomNumberGenerator>(using rng: inout R) -> String { make(length: 43, using: &rng) }
}
