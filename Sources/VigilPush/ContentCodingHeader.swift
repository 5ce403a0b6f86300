/// The header of an `aes128gcm` body (RFC 8188 §2.1): salt (16) ‖ record size (4, big-endian) ‖
/// idlen (1) ‖ keyid (idlen). In Web Push the key id is the application server's ephemeral public
/// key (RFC 8291 §4), so the header is 86 bytes.
///
/// Pure bytes in and out: the encrypting side writes it, the decrypting side (the tests' user
/// agent, the fuzzer) parses it from a body that may be anything.
public struct ContentCodingHeader: Equatable, Sendable {
    public static let saltByteCount = 16
    /// Salt, record size and idlen: what precedes the key id.
    public static let fixedByteCount = saltByteCount + 4 + 1
    /// RFC 8188 §2.1: a record must hold the 16-byte tag, the delimiter and one byte more.
    public static let minimumRecordSize: UInt32 = 18

    public let salt: [UInt8]
    public let recordSize: UInt32
    public let keyID: [UInt8]

    public init(salt: [UInt8], recordSize: UInt32, keyID: [UInt8]) {
        precondition(salt.count == Self.saltByteCount, "ContentCodingHeader: the salt is 16 bytes")
        precondition(keyID.count <= 255, "ContentCodingHeader: idlen is one byte")
        self.salt = salt
        self.recordSize = recordSize
        self.keyID = keyID
    }

    /// Its size on the wire.
    public var byteCount: Int { Self.fixedByteCount + keyID.count }

    /// Appends the header to `out`.
    public func encode(into out: inout [UInt8]) {
        out.append(contentsOf: salt)
        for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: recordSize >> UInt32(shift))) }
        out.append(UInt8(keyID.count))
        out.append(contentsOf: keyID)
    }

    /// The header at the start of `body`, and how many bytes it took. Refuses a body that ends
    /// inside it and a record size below the minimum; never reads past `body`.
    public static func parse(_ body: [UInt8]) throws(WebPushError) -> (header: ContentCodingHeader, consumed: Int) {
        guard body.count >= fixedByteCount else { throw .truncatedHeader(count: body.count) }
        let recordSize = body[16..<20].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard recordSize >= minimumRecordSize else { throw .badRecordSize(recordSize) }
        let idLength = Int(body[20])
        guard body.count >= fixedByteCount + idLength else { throw .truncatedHeader(count: body.count) }
        let header = ContentCodingHeader(salt: Array(body[0..<16]), recordSize: recordSize,
                                         keyID: Array(body[fixedByteCount..<(fixedByteCount + idLength)]))
        return (header, fixedByteCount + idLength)
    }
}
