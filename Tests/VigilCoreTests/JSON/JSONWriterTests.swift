import Testing
import VigilBytes
@testable import VigilCore

/// `JSONWriter`: exact bytes for commas, nesting, escapes and numbers.
@Suite struct JSONWriterTests {
    func text(_ build: (inout JSONWriter) -> Void) -> String {
        var writer = JSONWriter(capacity: 16)
        build(&writer)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    @Test func commasAndNesting() {
        let out = text { w in
            w.beginObject()
            w.field("a", Int64(1))
            w.key("b")
            w.beginArray(); w.bool(true); w.bool(false); w.null(); w.endArray()
            w.key("c")
            w.beginObject(); w.field("d", "x"); w.endObject()
            w.key("e")
            w.beginArray(); w.endArray()
            w.key("f")
            w.beginObject(); w.endObject()
            w.field("g", 2.5)
            w.field("h", false)
            w.endObject()
        }
        #expect(out == #"{"a":1,"b":[true,false,null],"c":{"d":"x"},"e":[],"f":{},"g":2.5,"h":false}"#)
    }

    @Test func nestedArrays() {
        let out = text { w in
            w.beginArray()
            w.beginArray(); w.endArray()
            w.beginArray(); w.beginArray(); w.endArray(); w.endArray()
            w.beginArray(); w.int(1); w.beginArray(); w.int(2); w.int(3); w.endArray(); w.endArray()
            w.beginObject(); w.key(String("k")); w.beginArray(); w.endArray(); w.endObject()
            w.endArray()
        }
        #expect(out == #"[[],[[]],[1,[2,3]],{"k":[]}]"#)
    }

    @Test func stringEscapes() {
        let out = text { $0.string("a\"b\\c/\n\r\t\u{8}\u{C}\u{0}\u{1}\u{1F}\u{7F}é𝄞\u{2028}") }
        #expect(out == "\"a\\\"b\\\\c/\\n\\r\\t\\b\\f\\u0000\\u0001\\u001f\u{7F}é𝄞\u{2028}\"")
        #expect(text { $0.string("") } == "\"\"")
        #expect(text { $0.string("plain") } == "\"plain\"")
        #expect(text { $0.string("\"") } == "\"\\\"\"")
    }

    @Test func keysAreEscapedToo() {
        #expect(text { w in w.beginObject(); w.key("q\"k"); w.int(1); w.key(String("n\nk")); w.int(2); w.endObject() }
            == #"{"q\"k":1,"n\nk":2}"#)
    }

    @Test func integers() {
        let cases: [(Int64, String)] = [
            (0, "0"), (7, "7"), (-1, "-1"), (10, "10"), (-10, "-10"), (1_700_000_000_123, "1700000000123"),
            (.max, "9223372036854775807"), (.min, "-9223372036854775808"),
        ]
        for (v, expected) in cases {
            #expect(text { $0.int(v) } == expected)
        }
    }

    /// Swift's shortest round-trip form; 1.0 stays "1.0", small and large magnitudes use e±XX.
    @Test func doubles() {
        let cases: [(Double, String)] = [
            (52.52, "52.52"), (-0.0001, "-0.0001"), (1e-7, "1e-07"), (1.0, "1.0"), (0, "0.0"), (-0.0, "-0.0"),
            (1e16, "1e+16"), (0.1 + 0.2, "0.30000000000000004"), (.leastNonzeroMagnitude, "5e-324"), (-122.4194155, "-122.4194155"),
            (.greatestFiniteMagnitude, "1.7976931348623157e+308"), (.nan, "null"), (.infinity, "null"),
            (-.infinity, "null"),
        ]
        for (v, expected) in cases {
            #expect(text { $0.double(v) } == expected)
        }
        #expect(text { w in w.beginArray(); w.double(.nan); w.double(1); w.endArray() } == "[null,1.0]")
    }

    @Test func parsedValuesWriteIntegersAsIntegers() {
        let cases: [(JSONValue, String)] = [
            (.number(7), "7"), (.number(-3), "-3"), (.number(0), "0"), (.number(-0.0), "-0.0"), (.number(2.5), "2.5"),
            (.number(9_007_199_254_740_992), "9007199254740992"), (.number(18_014_398_509_481_984), "1.8014398509481984e+16"),
            (.number(1e300), "1e+300"),
        ]
        for (v, expected) in cases {
            #expect(text { $0.value(v) } == expected)
        }
        let object = JSONValue.object(JSONObject([("z", .array([.null, .bool(true), .string("a\tb")])), ("a", .object(JSONObject([])))]))
        #expect(text { $0.value(object) } == #"{"z":[null,true,"a\tb"],"a":{}}"#)
    }

    @Test func rawSplicesOneValue() {
        let out = text { w in
            w.beginArray(); w.int(1); w.raw(Array(#"{"x":1}"#.utf8)); w.int(2); w.endArray()
            w.raw(Array("[]".utf8))
        }
        #expect(out == #"[1,{"x":1},2],[]"#)
    }

    @Test func resetKeepsCapacityAndClearsCommaState() {
        var writer = JSONWriter(capacity: 64)
        writer.beginArray(); writer.int(1); writer.endArray()
        let capacity = writer.capacity
        writer.reset()
        writer.int(2)
        #expect(writer.bytes == Array("2".utf8))
        #expect(writer.capacity == capacity)
    }

    @Test func growsPastItsFirstCapacityKeepingWhatWasWritten() {
        var writer = JSONWriter(capacity: 8)
        let long = String(repeating: "x", count: 1_000)
        writer.beginArray(); writer.string(long); writer.int(7); writer.endArray()
        #expect(writer.bytes == Array("[\"\(long)\",7]".utf8))
        #expect(writer.capacity >= 1_006)
    }

    /// An event is written once, straight into the chunk its recipients share: the chunk's content
    /// is the text, with the headroom left free in front for a frame header.
    @Test func takeChunkHandsOverTheTextWithItsHeadroomAndStartsAFreshBuffer() {
        var writer = JSONWriter(capacity: 16, headroom: 10)
        writer.beginObject(); writer.field("a", Int64(1)); writer.endObject()
        let chunk = writer.takeChunk()
        #expect(chunk.start == 10)
        #expect(Array(chunk.bytes) == Array(#"{"a":1}"#.utf8))
        // The next document starts clean (no comma carried over) in another chunk.
        writer.beginArray(); writer.endArray()
        #expect(writer.bytes == Array("[]".utf8))
        #expect(Array(chunk.bytes) == Array(#"{"a":1}"#.utf8))
        let second = writer.takeChunk()
        #expect(second !== chunk)
    }

    /// An arena writer hands each document over as a frame right after the one before: the header's
    /// room (the size the caller asks for, whatever the guess was) then the text, with no gap, and
    /// it moves to a new arena when the current one is full; a long document gets a chunk of its own.
    @Test func anArenaWriterTakesFramesBackToBack() {
        var writer = JSONWriter(arenaCapacity: 1_024, headroom: 4)
        var frames: [ChunkSlice] = []
        var texts: [[UInt8]] = []
        for i in 0..<40 {
            let mark = writer.mark()
            writer.beginObject(); writer.field("dropped", Int64(i)); writer.endObject()
            writer.rollBack(to: mark)  // a rolled-back document leaves nothing behind
            writer.beginObject(); writer.field("i", Int64(i)); writer.field("s", String(repeating: "x", count: i * 3)); writer.endObject()
            texts.append(writer.bytes)
            let header = [2, 4, 10][i % 3]  // a wrong guess either way moves the text
            frames.append(writer.takeFrame(headerSize: header))
            #expect(frames[i].count == header + texts[i].count)
            #expect(Array(UnsafeRawBufferPointer(rebasing: frames[i].bytes[header...])) == texts[i])
        }
        var arenas = 1
        for i in 1..<40 {
            if frames[i].chunk === frames[i - 1].chunk {
                #expect(frames[i].start == frames[i - 1].end, "frame \(i) does not follow the one before")
            } else {
                arenas += 1
                #expect(frames[i].start == 0)
            }
        }
        #expect(arenas > 1 && arenas < 20)
        // Earlier frames are untouched by what was written after them.
        for i in 0..<40 {
            let header = [2, 4, 10][i % 3]
            #expect(Array(UnsafeRawBufferPointer(rebasing: frames[i].bytes[header...])) == texts[i])
        }
        // A document larger than an arena gets a chunk of its own, and the next starts a fresh arena.
        writer.string(String(repeating: "y", count: 3_000))
        let long = writer.takeFrame(headerSize: 4)
        #expect(long.start == 0 && long.count == 4 + 3_002)
        writer.int(1)
        let next = writer.takeFrame(headerSize: 2)
        #expect(next.chunk !== long.chunk && next.start == 0 && next.chunk.capacity == 1_024)
    }

    /// Outputs re-parse to the same value and are never garbage, even for odd keys.
    @Test func outputParses() throws {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("lat", 52.52)
        writer.field("ts", Int64.min)
        writer.field("name", "\u{0}\"\\")
        writer.key("nan"); writer.double(.nan)
        writer.endObject()
        let value = try JSONParser.parse(writer.bytes)
        #expect(value.object?["lat"] == .number(52.52))
        #expect(value.object?["ts"] == .number(Double(Int64.min)))
        #expect(value.object?["name"] == .string("\u{0}\"\\"))
        #expect(value.object?["nan"] == .null)
    }
}
