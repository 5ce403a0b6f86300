import Foundation

// End-to-end encrypted panic streams, format version 1 (docs/design/e2e-streams.md): the Swift
// twin of clients/js/src/e2e.js, byte for byte (both reproduce clients/e2e-vectors/vectors.json).
// Nothing here talks to a server.

/// Why a key, a kid or a sealed value was refused.
public struct E2EError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The codes, the same strings as the JS client's `E2EError.code`.
    public enum Code: String, Sendable {
        /// The sealed value or box does not open with this key, kid, seq and status (tampered,
        /// replayed with another seq or status, from another stream, the wrong key, not
        /// base64url, too short). Never a position.
        case cannotDecrypt = "cannot_decrypt"
        /// It opened, but what is inside is not a valid position.
        case invalidPosition = "invalid_position"
        /// A key or member secret that is not 32 bytes (or not their base64url).
        case invalidKey = "invalid_key"
        /// A kid that is not 22 characters of base64url (16 bytes).
        case invalidKid = "invalid_kid"
        /// The crypto library failed (not expected: no input makes it).
        case cryptoFailure = "crypto_failure"
    }

    /// What went wrong.
    public var code: Code
    /// For people.
    public var message: String

    init(_ code: Code, _ message: String) { self.code = code; self.message = message }

    public var description: String { "\(code.rawValue): \(message)" }
}

/// A position inside a sealed update: the fields of a clear update, and the note.
public struct E2EPosition: Sendable, Equatable {
    /// Latitude (−90…90).
    public var lat: Double
    /// Longitude (−180…180).
    public var lon: Double
    /// Accuracy in metres (0–100,000).
    public var accuracyM: Double?
    /// Heading in degrees (0–360).
    public var heading: Double?
    /// Speed in metres a second (0–1,000).
    public var speedMps: Double?
    /// The note (the start's, or any update's).
    public var note: String?

    /// A position.
    public init(lat: Double, lon: Double, accuracyM: Double? = nil, heading: Double? = nil, speedMps: Double? = nil, note: String? = nil) {
        self.lat = lat; self.lon = lon; self.accuracyM = accuracyM; self.heading = heading; self.speedMps = speedMps; self.note = note
    }

    /// A clear ``Position`` and a note.
    public init(_ position: Position, note: String? = nil) {
        self.init(lat: position.lat, lon: position.lon, accuracyM: position.accuracyM, heading: position.heading,
                  speedMps: position.speedMps, note: note)
    }
}

/// A stream's key (32 random bytes) and its key id (16 random bytes as 22 characters of base64url).
public struct StreamKey: Sendable, Equatable {
    /// The key's 32 bytes.
    public let bytes: [UInt8]
    /// The key id, sent in clear with every sealed update.
    public let kid: String

    /// A new key and kid from the system's CSPRNG.
    public static func generate() -> StreamKey {
        StreamKey(checked: E2ECrypto.randomBytes(E2E.keyBytes), kid: E2E.base64urlEncode(E2ECrypto.randomBytes(E2E.kidBytes)))
    }

    /// A key from its bytes and kid.
    public init(bytes: [UInt8], kid: String) throws(E2EError) {
        guard bytes.count == E2E.keyBytes else { throw E2EError(.invalidKey, "a key is 32 bytes") }
        guard E2E.isKid(kid) else { throw E2EError(.invalidKid, "a kid is 22 characters of base64url (16 bytes)") }
        self.init(checked: bytes, kid: kid)
    }

    /// A key from its base64url (43 characters, the watch link's `k`) and kid.
    public init(base64url: String, kid: String) throws(E2EError) {
        guard let bytes = E2E.decodeKey(base64url) else { throw E2EError(.invalidKey, "a key is 43 characters of base64url (32 bytes)") }
        try self.init(bytes: bytes, kid: kid)
    }

    private init(checked bytes: [UInt8], kid: String) { self.bytes = bytes; self.kid = kid }

    /// The key's base64url (43 characters), for a watch link's `k`.
    public var base64url: String { E2E.base64urlEncode(bytes) }
}

/// What a watch link's fragment says of the stream key.
public enum FragmentKey: Sendable, Equatable {
    /// No `k`.
    case absent
    /// A `k` that is not a 43-character base64url key.
    case invalid
    /// The key's bytes.
    case key([UInt8])
}

/// Sealing and opening e2e updates, and circle members' key boxes.
public enum E2E {
    /// The format version.
    public static let version = 1
    static let keyBytes = 32
    static let kidBytes = 16
    static let padding = 64
    static let label = Array("vigil-e2e-v1".utf8)
    static let boxLabel = Array("vigil-e2e-box-v1".utf8)
    static let wrapInfo = Array("vigil e2e member wrap v1".utf8)

    // MARK: base64url

    /// base64url without padding.
    public static func base64urlEncode(_ bytes: [UInt8]) -> String { Base64URL.encode(bytes) }

    /// The bytes of canonical unpadded base64url, or `nil`.
    public static func base64urlDecode(_ text: String) -> [UInt8]? { Base64URL.decode(text) }

    /// A key from its 43 characters of base64url, or `nil`.
    public static func decodeKey(_ text: String) -> [UInt8]? {
        guard let bytes = base64urlDecode(text), bytes.count == keyBytes else { return nil }
        return bytes
    }

    /// Whether `kid` is 22 characters of base64url (16 bytes).
    public static func isKid(_ kid: String) -> Bool {
        kid.utf8.count == 22 && base64urlDecode(kid)?.count == kidBytes
    }

    /// The stream key in a watch link's fragment (`#s=…&t=…&k=…`, with or without the `#`).
    public static func key(fromFragment fragment: String) -> FragmentKey {
        let body = fragment.hasPrefix("#") ? String(fragment.dropFirst()) : fragment
        var k: String?
        for pair in body.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts[0] == "k" {
                k = parts.count > 1 ? (String(parts[1]).removingPercentEncoding ?? String(parts[1])) : ""
                break
            }
        }
        guard let k, !k.isEmpty else { return .absent }
        return decodeKey(k).map { .key($0) } ?? .invalid
    }

    // MARK: associated data and plaintext

    static func bigEndian(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) } }

    /// "vigil-e2e-v1" 0x00 kid 0x00 seq (u64 BE) status ('r' or 'a').
    static func associatedData(kid: String, seq: UInt64, status: PanicStatus) -> [UInt8] {
        label + [0] + Array(kid.utf8) + [0] + bigEndian(seq) + [status == .red ? 0x72 : 0x61]
    }

    /// "vigil-e2e-box-v1" 0x00 kid 0x00 member (u64 BE).
    static func boxAssociatedData(kid: String, member: UInt64) -> [UInt8] {
        boxLabel + [0] + Array(kid.utf8) + [0] + bigEndian(member)
    }

    static func check(_ p: E2EPosition) throws(E2EError) {
        func bad(_ why: String) -> E2EError { E2EError(.invalidPosition, why) }
        guard p.lat.isFinite, (-90...90).contains(p.lat) else { throw bad("lat is a number in [-90, 90]") }
        guard p.lon.isFinite, (-180...180).contains(p.lon) else { throw bad("lon is a number in [-180, 180]") }
        if let a = p.accuracyM, !(a.isFinite && (0...100_000).contains(a)) { throw bad("accuracy_m is a number in [0, 100000]") }
        if let h = p.heading, !(h.isFinite && (0...360).contains(h)) { throw bad("heading is a number in [0, 360]") }
        if let s = p.speedMps, !(s.isFinite && (0...1000).contains(s)) { throw bad("speed_mps is a number in [0, 1000]") }
    }

    /// Compact JSON in the format's field order (lat, lon, accuracy_m, heading, speed_mps, note;
    /// absent ones left out), UTF-8, then spaces up to the smallest multiple of 64 bytes.
    static func encodePlaintext(_ p: E2EPosition) throws(E2EError) -> [UInt8] {
        try check(p)
        var fields: [(String, JSONValue)] = [("lat", .number(p.lat)), ("lon", .number(p.lon))]
        if let v = p.accuracyM { fields.append(("accuracy_m", .number(v))) }
        if let v = p.heading { fields.append(("heading", .number(v))) }
        if let v = p.speedMps { fields.append(("speed_mps", .number(v))) }
        if let v = p.note { fields.append(("note", .string(v))) }
        let text = "{" + fields.map { JSONValue.string($0.0).jsonText + ":" + $0.1.jsonText }.joined(separator: ",") + "}"
        var bytes = Array(text.utf8)
        bytes += [UInt8](repeating: 0x20, count: (padding - bytes.count % padding) % padding)
        return bytes
    }

    /// The position in an opened plaintext.
    static func decodePlaintext(_ bytes: [UInt8]) throws(E2EError) -> E2EPosition {
        guard let text = String(bytes: bytes, encoding: .utf8), let value = JSONValue.parse(text), let o = value.objectValue else {
            throw E2EError(.invalidPosition, "not a UTF-8 JSON object")
        }
        func number(_ name: String) throws(E2EError) -> Double? {
            guard let v = o[name], !v.isNull else { return nil }
            guard let d = v.doubleValue else { throw E2EError(.invalidPosition, "\(name) is a number") }
            return d
        }
        guard let lat = try number("lat"), let lon = try number("lon") else { throw E2EError(.invalidPosition, "lat and lon are required") }
        var note: String?
        if let v = o["note"], !v.isNull {
            guard let s = v.stringValue else { throw E2EError(.invalidPosition, "note is a string") }
            note = s
        }
        let p = E2EPosition(lat: lat, lon: lon, accuracyM: try number("accuracy_m"), heading: try number("heading"),
                            speedMps: try number("speed_mps"), note: note)
        try check(p)
        return p
    }

    // MARK: sealing and opening

    static func gcmSeal(key: [UInt8], nonce: [UInt8], plaintext: [UInt8], aad: [UInt8]) throws(E2EError) -> String {
        guard let body = E2ECrypto.primitives.sealAESGCM(key: key, nonce: nonce, plaintext: plaintext, aad: aad) else {
            throw E2EError(.cryptoFailure, "AES-256-GCM seal failed")
        }
        return base64urlEncode(nonce + body)
    }

    static func gcmOpen(key: [UInt8], sealed: String, aad: [UInt8]) throws(E2EError) -> [UInt8] {
        guard let bytes = base64urlDecode(sealed), bytes.count >= E2ECrypto.nonceBytes + E2ECrypto.tagBytes else {
            throw E2EError(.cannotDecrypt, "not a sealed value")
        }
        guard let plaintext = E2ECrypto.primitives.openAESGCM(
            key: key, nonce: Array(bytes.prefix(E2ECrypto.nonceBytes)),
            ciphertextAndTag: Array(bytes.dropFirst(E2ECrypto.nonceBytes)), aad: aad)
        else { throw E2EError(.cannotDecrypt, "does not open with this key, kid, seq and status") }
        return plaintext
    }

    /// Sealing with a given nonce: the test vectors only. Real sealing never takes a nonce.
    static func seal(_ position: E2EPosition, key: StreamKey, seq: UInt64, status: PanicStatus, nonce: [UInt8]) throws(E2EError) -> String {
        precondition(nonce.count == E2ECrypto.nonceBytes, "a nonce is 12 bytes")
        return try gcmSeal(key: key.bytes, nonce: nonce, plaintext: encodePlaintext(position),
                           aad: associatedData(kid: key.kid, seq: seq, status: status))
    }

    /// `position` sealed under the stream's key and kid, the seq the owner expects the server to
    /// give it, and the status: base64url of nonce (12 random bytes) ‖ ciphertext ‖ tag.
    public static func seal(_ position: E2EPosition, key: StreamKey, seq: UInt64, status: PanicStatus) throws(E2EError) -> String {
        try seal(position, key: key, seq: seq, status: status, nonce: E2ECrypto.randomBytes(E2ECrypto.nonceBytes))
    }

    /// The position in `sealed`, opened under the kid, seq and status it came with: throws
    /// ``E2EError/Code/cannotDecrypt`` when it does not open (never a position), and
    /// ``E2EError/Code/invalidPosition`` when it opens to something that is not a position.
    public static func open(_ sealed: String, key: StreamKey, seq: UInt64, status: PanicStatus) throws(E2EError) -> E2EPosition {
        try decodePlaintext(gcmOpen(key: key.bytes, sealed: sealed, aad: associatedData(kid: key.kid, seq: seq, status: status)))
    }

    // MARK: member boxes

    /// A new member secret (`ms` in a member's invitation fragment): 32 random bytes.
    public static func newMemberSecret() -> [UInt8] { E2ECrypto.randomBytes(keyBytes) }

    /// HKDF-SHA256(ikm = member secret, salt = "vigil-e2e-v1", info = "vigil e2e member wrap v1"), 32 bytes.
    static func memberWrapKey(_ memberSecret: [UInt8]) throws(E2EError) -> [UInt8] {
        guard memberSecret.count == keyBytes else { throw E2EError(.invalidKey, "a member secret is 32 bytes") }
        guard let key = E2ECrypto.primitives.hkdfSHA256(inputKeyMaterial: memberSecret, salt: label, info: wrapInfo, length: keyBytes) else {
            throw E2EError(.cryptoFailure, "HKDF-SHA256 failed")
        }
        return key
    }

    /// Wrapping with a given nonce: the test vectors only.
    static func wrapForMember(_ key: StreamKey, memberSecret: [UInt8], member: UInt64, nonce: [UInt8]) throws(E2EError) -> String {
        precondition(nonce.count == E2ECrypto.nonceBytes, "a nonce is 12 bytes")
        return try gcmSeal(key: memberWrapKey(memberSecret), nonce: nonce, plaintext: key.bytes,
                           aad: boxAssociatedData(kid: key.kid, member: member))
    }

    /// The stream key boxed for circle member `member`: base64url of nonce ‖ AES-256-GCM(wrap key,
    /// the key's 32 bytes, box AAD) ‖ tag.
    public static func wrapForMember(_ key: StreamKey, memberSecret: [UInt8], member: UInt64) throws(E2EError) -> String {
        try wrapForMember(key, memberSecret: memberSecret, member: member, nonce: E2ECrypto.randomBytes(E2ECrypto.nonceBytes))
    }

    /// The stream key (with `kid`) in member `member`'s box; ``E2EError/Code/cannotDecrypt`` when
    /// it does not open (another member, another kid, another secret, tampered).
    public static func unwrapForMember(_ box: String, memberSecret: [UInt8], kid: String, member: UInt64) throws(E2EError) -> StreamKey {
        guard isKid(kid) else { throw E2EError(.invalidKid, "a kid is 22 characters of base64url (16 bytes)") }
        let bytes = try gcmOpen(key: memberWrapKey(memberSecret), sealed: box, aad: boxAssociatedData(kid: kid, member: member))
        guard bytes.count == keyBytes else { throw E2EError(.cannotDecrypt, "a box holds a 32-byte key") }
        return try StreamKey(bytes: bytes, kid: kid)
    }
}
