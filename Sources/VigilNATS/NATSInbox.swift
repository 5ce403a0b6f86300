/// Reply subjects for request/reply: one wildcard subscription per connection,
/// `_INBOX.<random>.*`, and one token per request after it.
public enum NATSInbox {
    private static let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)

    /// `_INBOX.` and 22 random base-62 characters (about 131 bits: not guessable by other clients
    /// of the same account, which could otherwise answer our requests).
    public static func makePrefix(using random: inout some RandomNumberGenerator) -> String {
        "_INBOX." + token(length: 22, using: &random)
    }

    public static func token(length: Int, using random: inout some RandomNumberGenerator) -> String {
        String(decoding: (0..<length).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &random)] }, as: UTF8.self)
    }
}
