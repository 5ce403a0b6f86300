import Testing
@testable import VigilWire

/// Field lookups on a request head.
@Suite struct HTTPRequestHeadTests {
    let head = HTTPRequestHead(
        method: "GET", target: "/a/b?x=1?y", versionMajor: 1, versionMinor: 1,
        headers: [
            ("Connection", "keep-alive, Upgrade"), ("connection", " ,close,, "),
            ("Sec-WebSocket-Protocol", "Chat, v2.json"), ("X-Empty", ""),
        ])

    @Test func lookups() {
        #expect(head.value("CONNECTION") == "keep-alive, Upgrade")
        #expect(head.values("Connection") == ["keep-alive, Upgrade", " ,close,, "])
        #expect(head.tokens("connection") == ["keep-alive", "upgrade", "close"])
        #expect(head.elements("sec-websocket-protocol") == ["Chat", "v2.json"])
        #expect(head.value("missing") == nil)
        #expect(head.values("x-empty") == [""])
        #expect(head.tokens("x-empty") == [])
    }

    @Test func path() {
        #expect(head.path == "/a/b")
        var plain = head
        plain.target = "/only"
        #expect(plain.path == "/only")
    }

    @Test func caseInsensitiveCompare() {
        #expect(HTTPHeaderSearch.equalsIgnoringCase("Sec-WebSocket-Key", "sec-websocket-key"))
        #expect(!HTTPHeaderSearch.equalsIgnoringCase("Host", "Hos"))
        #expect(!HTTPHeaderSearch.equalsIgnoringCase("Hos", "Host"))
        #expect(HTTPHeaderSearch.equalsIgnoringCase("", ""))
        #expect(!HTTPHeaderSearch.equalsIgnoringCase("[", "{")) // not letters: no case folding
    }
}
