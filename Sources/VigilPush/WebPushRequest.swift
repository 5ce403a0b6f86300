/// Everything of one push message's HTTP request but the connection (RFC 8030 §5): the endpoint,
/// the header fields and the encrypted body. The HTTP client adds the request line, `Host` and
/// `Content-Length`, and sends it; this type decides nothing about delivery.
///
/// Header fields: `Authorization: vapid …` (RFC 8292 §3), `Content-Encoding: aes128gcm`
/// (RFC 8291 §4), `TTL` (seconds the push service may hold the message, RFC 8030 §5.2), and when
/// asked `Urgency` (§5.3) and `Topic` (§5.4: a later message with the same topic replaces an
/// undelivered one).
public struct WebPushRequest: Sendable {
    public let endpoint: PushEndpoint
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]

    /// RFC 8030 §5.4: at most 32 characters of the base64url alphabet.
    public static let maxTopicLength = 32

    public init(notice: [UInt8], subscription: PushSubscriptionKeys, endpoint: PushEndpoint, signer: VAPIDSigner,
                now: Int64, ttl: Int, urgency: PushUrgency? = nil, topic: String? = nil) throws(WebPushRequestError) {
        let authorization: String
        do { authorization = try signer.authorization(for: endpoint, now: now) } catch { throw .vapid(error) }
        try self.init(notice: notice, subscription: subscription, endpoint: endpoint, authorization: authorization, ttl: ttl,
                      urgency: urgency, topic: topic)
    }

    /// With the `Authorization` value made already (`VAPIDSigner.authorization`): a sender that
    /// sends many messages to one push service signs one token for that origin and reuses it
    /// until shortly before it expires, as RFC 8292 §2 allows.
    public init(notice: [UInt8], subscription: PushSubscriptionKeys, endpoint: PushEndpoint, authorization: String,
                ttl: Int, urgency: PushUrgency? = nil, topic: String? = nil) throws(WebPushRequestError) {
        guard ttl >= 0 else { throw .badTTL(ttl) }
        if let topic {
            guard (1...Self.maxTopicLength).contains(topic.utf8.count),
                  topic.utf8.allSatisfy({ Self.isBase64URLCharacter($0) })
            else { throw .badTopic(topic) }
        }
        do { body = try WebPushEncryption.encrypt(notice, for: subscription) } catch { throw .encryption(error) }
        var headers: [(name: String, value: String)] = [
            ("Authorization", authorization),
            ("Content-Encoding", "aes128gcm"),
            ("Content-Type", "application/octet-stream"),
            ("TTL", String(ttl)),
        ]
        if let urgency { headers.append(("Urgency", urgency.rawValue)) }
        if let topic { headers.append(("Topic", topic)) }
        self.endpoint = endpoint
        self.headers = headers
    }

    static func isBase64URLCharacter(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "_"): return true
        default: return false
        }
    }
}

/// RFC 8030 §5.3's urgencies: how soon the user agent should be woken for the message.
public enum PushUrgency: String, Sendable, CaseIterable {
    case veryLow = "very-low"
    case low
    case normal
    case high
}

/// Why a push request could not be made.
public enum WebPushRequestError: Error, Equatable, Sendable, CustomStringConvertible {
    case encryption(WebPushError)
    case vapid(VAPIDError)
    case badTTL(Int)
    case badTopic(String)

    public var description: String {
        switch self {
        case .encryption(let error): return error.description
        case .vapid(let error): return error.description
        case .badTTL(let ttl): return "TTL \(ttl) is negative"
        case .badTopic(let topic): return "Topic \"\(topic)\" is not 1 to 32 base64url characters"
        }
    }
}
