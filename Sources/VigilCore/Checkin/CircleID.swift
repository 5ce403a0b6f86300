/// A check-in circle's identity: 128 random bits, written as 22 characters of unpadded base64url,
/// like a stream id. The id alone opens nothing: the owner token or a member token does.
public typealias CircleID = Identifier128<CircleText>

/// The text form of a circle id: that of a stream id (`Base64URLText`), as a type of its own so
/// that a circle id and a stream id cannot be mixed up in code.
public enum CircleText: IdentifierTextForm {
    public static func text(high: UInt64, low: UInt64) -> String { Base64URLText.text(high: high, low: low) }
    public static func parse(_ utf8: UnsafeBufferPointer<UInt8>) -> (high: UInt64, low: UInt64)? { Base64URLText.parse(utf8) }
    public static func fixingRandomBits(high: UInt64, low: UInt64) -> (high: UInt64, low: UInt64) { (high, low) }
}
