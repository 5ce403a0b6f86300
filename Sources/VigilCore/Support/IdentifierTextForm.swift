/// How a kind of `Identifier128` is written as text: the one thing pin ids and stream ids do not
/// share. Implemented by caseless enums, used only as `Identifier128`'s type parameter.
///
/// Every identifier must have exactly one text form that `parse` accepts back (either case of
/// hex counts as one for UUIDs, as RFC 4122 says), so that ids compared as text and as values agree.
public protocol IdentifierTextForm: Sendable {
    /// The text of the identifier whose words are `high` and `low`.
    static func text(high: UInt64, low: UInt64) -> String
    /// The words of the identifier whose text is exactly `utf8`, nil when it is not one in this
    /// form. Bytes rather than a `String`, so scanners can parse an id inside a message in place.
    static func parse(_ utf8: UnsafeBufferPointer<UInt8>) -> (high: UInt64, low: UInt64)?
    /// The identifier made of 128 random bits, with the bits this form fixes set (a UUID's
    /// version and variant); the identity for a form that fixes none.
    static func fixingRandomBits(high: UInt64, low: UInt64) -> (high: UInt64, low: UInt64)
}
