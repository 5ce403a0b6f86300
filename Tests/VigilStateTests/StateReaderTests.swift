import Testing
@testable import VigilCore
@testable import VigilState

/// The field primitives: layout on the writer side, bounds and validation on the reader side.
@Suite struct StateReaderTests {
    func read<T>(_ bytes: [UInt8], _ body: (inout StateReader) throws(StateError) -> T) throws(StateError) -> T {
        try bytes.withStateBytes { (raw: UnsafeRawBufferPointer) throws(StateError) -> T in
            var r = StateReader(raw, what: "test")
            let value = try body(&r)
            guard r.isAtEnd else { throw r.invalid("left over") }
            return value
        }
    }

    func encoded(_ s: [UInt8]) -> [UInt8] {
        SnapshotCodecTests.le32(UInt32(s.count)) + s
    }

    @Test func integersAreLittleEndianAndIdsBigEndian() throws {
        var w = StateWriter()
        w.u16(0x0102); w.u32(0x0304_0506); w.u64(0x0708_090A_0B0C_0D0E); w.i64(-2); w.pinID(PinID(high: 0x1122_3344_5566_7788, low: 0x99))
        #expect(w.bytes[0..<14] == [0x02, 0x01, 0x06, 0x05, 0x04, 0x03, 0x0E, 0x0D, 0x0C, 0x0B, 0x0A, 0x09, 0x08, 0x07])
        #expect(w.bytes[14..<22] == [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        // The id's bytes in the order of its text form, 11223344-5566-7788-0000-000000000099.
        let id = PinID(high: 0x1122_3344_5566_7788, low: 0x99)
        #expect(Array(w.bytes[22..<38]) == [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0, 0, 0, 0, 0, 0, 0, 0x99])
        let back = try read(w.bytes) { (r: inout StateReader) throws(StateError) in
            (try r.u16(), try r.u32(), try r.u64(), try r.i64(), try r.pinID())
        }
        #expect(back.0 == 0x0102 && back.1 == 0x0304_0506 && back.2 == 0x0708_090A_0B0C_0D0E && back.3 == -2 && back.4 == id)
        let digest = TokenDigest(bytes: (0..<32).map { UInt8($0) })
        var d = StateWriter()
        d.digest(digest)
        #expect(d.bytes == digest.bytes, "a digest is stored as its bytes")
    }

    @Test func validUTF8IsReadAsIs() throws {
        for text in ["", "plain", "é", "道路", "🚧", "\u{FFFD}", "a\u{0}b", String(repeating: "ü🙂", count: 300)] {
            #expect(try read(encoded(Array(text.utf8))) { (r: inout StateReader) throws(StateError) in try r.string() } == text)
        }
    }

    /// Including the case a length check alone would miss: a truncated 4-byte sequence is
    /// repaired to one U+FFFD, which is 3 bytes like the input.
    @Test func invalidUTF8IsRefused() {
        let cases: [[UInt8]] = [[0xFF], [0xC3], [0xC3, 0x41], [0xF0, 0x90, 0x80], [0xF0, 0x90, 0x80, 0x41], [0xED, 0xA0, 0x80],
                                [0xC0, 0xAF], [0xF4, 0x90, 0x80, 0x80], [0x41, 0x80]]
        for bytes in cases {
            #expect(throws: StateError.self, "\(bytes)") {
                try read(encoded(bytes)) { (r: inout StateReader) throws(StateError) in try r.string() }
            }
        }
    }

    @Test func lengthsPastTheEndAreTruncations() {
        #expect(throws: StateError.truncated(what: "test", offset: 0)) {
            try read(SnapshotCodecTests.le32(10) + [1, 2, 3]) { (r: inout StateReader) throws(StateError) in try r.string() }
        }
        #expect(throws: StateError.truncated(what: "test", offset: 0)) { try read([1, 2, 3]) { (r: inout StateReader) throws(StateError) in try r.u64() } }
    }

    @Test func flagsAndTimesAreChecked() {
        #expect(throws: StateError.invalid(what: "test", offset: 0, reason: "flag byte 2 is neither 0 nor 1")) {
            try read([2]) { (r: inout StateReader) throws(StateError) in try r.bool() }
        }
        var w = StateWriter()
        w.i64(PanicStream.restorableMagnitude + 1)
        #expect(throws: StateError.self) { try read(w.bytes) { (r: inout StateReader) throws(StateError) in try r.time() } }
    }

    @Test func countsAreBoundedByWhatIsLeft() throws {
        let bytes = SnapshotCodecTests.le32(3) + [UInt8](repeating: 0, count: 27)
        #expect(try read(bytes) { (r: inout StateReader) throws(StateError) -> Int in
            let n = try r.count(of: "thing", minimumElementBytes: 9)
            for _ in 0..<27 { _ = try r.u8() }
            return n
        } == 3)
        #expect(throws: StateError.invalid(what: "test", offset: 0, reason: "thing count 4 needs more bytes than the 27 left")) {
            try read(SnapshotCodecTests.le32(4) + [UInt8](repeating: 0, count: 27)) { (r: inout StateReader) throws(StateError) in
                try r.count(of: "thing", minimumElementBytes: 9)
            }
        }
    }
}
