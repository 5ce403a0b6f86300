import Testing
@testable import VigilWire

/// Grammar pieces shared by both parsers.
@Suite struct HTTPSyntaxTests {
    @Test func tokens() {
        #expect(HTTPSyntax.isToken(Array("Sec-WebSocket-Key".utf8)))
        #expect(HTTPSyntax.isToken(Array("!#$%&'*+-.^_`|~09azAZ".utf8)))
        for bad in ["", "a b", "a:b", "a\"", "(x)", "a,b", "a/b", "é"] {
            #expect(!HTTPSyntax.isToken(Array(bad.utf8)), "\(bad)")
        }
    }

    @Test func versions() {
        #expect(HTTPSyntax.parseVersion(Array("HTTP/1.1".utf8))! == (1, 1))
        #expect(HTTPSyntax.parseVersion(Array("HTTP/2.0".utf8))! == (2, 0))
        for bad in ["HTTP/1", "HTTP/1.", "HTTP/a.1", "HTTPS/1.1", "http/1.1", "HTTP/1.1 ", "HTTP/11.1"] {
            #expect(HTTPSyntax.parseVersion(Array(bad.utf8)) == nil, "\(bad)")
        }
    }

    @Test func fields() {
        guard case .success(let field) = HTTPSyntax.parseField(Array("Name:\t v a l \t".utf8)) else {
            Issue.record("should parse")
            return
        }
        #expect(field.name == "Name" && field.value == "v a l")
        if case .failure(let error) = HTTPSyntax.parseField(Array("Name\t: v".utf8)) {
            #expect(error == .whitespaceBeforeColon)
        } else {
            Issue.record("tab before colon must fail")
        }
    }
}
