import Testing
@testable import VigilWire
import VigilTestSupport

/// `Sec-WebSocket-Extensions` grammar (RFC 6455 §9.1, lists and quoting of RFC 9110 §5.6).
@Suite struct ExtensionHeaderParserTests {
    typealias P = ExtensionOffer.Parameter

    func parse(_ values: String...) throws(ExtensionHeaderError) -> [ExtensionOffer] {
        try ExtensionHeaderParser.parse(values)
    }

    func error(_ value: String) -> ExtensionHeaderError? {
        do {
            _ = try ExtensionHeaderParser.parse([value])
            return nil
        } catch {
            return error
        }
    }

    @Test func rfc7692Examples() throws {
        // RFC 7692 §5.1 and §7.1.3 offers.
        #expect(try parse("permessage-deflate") == [ExtensionOffer(name: "permessage-deflate")])
        #expect(try parse("permessage-deflate; client_max_window_bits") == [
            ExtensionOffer(name: "permessage-deflate", parameters: [P(name: "client_max_window_bits")]),
        ])
        #expect(try parse("permessage-deflate; client_max_window_bits; server_max_window_bits=10, permessage-deflate; client_max_window_bits") == [
            ExtensionOffer(name: "permessage-deflate", parameters: [P(name: "client_max_window_bits"), P(name: "server_max_window_bits", value: "10")]),
            ExtensionOffer(name: "permessage-deflate", parameters: [P(name: "client_max_window_bits")]),
        ])
    }

    @Test func linesAndOrderAreKept() throws {
        let offers = try parse("foo, bar; x=1", "permessage-deflate;a;a")
        #expect(offers.map(\.name) == ["foo", "bar", "permessage-deflate"])
        // Duplicates are kept for the negotiation to decline.
        #expect(offers[2].parameters == [P(name: "a"), P(name: "a")])
    }

    @Test func whitespaceAroundSeparators() throws {
        let expected = [ExtensionOffer(name: "a", parameters: [P(name: "b", value: "1"), P(name: "c")]), ExtensionOffer(name: "d")]
        for text in ["a;b=1;c,d", " a ; b = 1 ;\tc , d ", "a;b=1;c ,d\t"] {
            #expect(try parse(text) == expected, "\(text)")
        }
    }

    @Test func emptyElementsAreSkipped() throws {
        #expect(try parse("") == [])
        #expect(try parse(" , ,") == [])
        #expect(try parse(",a,,b,") == [ExtensionOffer(name: "a"), ExtensionOffer(name: "b")])
    }

    @Test func quotedValuesAreUnescaped() throws {
        #expect(try parse("a; b=\"10\"") == [ExtensionOffer(name: "a", parameters: [P(name: "b", value: "10")])])
        #expect(try parse("a; b=\"1\\0\"") == [ExtensionOffer(name: "a", parameters: [P(name: "b", value: "10")])])
        #expect(try parse("a; b=\"x\", c") == [ExtensionOffer(name: "a", parameters: [P(name: "b", value: "x")]), ExtensionOffer(name: "c")])
    }

    @Test func malformedHeaders() {
        let cases: [(String, String)] = [
            (";a", "expected an extension name"),
            ("a;", "expected a parameter name"),
            ("a; =1", "expected a parameter name"),
            ("a; b=", "expected a parameter value"),
            ("a; b=;c", "expected a parameter value"),
            ("a b", "expected ',' or ';'"),
            ("a; b c", "expected ',' or ';'"),
            ("a; b=1 2", "expected ',' or ';'"),
            ("a; b=\"1", "unterminated quoted value"),
            ("a; b=\"\"", "quoted value is not a token"),
            ("a; b=\"1 2\"", "quoted value is not a token"),
            ("a; b=\"x\\", "bad escape in quoted value"),
            ("a; b=\"x\u{7F}\"", "bad character in quoted value"),
            ("a@b", "expected ',' or ';'"),
            ("a; b=x=y", "expected ',' or ';'"),
        ]
        for (text, message) in cases {
            #expect(error(text)?.message == message, "\(text)")
        }
        #expect(error("a; b=\"1")?.offset == 5)
        #expect(error("a; b=\"1")?.handshakeError.status == .badRequest)
    }

    @Test func garbageNeverCrashes() {
        var rng = SplitMix64(state: 0xE87)
        let alphabet = Array("ab;=,\" \t\\x9".utf8) + [0x00, 0x7F, 0xC3, 0xFF]
        for _ in 0..<5_000 {
            let bytes = (0..<Int.random(in: 0...24, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
            let text = String(decoding: bytes, as: UTF8.self)
            if let offers = try? ExtensionHeaderParser.parse([text]) {
                // Whatever parses is made of tokens.
                for offer in offers {
                    #expect(HTTPSyntax.isToken(Array(offer.name.utf8)))
                    for p in offer.parameters {
                        #expect(HTTPSyntax.isToken(Array(p.name.utf8)))
                        if let v = p.value { #expect(HTTPSyntax.isToken(Array(v.utf8))) }
                    }
                }
            }
        }
    }
}
