/// A 128-bit identifier held as two words, so that dictionaries keyed by it hash 16 bytes
/// instead of a string. Pins and panic streams both use it (`PinID`, `StreamID`): the words,
/// hashing, order and byte form are written here once, and `Form` supplies only the text form.
///
/// `Form` is a phantom parameter: it stores nothing, but `Identifier128<UUIDText>` and
/// `Identifier128<Base64URLText>` are different types, so a stream id can never be passed where
/// a pin id is expected, even though both are the same two words.
///
/// The members other modules call on hot paths (the server's and the state codecs' dictionaries)
/// are `@inlinable`, so those modules specialise them instead of going through generic witnesses.
public struct Identifier128<Form: IdentifierTextForm>: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The first 8 bytes, big-endian (the first text characters).
    public let high: UInt64
    /// The last 8 bytes, big-endian.
    public let low: UInt64

    @inlinable
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The identifier made of the first 16 bytes of `bytes` (big-endian), with whatever bits the
    /// form fixes set (a UUID's version and variant).
    public init(random bytes: [UInt8]) {
        precondition(bytes.count >= 16, "a 128-bit identifier takes 16 bytes")
        var h: UInt64 = 0, l: UInt64 = 0
        for i in 0..<8 { h = h << 8 | UInt64(bytes[i]) }
        for i in 8..<16 { l = l << 8 | UInt64(bytes[i]) }
        let fixed = Form.fixingRandomBits(high: h, low: l)
        self.init(high: fixed.high, low: fixed.low)
    }

    /// Parses the form's text; nil for anything that is not exactly one identifier in it.
    public init?(_ text: String) {
        var text = text                          // withUTF8 is mutating: it may make the storage contiguous
        guard let words = text.withUTF8({ Form.parse($0) }) else { return nil }
        self.init(high: words.high, low: words.low)
    }

    /// Parses the form's text from its UTF-8 bytes (all of them, nothing before or after).
    /// Inlinable so a scanner in another module calls the form's parser directly.
    @inlinable
    public init?(utf8: UnsafeBufferPointer<UInt8>) {
        guard let words = Form.parse(utf8) else { return nil }
        self.init(high: words.high, low: words.low)
    }

    /// The 16 bytes, big-endian: `Identifier128(random: id.bytes) == id` for a form that fixes no bits.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16)
        for word in [high, low] {
            for j in (0..<8).reversed() { out.append(UInt8(truncatingIfNeeded: word >> UInt64(j * 8))) }
        }
        return out
    }

    public var description: String { Form.text(high: high, low: low) }

    @inlinable
    public static func == (a: Self, b: Self) -> Bool {
        a.high == b.high && a.low == b.low
    }

    @inlinable
    public func hash(into hasher: inout Hasher) {
        hasher.combine(high)
        hasher.combine(low)
    }

    /// Numeric order of the 128-bit value, which is the order of `bytes` (and of a UUID's text;
    /// not of base64url text, whose alphabet is not in ASCII order).
    @inlinable
    public static func < (a: Self, b: Self) -> Bool {
        (a.high, a.low) < (b.high, b.low)
    }
}
