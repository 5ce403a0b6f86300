import Testing
@testable import VigilCore

/// Structure (RFC 8259 §2, §4, §5): values, arrays, objects, whitespace, duplicate keys, depth.
@Suite struct JSONReaderTests {
    @Test func scalarsAtTopLevel() throws {
        #expect(try JSONTestSupport.parse("null") == .null)
        #expect(try JSONTestSupport.parse("true") == .bool(true))
        #expect(try JSONTestSupport.parse("false") == .bool(false))
        #expect(try JSONTestSupport.parse("\"x\"") == .string("x"))
        #expect(try JSONTestSupport.parse(" \t\r\n 12 \n") == .number(12))
    }

    @Test func containers() throws {
        #expect(try JSONTestSupport.parse("[]") == .array([]))
        #expect(try JSONTestSupport.parse("{}") == .object(JSONObject([])))
        #expect(try JSONTestSupport.parse("[[]]") == .array([.array([])]))
        #expect(try JSONTestSupport.parse("[ ]") == .array([]))
        #expect(try JSONTestSupport.parse("{ }") == .object(JSONObject([])))
        #expect(try JSONTestSupport.parse("[1,\"a\",null,true,[false],{}]") == .array([
            .number(1), .string("a"), .null, .bool(true), .array([.bool(false)]), .object(JSONObject([])),
        ]))
        let value = try JSONTestSupport.parse(#" { "b" : [ 1 , { "c" : null } ] , "a" : "x" , "" : {} } "#)
        let object = try #require(value.object)
        #expect(object.keys == ["b", "a", ""])
        #expect(object["a"] == .string("x"))
        #expect(object["b"]?.array?[1].object?["c"]?.isNull == true)
        #expect(object[""] == .object(JSONObject([])))
        #expect(object["missing"] == nil)
    }

    @Test func whitespaceEverywhere() throws {
        let text = " \n\t\r[\n1\t,\r2 ,\n{ \"k\"\n:\t3 } ]\r\n "
        #expect(try JSONTestSupport.parse(text) == .array([.number(1), .number(2), .object(JSONObject([("k", .number(3))]))]))
    }

    static let rejected: [(String, Int)] = [
        ("", 0), (" ", 1), ("\n\t", 2), ("[", 1), ("]", 0), ("}", 0), ("{", 1), ("[1", 2), ("[1,", 3),
        ("[1,]", 3), ("[,1]", 1), ("[1 2]", 3), ("[1,,2]", 3), ("[1}", 2), ("{\"a\":1]", 6),
        ("{\"a\":1,}", 7), ("{,}", 1), ("{\"a\"}", 4), ("{\"a\" 1}", 5), ("{a:1}", 1), ("{1:1}", 1),
        ("{\"a\":1 \"b\":2}", 7), ("{\"a\":}", 5), ("{\"a\"", 4), ("{\"a\":1", 6),
        ("[1]x", 3), ("[1] [2]", 4), ("1 2", 2), ("truex", 4), ("tru", 3), ("nul", 3), ("True", 0),
        ("nulL", 3), ("fals", 4), ("\u{A0}1", 0), ("\u{0C}1", 0), ("/*x*/1", 0), ("[1]//", 3),
        ("[1];", 3), ("1\u{0}", 1), ("[\"a\":1]", 4), ("{\"a\":1:2}", 6), ("undefined", 0),
    ]

    @Test(arguments: rejected)
    func rejectsWithOffset(_ text: String, _ offset: Int) {
        let error = JSONTestSupport.error(text)
        #expect(error?.offset == offset, "\(text.debugDescription): \(String(describing: error))")
    }

    @Test func messages() {
        #expect(JSONTestSupport.error("")?.message == "empty input")
        #expect(JSONTestSupport.error("[1,]")?.message == "expected a value")
        #expect(JSONTestSupport.error("[1 2]")?.message == "expected ',' or ']'")
        #expect(JSONTestSupport.error("{\"a\":1 2}")?.message == "expected ',' or '}'")
        #expect(JSONTestSupport.error("{1:1}")?.message == "expected a string key")
        #expect(JSONTestSupport.error("{\"a\" 1}")?.message == "expected ':'")
        #expect(JSONTestSupport.error("1 2")?.message == "unexpected data after the value")
        #expect(JSONTestSupport.error("nul")?.message == "invalid literal")
        #expect(JSONTestSupport.error("[1 2]")?.description == "JSON error at byte 3: expected ',' or ']'")
    }

    @Test func duplicateKeysAreRejectedAtTheSecondKey() {
        #expect(JSONTestSupport.error(#"{"a":1,"a":2}"#) == JSONError(offset: 7, message: "duplicate key"))
        #expect(JSONTestSupport.error(#"{"a":1,"b":{"a":2},"a":3}"#)?.offset == 19)
        // Same key after an escape spells it differently: still a duplicate.
        #expect(JSONTestSupport.error(#"{"ab":1,"a\u0062":2}"#)?.offset == 8)
        // Swift string equality is canonical equivalence: é precomposed and e + U+0301 collide.
        #expect(JSONTestSupport.error("{\"\u{E9}\":1,\"e\u{301}\":2}")?.message == "duplicate key")
        // The same key in sibling objects is fine.
        #expect(JSONTestSupport.error(#"[{"a":1},{"a":2}]"#) == nil)
    }

    /// Past `JSONContainerFrame.linearKeyLimit` members duplicates are found through the hash set.
    @Test func duplicateKeysInBigObjects() throws {
        for count in [15, 16, 17, 40] {
            let members = (0..<count).map { "\"k\($0)\":\($0)" }
            let ok = try JSONTestSupport.parse("{" + members.joined(separator: ",") + "}")
            #expect(ok.object?.members.count == count)
            #expect(ok.object?["k\(count - 1)"] == .number(Double(count - 1)))
            for duplicate in [0, count / 2, count - 1] {
                let text = "{" + members.joined(separator: ",") + ",\"k\(duplicate)\":0}"
                #expect(JSONTestSupport.error(text)?.message == "duplicate key", "\(count) keys, k\(duplicate) again")
            }
        }
    }

    /// 20,000 distinct keys parse quickly: duplicate detection is not quadratic.
    @Test func manyKeysStayLinear() throws {
        let text = "{" + (0..<20_000).map { "\"\($0)\":0" }.joined(separator: ",") + "}"
        let clock = ContinuousClock()
        var value: JSONValue = .null
        let elapsed = try clock.measure { value = try JSONTestSupport.parse(text) }
        #expect(value.object?.members.count == 20_000)
        #expect(elapsed < .seconds(1))
    }

    @Test(arguments: [0, 1, 2, 5, 32, 100])
    func depthLimitIsExact(_ maxDepth: Int) throws {
        let atLimit = String(repeating: "[", count: maxDepth) + "1" + String(repeating: "]", count: maxDepth)
        #expect(throws: Never.self) { try JSONTestSupport.parse(atLimit, maxDepth: maxDepth) }
        if maxDepth > 0 {
            let emptyAtLimit = String(repeating: "[", count: maxDepth) + String(repeating: "]", count: maxDepth)
            #expect(throws: Never.self) { try JSONTestSupport.parse(emptyAtLimit, maxDepth: maxDepth) }
        }
        let over = "[" + atLimit + "]"
        #expect(JSONTestSupport.error(over, maxDepth: maxDepth) == JSONError(offset: maxDepth, message: "nesting deeper than \(maxDepth)"))
        // maxDepth objects around an empty one: maxDepth + 1 containers.
        let objects = String(repeating: "{\"a\":", count: maxDepth) + "{}" + String(repeating: "}", count: maxDepth)
        #expect(JSONTestSupport.error(objects, maxDepth: maxDepth + 1) == nil)
        #expect(JSONTestSupport.error(objects, maxDepth: maxDepth)?.offset == 5 * maxDepth)
    }

    @Test func defaultDepthIs32() {
        #expect(JSONTestSupport.error(String(repeating: "[", count: 32) + String(repeating: "]", count: 32)) == nil)
        #expect(JSONTestSupport.error(String(repeating: "[", count: 33) + String(repeating: "]", count: 33))?.offset == 32)
    }

    /// The parser keeps open containers on the heap, not the call stack: a million open brackets
    /// fail cleanly whatever the limit.
    @Test func hugeNestingNeverOverflowsTheStack() {
        let open = [UInt8](repeating: 0x5B, count: 1_000_000)
        #expect(JSONTestSupport.error(open)?.offset == 32)
        #expect(JSONTestSupport.error(open, maxDepth: Int.max) == JSONError(offset: 1_000_000, message: "expected a value"))
        let mixed = [UInt8](String(repeating: "{\"a\":[", count: 200_000).utf8)
        #expect(JSONTestSupport.error(mixed, maxDepth: Int.max)?.offset == mixed.count)
    }

    @Test func rawBufferEntryPoint() throws {
        let bytes = Array("xx[1,2]yy".utf8)
        let value = try bytes.withUnsafeBytes { try JSONParser.parse(UnsafeRawBufferPointer(rebasing: $0[2..<7])) }
        #expect(value == .array([.number(1), .number(2)]))
        #expect(throws: JSONError(offset: 0, message: "empty input")) {
            try JSONParser.parse(UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }
}
