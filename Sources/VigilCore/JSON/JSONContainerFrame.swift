/// One open array or object while `JSONReader` fills it.
///
/// The reader keeps these on an explicit stack instead of recursing, so nesting depth costs heap,
/// not call stack. Mutated in place through `frames[top]`, so appending never copies the elements.
struct JSONContainerFrame {
    /// Up to this many members, duplicate keys are found by a linear scan; beyond it a hash set
    /// takes over so a hostile object with many keys cannot make duplicate detection quadratic.
    static let linearKeyLimit = 16

    let isObject: Bool
    var elements: [JSONValue] = []
    var members: [(key: String, value: JSONValue)] = []
    /// The key read before the value now being parsed (objects only).
    var pendingKey: String = ""
    /// Every key so far, once `members` has outgrown `linearKeyLimit`.
    var keySet: Set<String>? = nil

    init(isObject: Bool) {
        self.isObject = isObject
    }

    /// True if `key` equals (by Swift string equality) a key already in this object.
    func hasKey(_ key: String) -> Bool {
        if let keySet { return keySet.contains(key) }
        for member in members where member.key == key {
            return true
        }
        return false
    }

    /// Adds a finished value: to the elements of an array, or under `pendingKey` to an object.
    mutating func add(_ value: JSONValue) {
        guard isObject else {
            elements.append(value)
            return
        }
        members.append((key: pendingKey, value: value))
        if keySet != nil {
            keySet!.insert(pendingKey)
        } else if members.count == JSONContainerFrame.linearKeyLimit {
            keySet = Set(members.map(\.key))
        }
    }

    /// The finished container.
    func value() -> JSONValue {
        isObject ? .object(JSONObject(labelled: members)) : .array(elements)
    }
}
