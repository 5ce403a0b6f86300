/// A way to reach the owner or a member of a circle whose phone has no open connection (issue 24,
/// docs/design/alerts.md, "Subscriptions"): a browser's Web Push subscription, or a handle the
/// operator's webhook relay knows (a native app's APNs/FCM token, a phone number behind an SMS
/// gateway). Part of the circle's durable state, so a restart keeps it and revoking a member or
/// removing the circle takes it along.
///
/// The hub checks the shape of what it stores (lengths, the key's form); whether the endpoint is a
/// URL the daemon may POST to is the application's to judge (`VigilPush.PushEndpoint`), since the
/// domain knows nothing of URLs and networks. Nothing here is ever shown back: replies carry the id
/// only, and the state inspector counts.
public struct CheckinSubscription: Equatable, Sendable {
    public enum Target: Equatable, Sendable {
        /// A Push API subscription: its endpoint URL, the user agent's P-256 public key (65 bytes,
        /// uncompressed) and its 16-byte authentication secret (RFC 8291 §2).
        case webPush(endpoint: String, p256dh: [UInt8], auth: [UInt8])
        /// A handle the operator's relay maps to a device or number; opaque to vigild.
        case relay(handle: String)

        /// The bounds of every field: what the decoder admits, and what the state codecs accept.
        public static let maxEndpointBytes = 1024
        public static let p256dhBytes = 65
        public static let authBytes = 16
        public static let maxHandleBytes = 512

        /// Whether the fields are within their bounds: an endpoint of 1 to `maxEndpointBytes`
        /// bytes of visible ASCII, an uncompressed point's length and first byte, a 16-byte
        /// secret; a handle of 1 to `maxHandleBytes` bytes of visible ASCII.
        public var isWellFormed: Bool {
            switch self {
            case .webPush(let endpoint, let p256dh, let auth):
                return Self.isVisibleASCII(endpoint, maxBytes: Self.maxEndpointBytes)
                    && p256dh.count == Self.p256dhBytes && p256dh.first == 0x04 && auth.count == Self.authBytes
            case .relay(let handle):
                return Self.isVisibleASCII(handle, maxBytes: Self.maxHandleBytes)
            }
        }

        /// What makes two registrations of one holder the same subscription: the endpoint (a
        /// browser re-subscribing keeps it, with new keys) or the handle.
        func sameDestination(as other: Target) -> Bool {
            switch (self, other) {
            case (.webPush(let a, _, _), .webPush(let b, _, _)): return a == b
            case (.relay(let a), .relay(let b)): return a == b
            default: return false
            }
        }

        /// 1 to `maxBytes` bytes, each printable ASCII (0x21 to 0x7E: no space, no control).
        public static func isVisibleASCII(_ text: String, maxBytes: Int) -> Bool {
            let utf8 = text.utf8
            return !utf8.isEmpty && utf8.count <= maxBytes && utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
        }
    }

    public let id: SubscriptionID
    /// Who registered it, and whom it reaches.
    public let holder: CheckinRole
    public internal(set) var target: Target
    public let addedAt: Int64

    public init(id: SubscriptionID, holder: CheckinRole, target: Target, addedAt: Int64) {
        self.id = id
        self.holder = holder
        self.target = target
        self.addedAt = addedAt
    }
}

/// A subscription's identity: 128 random bits in the text form of a circle id (22 characters of
/// unpadded base64url). It names the subscription to `checkin.unregister`; it opens nothing.
public typealias SubscriptionID = Identifier128<SubscriptionText>

public enum SubscriptionText: IdentifierTextForm {
    public static func text(high: UInt64, low: UInt64) -> String { Base64URLText.text(high: high, low: low) }
    public static func parse(_ utf8: UnsafeBufferPointer<UInt8>) -> (high: UInt64, low: UInt64)? { Base64URLText.parse(utf8) }
    public static func fixingRandomBits(high: UInt64, low: UInt64) -> (high: UInt64, low: UInt64) { (high, low) }
}

/// The token a request about a circle comes with, when either the owner's or a member's will do
/// (`checkin.register`, `checkin.unregister`).
public enum CheckinCredential: Equatable, Sendable {
    case owner(token: String)
    case member(token: String)
}
