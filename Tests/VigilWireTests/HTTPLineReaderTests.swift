import Testing
@testable import VigilWire

/// Line splitting, terminators and the byte budget.
@Suite struct HTTPLineReaderTests {
    func lines(_ chunks: [String], max: Int = 1000) -> [String] {
        var reader = HTTPLineReader(maxBytes: max)
        var out: [String] = []
        for chunk in chunks {
            let bytes = Array(chunk.utf8)
            var index = 0
            loop: while true {
                switch bytes.withUnsafeBytes({ reader.nextLine($0, index: &index) }) {
                case .line: out.append(String(decoding: reader.line, as: UTF8.self))
                case .needMore: break loop
                case .tooLong: out.append("<tooLong>"); return out
                case .bareCR: out.append("<bareCR>"); return out
                }
            }
        }
        return out
    }

    @Test func terminators() {
        #expect(lines(["a\r\nb\nc\r\n"]) == ["a", "b", "c"])
        #expect(lines(["a\r", "\nb", "c\n"]) == ["a", "bc"])
        #expect(lines(["\r\n\r\n"]) == ["", ""])
    }

    @Test func bareCR() {
        #expect(lines(["a\rb\n"]) == ["<bareCR>"])
        #expect(lines(["a\r", "b\n"]) == ["<bareCR>"])
        #expect(lines(["a\r\r\n"]) == ["<bareCR>"])
        #expect(lines(["a\r", "", "\n"]) == ["a"])
    }

    @Test func budget() {
        // At the budget with no blank line yet, the head can no longer end in time.
        #expect(lines(["ab\ncd\n"], max: 6) == ["ab", "cd", "<tooLong>"])
        #expect(lines(["ab\ncd\n"], max: 7) == ["ab", "cd"])
        #expect(lines(["ab\ncd\n"], max: 5) == ["ab", "<tooLong>"])
        // Reaching the budget mid-line fails at once: the LF could not fit.
        #expect(lines(["ab\ncd"], max: 5) == ["ab", "<tooLong>"])
        #expect(lines(["ab\ncd"], max: 6) == ["ab"])
    }

    /// The first problem in byte order is reported, however the input is split: a bare CR past
    /// the budget is past the point where the head became too long (found by the response fuzzer).
    @Test func theFirstProblemWinsWhateverTheSplit() {
        for split in [["ab\r\u{0}"], ["ab", "\r\u{0}"], ["ab\r", "\u{0}"]] {
            #expect(lines(split, max: 2) == ["<tooLong>"], "\(split)")
        }
        for split in [["a\rb"], ["a", "\rb"], ["a\r", "b"]] {
            #expect(lines(split, max: 4) == ["<bareCR>"], "\(split)")
        }
    }
}
