/// Why a JSON text was rejected, and where.
///
/// `offset` is the byte offset of the first byte that makes the text invalid (or the input length
/// when the text ends too early), so a client can be told exactly what was wrong with its message.
public struct JSONError: Error, Equatable, CustomStringConvertible {
    /// Byte offset into the input.
    public var offset: Int
    /// A short human-readable reason, e.g. "leading zeros are not allowed".
    public var message: String

    public init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }

    public var description: String {
        "JSON error at byte \(offset): \(message)"
    }
}
