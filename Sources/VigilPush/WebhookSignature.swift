import VigilWire

/// Standard Webhooks signatures: the `webhook-signature` of a body is `v1,` + base64 of
/// HMAC-SHA256(secret, id "." timestamp "." body), sent with `webhook-id` and `webhook-timestamp`.
/// The header may hold several signatures separated by spaces (one per secret while a secret is
/// being rotated); a receiver accepts the webhook when any `v1` one matches and the timestamp is
/// within its tolerance (5 minutes by default) of its clock.
///
/// The id stays the same across retries of one webhook (a receiver deduplicates on it); the
/// timestamp is the attempt's, so a retry is signed again.
public enum WebhookSignature {
    /// The receiving side's default tolerance, as the spec's libraries use.
    public static let defaultTolerance: Int64 = 5 * 60
    /// An id is an identifier, not a payload; the bound keeps the header short.
    public static let maxIDByteCount = 255

    /// One `v1,<base64>` entry for `body` under `secret`.
    public static func sign(id: String, timestamp: Int64, body: [UInt8], secret: WebhookSecret) throws(WebhookError) -> String {
        try checkID(id)
        return "v1," + Crypto.base64Encode(mac(id: id, timestamp: String(timestamp), body: body, key: secret.key))
    }

    /// The three headers of one attempt, signed with every secret in `secrets` (the current one and,
    /// during a rotation, the one before): name and value, in the order they are sent.
    public static func headers(id: String, timestamp: Int64, body: [UInt8], secrets: [WebhookSecret]) throws(WebhookError) -> [(name: String, value: String)] {
        var signatures: [String] = []
        for secret in secrets { signatures.append(try sign(id: id, timestamp: timestamp, body: body, secret: secret)) }
        return [("webhook-id", id), ("webhook-timestamp", String(timestamp)), ("webhook-signature", signatures.joined(separator: " "))]
    }

    /// The receiving side: whether the header values verify for `body` under any of `secrets` at
    /// `now`. Throws the first reason it does not: the id, the timestamp's form, its age, then the
    /// signatures (compared in constant time; entries of other versions are skipped).
    public static func verify(id: String, timestamp: String, signatureHeader: String, body: [UInt8],
                              secrets: [WebhookSecret], now: Int64, tolerance: Int64 = defaultTolerance) throws(WebhookError) {
        try checkID(id)
        guard (1...19).contains(timestamp.utf8.count), timestamp.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
              let seconds = Int64(timestamp)
        else { throw .badTimestamp }
        guard abs(now - seconds) <= tolerance else { throw .timestampOutOfTolerance(timestamp: seconds, now: now) }
        let offered = signatureHeader.split(separator: " ").compactMap { entry -> [UInt8]? in
            guard entry.hasPrefix("v1,") else { return nil }
            return Crypto.base64Decode(String(entry.dropFirst(3)))
        }
        for secret in secrets {
            let expected = mac(id: id, timestamp: timestamp, body: body, key: secret.key)
            if offered.contains(where: { HMACSHA256.equal($0, expected) }) { return }
        }
        throw .noMatchingSignature
    }

    private static func mac(id: String, timestamp: String, body: [UInt8], key: [UInt8]) -> [UInt8] {
        var content = Array(id.utf8)
        content.append(UInt8(ascii: "."))
        content += timestamp.utf8
        content.append(UInt8(ascii: "."))
        content += body
        return HMACSHA256.mac(key: key, message: content)
    }

    /// Visible ASCII without spaces, 1 to 255 bytes: a header value that needs no quoting, and no
    /// "." ambiguity matters since the timestamp after it is digits only.
    private static func checkID(_ id: String) throws(WebhookError) {
        let bytes = id.utf8
        guard (1...maxIDByteCount).contains(bytes.count), bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .badID }
    }
}
