import VigilWire

/// A webhook endpoint's signing secret (Standard Webhooks): written `whsec_` + base64 of its bytes,
/// which are the HMAC key. The spec asks for 24 to 64 bytes; `generate` makes 32.
///
/// Its `description` never shows the key: a secret that reaches a log line is no longer one.
public struct WebhookSecret: Hashable, Sendable, CustomStringConvertible {
    public static let prefix = "whsec_"
    public static let byteRange = 24...64

    /// The HMAC key.
    public let key: [UInt8]

    /// From `whsec_<base64>` (canonical standard base64, RFC 4648 §4).
    public init(_ text: String) throws(WebhookError) {
        guard text.hasPrefix(Self.prefix) else { throw .badSecret("does not start with whsec_") }
        guard let key = Crypto.base64Decode(String(text.dropFirst(Self.prefix.count))) else { throw .badSecret("not base64 after whsec_") }
        try self.init(key: key)
    }

    public init(key: [UInt8]) throws(WebhookError) {
        guard Self.byteRange.contains(key.count) else { throw .badSecret("\(key.count) bytes, not 24 to 64") }
        self.key = key
    }

    /// A new random secret of 32 bytes (RAND_bytes).
    public static func generate() -> WebhookSecret {
        // 32 is within byteRange: this init cannot throw.
        try! WebhookSecret(key: SecureRandom.bytes(count: 32))
    }

    /// The text form to hand to the receiving side.
    public var text: String { Self.prefix + Crypto.base64Encode(key) }

    public var description: String { "whsec_(redacted)" }
}
