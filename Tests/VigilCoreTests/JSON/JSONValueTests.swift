import Testing
@testable import VigilCore

/// The typed accessors of `JSONValue`, `int64`'s exactness rule in particular.
@Suite struct JSONValueTests {
    @Test func accessorsMatchTheirCaseOnly() {
        let values: [JSONValue] = [.null, .bool(true), .number(1), .string("s"), .array([]), .object(JSONObject([]))]
        for (i, v) in values.enumerated() {
            #expect(v.isNull == (i == 0))
            #expect((v.bool != nil) == (i == 1))
            #expect((v.double != nil) == (i == 2))
            #expect((v.string != nil) == (i == 3))
            #expect((v.array != nil) == (i == 4))
            #expect((v.object != nil) == (i == 5))
        }
        #expect(JSONValue.string("s").int64 == nil)
    }

    @Test func int64IsExactOrNil() {
        let limit = 9_007_199_254_740_992.0
        #expect(JSONValue.number(0).int64 == 0)
        #expect(JSONValue.number(-0.0).int64 == 0)
        #expect(JSONValue.number(42).int64 == 42)
        #expect(JSONValue.number(-7).int64 == -7)
        #expect(JSONValue.number(1e2).int64 == 100)
        #expect(JSONValue.number(limit).int64 == 9_007_199_254_740_992)
        #expect(JSONValue.number(-limit).int64 == -9_007_199_254_740_992)
        #expect(JSONValue.number(limit * 2).int64 == nil)
        #expect(JSONValue.number(-limit * 2).int64 == nil)
        #expect(JSONValue.number(1.5).int64 == nil)
        #expect(JSONValue.number(-0.5).int64 == nil)
        #expect(JSONValue.number(1e300).int64 == nil)
        #expect(JSONValue.number(.nan).int64 == nil)
        #expect(JSONValue.number(.infinity).int64 == nil)
    }

    @Test func parsedIntegersConvert() throws {
        #expect(try JSONTestSupport.parse("1700000000123").int64 == 1_700_000_000_123)
        #expect(try JSONTestSupport.parse("1.0").int64 == 1)
        #expect(try JSONTestSupport.parse("9007199254740993").int64 == 9_007_199_254_740_992) // already rounded by Double
        #expect(try JSONTestSupport.parse("18014398509481984").int64 == nil)
    }
}
