/// NATS nkeys as text (docs.nats.io, "NKeys"; the encoding of github.com/nats-io/nkeys, read, not
/// copied): an Ed25519 key behind a prefix byte naming its role, with a CRC-16 after it, in
/// RFC 4648 base32 without padding.
///
/// - A public key: 1 prefix byte (its role: `U` user, `A` account, `O` operator, `N` server, ...)
///   + 32 key bytes + CRC-16 (little-endian) = 35 bytes, 56 characters starting with the role's letter.
/// - A seed (the private half): 2 prefix bytes, `S` (18 << 3) in the top 5 bits then the role's
///   5 bits + 32 seed bytes + CRC-16 = 36 bytes, 58 characters starting `S` then the role's letter.
///
/// Pure: the Ed25519 arithmetic (public key from seed, signatures) is in VigilReplication, over
/// OpenSSL. A seed is a secret: nothing here prints one, and errors never echo the input.
public enum NKey {
    /// The role a key's prefix byte names.
    public enum Role: UInt8, Sendable, CaseIterable {
        case account = 0  // 'A'
        case cluster = 16  // 'C' (2 << 3)
        case server = 104  // 'N' (13 << 3)
        case `operator` = 112  // 'O' (14 << 3)
        case user = 160  // 'U' (20 << 3)

        public var letter: Character {
            switch self {
            case .account: return "A"
            case .cluster: return "C"
            case .server: return "N"
            case .operator: return "O"
            case .user: return "U"
            }
        }
    }

    static let seedPrefix: UInt8 = 18 << 3  // 'S'

    /// A decoded seed: its role and the 32 bytes Ed25519 derives the key pair from. Printing it
    /// (a log line, an interpolated config) shows only its role, never the bytes.
    public struct Seed: Equatable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        public var role: Role
        public var raw: [UInt8]

        public init(role: Role, raw: [UInt8]) {
            precondition(raw.count == 32, "an Ed25519 seed is 32 bytes")
            self.role = role
            self.raw = raw
        }

        public var description: String { "<nkey seed, \(role.letter) role>" }
        public var debugDescription: String { description }
        public var customMirror: Mirror { Mirror(self, children: [:]) }
    }

    /// Decodes a seed's text (`SU...`, 58 characters; surrounding whitespace allowed).
    public static func decodeSeed(_ text: some StringProtocol) throws(NKeyError) -> Seed {
        let trimmed = text.utf8.drop { isSpace($0) }.reversed().drop { isSpace($0) }.reversed()
        guard trimmed.count == 58 else { throw .badLength(what: "seed", expected: 58, got: trimmed.count) }
        guard let bytes = Base32.decode(Array(trimmed)) else { throw .notBase32 }
        guard bytes.count == 36 else { throw .badLength(what: "seed", expected: 58, got: trimmed.count) }
        try checkCRC(bytes)
        guard bytes[0] & 0xF8 == seedPrefix else { throw .notASeed }
        let roleByte = (bytes[0] & 0x07) << 5 | (bytes[1] & 0xF8) >> 3
        guard bytes[1] & 0x07 == 0, let role = Role(rawValue: roleByte) else { throw .unknownRole }
        return Seed(role: role, raw: Array(bytes[2..<34]))
    }

    /// A seed's text (tests, and the fuzz target's round trip).
    public static func encodeSeed(_ seed: Seed) -> String {
        var bytes: [UInt8] = [seedPrefix | seed.role.rawValue >> 5, (seed.role.rawValue & 0x1F) << 3]
        bytes.append(contentsOf: seed.raw)
        appendCRC(&bytes)
        return Base32.encode(bytes)
    }

    /// A public key's text (`U...`, 56 characters) from its role and the 32 Ed25519 public key bytes.
    public static func encodePublicKey(role: Role, raw: [UInt8]) -> String {
        precondition(raw.count == 32, "an Ed25519 public key is 32 bytes")
        var bytes: [UInt8] = [role.rawValue]
        bytes.append(contentsOf: raw)
        appendCRC(&bytes)
        return Base32.encode(bytes)
    }

    /// Decodes a public key's text, which must have the role `role`.
    public static func decodePublicKey(_ text: some StringProtocol, role: Role) throws(NKeyError) -> [UInt8] {
        let utf8 = Array(text.utf8)
        guard utf8.count == 56 else { throw .badLength(what: "public key", expected: 56, got: utf8.count) }
        guard let bytes = Base32.decode(utf8), bytes.count == 35 else { throw .notBase32 }
        try checkCRC(bytes)
        guard bytes[0] == role.rawValue else { throw .unknownRole }
        return Array(bytes[1..<33])
    }

    private static func checkCRC(_ bytes: [UInt8]) throws(NKeyError) {
        let body = bytes[..<(bytes.count - 2)]
        let stored = UInt16(bytes[bytes.count - 2]) | UInt16(bytes[bytes.count - 1]) << 8
        guard CRC16.xmodem(body) == stored else { throw .badChecksum }
    }

    private static func appendCRC(_ bytes: inout [UInt8]) {
        let crc = CRC16.xmodem(bytes[...])
        bytes.append(UInt8(crc & 0xFF))
        bytes.append(UInt8(crc >> 8))
    }

    static func isSpace(_ b: UInt8) -> Bool { b == 32 || b == 9 || b == 10 || b == 13 }
}

/// Why a key's text was refused. Never carries the text itself (it may be a secret).
public enum NKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    case badLength(what: String, expected: Int, got: Int)
    case notBase32
    case badChecksum
    case notASeed
    case unknownRole

    public var description: String {
        switch self {
        case .badLength(let what, let expected, let got): return "an nkey \(what) is \(expected) characters, got \(got)"
        case .notBase32: return "not base32 (A-Z, 2-7)"
        case .badChecksum: return "its checksum does not match (a character was changed or lost)"
        case .notASeed: return "not an nkey seed (a seed starts with S)"
        case .unknownRole: return "an unknown or unexpected nkey role"
        }
    }
}

/// CRC-16/XMODEM (polynomial 0x1021, initial value 0, no reflection), the nkeys checksum.
public enum CRC16 {
    static let table: [UInt16] = (0..<256).map { byte in
        var crc = UInt16(byte) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? crc << 1 ^ 0x1021 : crc << 1 }
        return crc
    }

    public static func xmodem(_ bytes: ArraySlice<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for b in bytes { crc = crc << 8 ^ table[Int(UInt8(crc >> 8) ^ b)] }
        return crc
    }
}

/// RFC 4648 base32 (alphabet A-Z 2-7) without padding, as nkeys use it.
public enum Base32 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 8 + 4) / 5)
        var buffer: UInt32 = 0
        var bits = 0
        for b in bytes {
            buffer = buffer << 8 | UInt32(b)
            bits += 8
            while bits >= 5 {
                bits -= 5
                out.append(alphabet[Int(buffer >> UInt32(bits) & 31)])
            }
        }
        if bits > 0 { out.append(alphabet[Int(buffer << UInt32(5 - bits) & 31)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Nil when a character is outside the alphabet or the trailing bits are not zero (one text
    /// per byte string: a changed last character cannot decode to the same bytes).
    public static func decode(_ text: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.count * 5 / 8)
        var buffer: UInt32 = 0
        var bits = 0
        for c in text {
            let value: UInt8
            switch c {
            case 65...90: value = c - 65
            case 50...55: value = c - 50 + 26
            default: return nil
            }
            buffer = (buffer << 5 | UInt32(value)) & 0xFFFF
            bits += 5
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        guard bits < 5, buffer & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }
}
