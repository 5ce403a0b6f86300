/// A JSON object: its members in document order.
///
/// The parser rejects duplicate keys, so a parsed object has unique keys and `subscript` is
/// unambiguous. Keys are compared as Swift strings (canonical equivalence), so the parser also
/// rejects two keys that differ only in Unicode normalization, which keeps lookups unambiguous too.
/// Lookup is a linear scan: wire messages have a handful of members, and a scan over a small array
/// beats hashing every key at parse time.
public struct JSONObject: Equatable, Sendable {
    /// The members in document order.
    public var members: [(key: String, value: JSONValue)]

    /// Builds an object from members in the given order. Duplicate keys are not checked here;
    /// `subscript` then finds the first.
    public init(_ members: [(String, JSONValue)]) {
        self.members = members.map { (key: $0.0, value: $0.1) }
    }

    /// Builds an object from already-labelled members without copying them element by element.
    init(labelled members: [(key: String, value: JSONValue)]) {
        self.members = members
    }

    /// The value of the first member named `key`.
    public subscript(key: String) -> JSONValue? {
        for member in members where member.key == key {
            return member.value
        }
        return nil
    }

    /// The keys in document order.
    public var keys: [String] {
        members.map(\.key)
    }

    /// JSON objects are unordered (RFC 8259 §4), so equality ignores member order: same number of
    /// members and every member of one found with an equal value in the other. Written by hand
    /// because tuples are not Equatable. The common case, same order, is checked pairwise first;
    /// only a differing order falls back to lookups (quadratic, fine for message-sized objects).
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.members.count == rhs.members.count else { return false }
        var sameOrder = true
        for i in lhs.members.indices {
            let l = lhs.members[i], r = rhs.members[i]
            if l.key != r.key {
                sameOrder = false
                break
            }
            if l.value != r.value { return false }
        }
        if sameOrder { return true }
        for member in lhs.members {
            guard let other = rhs[member.key], other == member.value else { return false }
        }
        return true
    }
}
