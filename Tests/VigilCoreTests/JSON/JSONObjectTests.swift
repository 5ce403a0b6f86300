import Testing
@testable import VigilCore

/// `JSONObject`: lookup, key order and order-insensitive equality.
@Suite struct JSONObjectTests {
    @Test func lookupAndKeys() {
        let object = JSONObject([("b", .number(1)), ("a", .null), ("é", .bool(true))])
        #expect(object.keys == ["b", "a", "é"])
        #expect(object["a"] == .null)
        #expect(object["e\u{301}"] == .bool(true)) // canonical equivalence, like the duplicate check
        #expect(object["c"] == nil)
        #expect(object.members[0].key == "b")
        #expect(JSONObject([("k", .number(1)), ("k", .number(2))])["k"] == .number(1)) // first wins
    }

    @Test func equalityIgnoresOrder() {
        let ab = JSONObject([("a", .number(1)), ("b", .array([.null]))])
        let ba = JSONObject([("b", .array([.null])), ("a", .number(1))])
        #expect(ab == ba)
        #expect(ab == ab)
        #expect(ab != JSONObject([("a", .number(1))]))
        #expect(ab != JSONObject([("a", .number(2)), ("b", .array([.null]))]))
        #expect(ab != JSONObject([("b", .array([.null])), ("a", .number(2))]))
        #expect(ab != JSONObject([("a", .number(1)), ("c", .array([.null]))]))
        #expect(JSONObject([]) == JSONObject([]))
    }

    @Test func membersAreMutable() {
        var object = JSONObject([("a", .number(1))])
        object.members.append((key: "b", value: .string("x")))
        #expect(object["b"] == .string("x"))
    }
}
