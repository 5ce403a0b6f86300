/// A client's idempotency key (`"idem"`, docs/PROTOCOL.md "Writes that are safe to retry"): 16 to
/// 64 characters of `[A-Za-z0-9_-]`, chosen at random by the client once per logical write and
/// sent again, unchanged, with every resend of that write.
///
/// The key is a secret of the client's: the answer kept for it is sealed under a key derived from
/// it (`IdempotencySeal` in VigilState), so the server keeps only digests and ciphertext.
public struct IdempotencyClaim: Equatable, Sendable {
    /// The key as sent (already checked by `IdempotencyKey.isValid`).
    public var key: String
    /// The request in canonical form: its members but `ref` and `idem`, keys sorted at every
    /// level, no white space (`IdempotencyKey.canonicalRequest`). Hashed with the key into the
    /// request digest that tells a repeat from a different request under the same key.
    public var canonical: [UInt8]

    public init(key: String, canonical: [UInt8]) {
        self.key = key
        self.canonical = canonical
    }
}

public enum IdempotencyKey {
    public static let minLength = 16
    public static let maxLength = 64

    /// Whether `text` is 16 to 64 characters of `[A-Za-z0-9_-]` (bytes checked, so a key is
    /// ASCII and its length in characters is its length in bytes).
    public static func isValid(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard utf8.count >= minLength, utf8.count <= maxLength else { return false }
        return utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D || b == 0x5F
        }
    }

    /// The request without `ref` and `idem`, as canonical JSON: members sorted by key (byte order
    /// of their UTF-8, stable for equal keys) at every level, arrays in order, numbers as the
    /// writer prints them. The same request sent again by any client serialises the same, however
    /// its JSON library orders members or spaces them.
    public static func canonicalRequest(_ object: JSONObject) -> [UInt8] {
        var w = JSONWriter(capacity: 256)
        let members = object.members.filter { $0.key != "ref" && $0.key != "idem" }
        write(.object(JSONObject(members.map { ($0.key, $0.value) })), into: &w)
        return w.bytes
    }

    private static func write(_ value: JSONValue, into w: inout JSONWriter) {
        switch value {
        case .object(let o):
            w.beginObject()
            let sorted = o.members.enumerated().sorted { a, b in
                let (ka, kb) = (Array(a.element.key.utf8), Array(b.element.key.utf8))
                return ka == kb ? a.offset < b.offset : ka.lexicographicallyPrecedes(kb)
            }
            for member in sorted {
                w.key(member.element.key)
                write(member.element.value, into: &w)
            }
            w.endObject()
        case .array(let items):
            w.beginArray()
            for item in items { write(item, into: &w) }
            w.endArray()
        default:
            w.value(value)
        }
    }
}
