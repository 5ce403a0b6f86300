import Testing
@testable import VigilWire

/// RFC 6455 §4 opening handshake, both sides.
@Suite struct HandshakeTests {
    func request(_ edit: (inout [(name: String, value: String)]) -> Void = { _ in },
                 method: String = "GET", minor: Int = 1) -> HTTPRequestHead {
        var headers: [(name: String, value: String)] = [
            ("Host", "server.example.com"), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13"),
        ]
        edit(&headers)
        return HTTPRequestHead(method: method, target: "/ws", versionMajor: 1, versionMinor: minor, headers: headers)
    }

    func remove(_ name: String) -> (inout [(name: String, value: String)]) -> Void {
        { $0.removeAll { $0.name == name } }
    }

    func set(_ name: String, _ value: String) -> (inout [(name: String, value: String)]) -> Void {
        { headers in
            headers.removeAll { $0.name == name }
            headers.append((name, value))
        }
    }

    func error(_ head: HTTPRequestHead) -> HandshakeError? {
        if case .failure(let e) = Handshake.validate(head, supportedSubprotocols: []) { return e }
        return nil
    }

    @Test func rfcSampleAcceptValue() {
        #expect(Handshake.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test func validRequest() {
        let result = Handshake.validate(request(), supportedSubprotocols: ["chat"])
        #expect(result == .success(UpgradeRequest(key: "dGhlIHNhbXBsZSBub25jZQ==", subprotocol: nil, extensions: [])))
    }

    @Test func headerNamesAndTokensAreCaseInsensitive() {
        let head = HTTPRequestHead(method: "GET", target: "/", versionMajor: 1, versionMinor: 1, headers: [
            ("HOST", "a"), ("upgrade", "WebSocket"), ("CONNECTION", "Keep-Alive, UPGRADE"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="), ("SEC-WEBSOCKET-VERSION", "13"),
        ])
        #expect(error(head) == nil)
    }

    @Test func parsedSampleRequest() {
        guard let h = head(parseRequest(sampleRequest)) else {
            Issue.record("no head")
            return
        }
        guard case .success(let upgrade) = Handshake.validate(h, supportedSubprotocols: ["superchat", "chat"]) else {
            Issue.record("should validate")
            return
        }
        #expect(upgrade.subprotocol == "superchat")
    }

    @Test func methodAndVersion() {
        let post = error(request(method: "POST"))
        #expect(post?.status == .methodNotAllowed)
        #expect(post?.headers.first.map { $0.0 == "Allow" && $0.1 == "GET" } == true)
        #expect(error(request(minor: 0))?.status == .badRequest)
        #expect(error(request(method: "get"))?.status == .methodNotAllowed) // methods are case-sensitive
    }

    @Test func host() {
        #expect(error(request(remove("Host")))?.message == "exactly one Host header required")
        #expect(error(request { $0.append(("host", "other")) })?.status == .badRequest)
    }

    @Test func upgradeHeader() {
        let missing = error(request(remove("Upgrade")))
        #expect(missing?.status == .upgradeRequired)
        #expect(missing?.headers.contains { $0.0 == "Upgrade" && $0.1 == "websocket" } == true)
        #expect(error(request(set("Upgrade", "h2c")))?.status == .badRequest)
        #expect(error(request(set("Upgrade", "h2c, WebSocket"))) == nil)
        #expect(error(request(set("Upgrade", "WEBSOCKET"))) == nil)
    }

    @Test func connectionHeader() {
        #expect(error(request(set("Connection", "keep-alive, Upgrade"))) == nil)
        #expect(error(request(set("Connection", "upgrade"))) == nil)
        #expect(error(request { $0.removeAll { $0.name == "Connection" }; $0 += [("Connection", "keep-alive"), ("connection", "UPGRADE")] }) == nil)
        #expect(error(request(set("Connection", "keep-alive")))?.status == .badRequest)
        #expect(error(request(remove("Connection")))?.status == .badRequest)
    }

    @Test func versionHeader() {
        for edit in [remove("Sec-WebSocket-Version"), set("Sec-WebSocket-Version", "8"), set("Sec-WebSocket-Version", "13, 8")] {
            let e = error(request(edit))
            #expect(e?.status == .upgradeRequired)
            #expect(e?.headers.contains { $0.0 == "Sec-WebSocket-Version" && $0.1 == "13" } == true)
        }
    }

    @Test func keyHeader() {
        let bad = [
            "", "dGhlIHNhbXBsZSBub25jZQ", "dGhlIHNhbXBsZSBub25jZQ=", "dGhlIHNhbXBsZSBub25jZQ===",
            "dGhlIHNhbXBsZSBub25jZR==", // non-canonical trailing bits
            "dGhlIHNhbXBsZSBub25j*Q==", "dGhlIHNhbXBsZSBub25jZQ==dGhl", "AAAAAAAAAAAAAAAAAAAAAAA=", // 17 bytes
            "AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAA====",
        ]
        for key in bad {
            #expect(error(request(set("Sec-WebSocket-Key", key)))?.status == .badRequest, "\(key)")
        }
        #expect(error(request(remove("Sec-WebSocket-Key")))?.status == .badRequest)
        #expect(error(request { $0.append(("Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAAAA==")) })?.status == .badRequest)
        #expect(error(request(set("Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAAAA=="))) == nil)
    }

    @Test func subprotocolSelection() {
        func select(_ offered: [String], _ supported: [String]) -> String? {
            let head = request { headers in
                for value in offered { headers.append(("Sec-WebSocket-Protocol", value)) }
            }
            if case .success(let upgrade) = Handshake.validate(head, supportedSubprotocols: supported) {
                return upgrade.subprotocol
            }
            return "<failed>"
        }
        #expect(select([], ["a"]) == nil)
        #expect(select(["x, y"], ["a"]) == nil)
        #expect(select(["b, a"], ["a", "b"]) == "a") // server preference order
        #expect(select(["x", "b"], ["a", "b"]) == "b") // across header lines
        #expect(select(["A"], ["a"]) == nil) // case-sensitive
        #expect(select(["a"], []) == nil)
    }

    @Test func extensionsAreCarried() {
        let head = request { $0.append(("Sec-WebSocket-Extensions", "permessage-deflate; client_max_window_bits")) }
        if case .success(let upgrade) = Handshake.validate(head, supportedSubprotocols: []) {
            #expect(upgrade.extensions == ["permessage-deflate; client_max_window_bits"])
        } else {
            Issue.record("should validate")
        }
    }

    @Test func responseBytes() {
        let bytes = Handshake.response(accept: "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", subprotocol: "chat")
        #expect(String(decoding: bytes, as: UTF8.self) == """
            HTTP/1.1 101 Switching Protocols\r
            Upgrade: websocket\r
            Connection: Upgrade\r
            Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r
            Sec-WebSocket-Protocol: chat\r
            \r

            """)
        let plain = String(decoding: Handshake.response(accept: "x", subprotocol: nil, extraHeaders: [("X-A", "1")]), as: UTF8.self)
        #expect(!plain.contains("Sec-WebSocket-Protocol") && plain.hasSuffix("X-A: 1\r\n\r\n"))
    }

    @Test func responseWithExtensions() throws {
        // The request's offer, negotiated, answered in the 101 (RFC 7692 §7, RFC 6455 §4.2.2).
        let head = request { $0.append(("Sec-WebSocket-Extensions", "permessage-deflate; client_max_window_bits")) }
        guard case .success(let upgrade) = Handshake.validate(head, supportedSubprotocols: []) else {
            Issue.record("should validate")
            return
        }
        let agreement = try PerMessageDeflate.negotiate(upgrade.extensions, settings: DeflateSettings(clientMaxWindowBits: 12))
        let bytes = Handshake.response(accept: "x", subprotocol: nil, extensions: agreement?.responseHeader)
        #expect(String(decoding: bytes, as: UTF8.self) == """
            HTTP/1.1 101 Switching Protocols\r
            Upgrade: websocket\r
            Connection: Upgrade\r
            Sec-WebSocket-Accept: x\r
            Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover; client_max_window_bits=12\r
            \r

            """)
        let none = String(decoding: Handshake.response(accept: "x", subprotocol: "v1", extensions: nil), as: UTF8.self)
        #expect(!none.contains("Sec-WebSocket-Extensions"))
    }

    @Test func errorResponse() {
        let e = HandshakeError(status: .upgradeRequired, message: "need 13", headers: [("Sec-WebSocket-Version", "13")])
        let text = String(decoding: e.response().serialize(), as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 426 Upgrade Required\r\nSec-WebSocket-Version: 13\r\n"))
        #expect(text.contains("Content-Type: text/plain; charset=utf-8\r\n"))
        #expect(text.hasSuffix("Content-Length: 8\r\nConnection: close\r\n\r\nneed 13\n"))
    }

    @Test func clientRoundTrip() {
        let key = Crypto.base64Encode(SecureRandom.bytes(count: 16))
        let requestBytes = Handshake.clientRequest(host: "localhost:8080", path: "/ws", key: key, subprotocols: ["v1", "v2"])
        guard let h = head(parseRequest([requestBytes])) else {
            Issue.record("client request does not parse")
            return
        }
        guard case .success(let upgrade) = Handshake.validate(h, supportedSubprotocols: ["v2"]) else {
            Issue.record("client request does not validate")
            return
        }
        #expect(upgrade.key == key && upgrade.subprotocol == "v2")
        let response = Handshake.response(accept: Handshake.acceptValue(forKey: upgrade.key), subprotocol: "v2")
        var parser = HTTPResponseParser()
        guard case .complete(let responseHead, 0) = response.withUnsafeBytes({ parser.feed($0) }) else {
            Issue.record("response does not parse")
            return
        }
        #expect(Handshake.checkResponse(responseHead, key: key))
        #expect(!Handshake.checkResponse(responseHead, key: "AAAAAAAAAAAAAAAAAAAAAA=="))
        var wrongStatus = responseHead
        wrongStatus.statusCode = 200
        #expect(!Handshake.checkResponse(wrongStatus, key: key))
        var noUpgrade = responseHead
        noUpgrade.headers.removeAll { $0.name == "Upgrade" }
        #expect(!Handshake.checkResponse(noUpgrade, key: key))
    }
}
