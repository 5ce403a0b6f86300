import Testing
@testable import VigilWire

/// The chunked coding on its own: sizes, extensions, the CRLF after data, trailers, bounds.
@Suite struct HTTPChunkedDecoderTests {
    /// Decodes `text` fed in `step`-byte pieces: the data, and the end or the failure.
    static func decode(_ text: String, step: Int, maxTrailerBytes: Int = 4096) -> ([UInt8], HTTPChunkedDecoder.Event, HTTPChunkedDecoder) {
        var decoder = HTTPChunkedDecoder(maxTrailerBytes: maxTrailerBytes, maxTrailerCount: 2)
        let bytes = Array(text.utf8)
        var data: [UInt8] = []
        var at = 0
        while at < bytes.count {
            let piece = Array(bytes[at..<min(at + step, bytes.count)])
            at += piece.count
            let stop: HTTPChunkedDecoder.Event? = piece.withUnsafeBytes { buffer in
                var index = 0
                while true {
                    switch decoder.next(buffer, index: &index) {
                    case .data(let range): data.append(contentsOf: buffer[range])
                    case .needMore: return nil
                    case let other: return other
                    }
                }
            }
            if let stop { return (data, stop, decoder) }
        }
        return (data, .needMore, decoder)
    }

    @Test func sizesAndData() {
        for step in 1...12 {
            let (data, event, decoder) = Self.decode("a\r\n0123456789\r\nA;x=\"y\"\r\n0123456789\r\n000\r\nT: v\r\n\r\n", step: step)
            #expect(data.count == 20 && event == .end && decoder.trailers.first?.value == "v")
        }
    }

    @Test func bareLFLineEndsAreAccepted() {
        let (data, event, _) = Self.decode("2\nab\n0\n\n", step: 1)
        #expect(data == Array("ab".utf8) && event == .end)
    }

    @Test func sizeLines() {
        #expect(HTTPChunkedDecoder.parseSize(Array("fF".utf8)) == 255)
        #expect(HTTPChunkedDecoder.parseSize(Array("1 ; ext".utf8)) == 1)
        #expect(HTTPChunkedDecoder.parseSize(Array("fffffffffffffff".utf8)) == 0xfff_ffff_ffff_ffff)
        #expect(HTTPChunkedDecoder.parseSize(Array("1000000000000000".utf8)) == nil)
        #expect(HTTPChunkedDecoder.parseSize(Array("".utf8)) == nil)
        #expect(HTTPChunkedDecoder.parseSize(Array("-1".utf8)) == nil)
        #expect(HTTPChunkedDecoder.parseSize(Array("1x".utf8)) == nil)
        #expect(HTTPChunkedDecoder.parseSize(Array("1;\u{01}".utf8)) == nil)
    }

    @Test func trailerBounds() {
        #expect(Self.decode("0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", step: 3).1 == .failure(.tooLarge("more than 2 trailer fields")))
        #expect(Self.decode("0\r\nA: 0123456789\r\n\r\n", step: 3, maxTrailerBytes: 10).1 == .failure(.tooLarge("trailers over 10 bytes")))
        #expect(Self.decode("0\r\nno colon\r\n\r\n", step: 3).1 == .failure(.malformed("trailer: header line without colon")))
    }

    @Test func aLongSizeLineFails() {
        let line = "1;" + String(repeating: "e", count: 2000) + "\r\n"
        #expect(Self.decode(line, step: 100).1 == .failure(.malformed("chunk size line too long")))
    }
}
