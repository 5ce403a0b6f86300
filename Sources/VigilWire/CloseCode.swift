/// A WebSocket close status code (RFC 6455 §7.4).
///
/// The constants cover the codes Vigil sends or names. `isValidReceived` decides
/// which codes a peer may put in a close frame; anything else is a protocol error.
public struct CloseCode: RawRepresentable, Hashable, Sendable {
    public var rawValue: UInt16

    public init(rawValue: UInt16) {
        self.rawValue = rawValue
    }

    /// 1000: the purpose of the connection has been fulfilled.
    public static let normal = CloseCode(rawValue: 1000)
    /// 1001: the endpoint is going away (server shutdown, page navigation).
    public static let goingAway = CloseCode(rawValue: 1001)
    /// 1002: the peer broke the framing rules.
    public static let protocolError = CloseCode(rawValue: 1002)
    /// 1003: the endpoint cannot accept this kind of data.
    public static let unsupportedData = CloseCode(rawValue: 1003)
    /// 1005: reported locally when a close frame carried no code. Never sent on the wire.
    public static let noStatus = CloseCode(rawValue: 1005)
    /// 1006: reported locally when the connection dropped without a close frame. Never sent on the wire.
    public static let abnormal = CloseCode(rawValue: 1006)
    /// 1007: message data inconsistent with its type (invalid UTF-8 in text).
    public static let invalidPayload = CloseCode(rawValue: 1007)
    /// 1008: the message violates the endpoint's policy.
    public static let policyViolation = CloseCode(rawValue: 1008)
    /// 1009: the message is too big to process.
    public static let messageTooBig = CloseCode(rawValue: 1009)
    /// 1010: (client only) the server did not negotiate a required extension.
    public static let mandatoryExtension = CloseCode(rawValue: 1010)
    /// 1011: the server hit an unexpected condition.
    public static let internalError = CloseCode(rawValue: 1011)
    /// 1013: try again later (IANA registry, after RFC 6455).
    public static let tryAgainLater = CloseCode(rawValue: 1013)

    /// Whether a peer may legally send `code` in a close frame.
    ///
    /// - 1000-1003 and 1007-1011 are defined by RFC 6455 §7.4.1.
    /// - 1012 (service restart), 1013 (try again later) and 1014 (bad gateway) were
    ///   added to the IANA "WebSocket Close Code Number Registry" (§11.7) after the RFC;
    ///   they are registered codes in the 1000-2999 range, so they are accepted.
    /// - 1004 is reserved; 1005, 1006 and 1015 are reserved for local reporting and
    ///   "MUST NOT be set as a status code in a Close control frame" (§7.4.1).
    /// - 0-999 are unused; 1016-2999 are reserved for future registration (§7.4.2),
    ///   so a peer cannot mean anything by them yet.
    /// - 3000-3999 (registered for libraries/frameworks) and 4000-4999 (private use) are valid.
    /// - 5000 and above are outside every range the RFC defines.
    @inlinable
    public static func isValidReceived(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999:
            return true
        default:
            return false
        }
    }
}
