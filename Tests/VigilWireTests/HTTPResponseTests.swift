import Testing
@testable import VigilWire

/// Response serialization.
@Suite struct HTTPResponseTests {
    @Test func finalResponse() {
        let r = HTTPResponse(status: .notFound, headers: [("X-Trace", "1")], body: Array("nope".utf8), contentType: "text/plain")
        #expect(String(decoding: r.serialize(), as: UTF8.self)
            == "HTTP/1.1 404 Not Found\r\nX-Trace: 1\r\nContent-Type: text/plain\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope")
    }

    @Test func switchingProtocolsHasNoLengthOrClose() {
        let r = HTTPResponse(status: .switchingProtocols, headers: [("Upgrade", "websocket"), ("Connection", "Upgrade")])
        #expect(String(decoding: r.serialize(), as: UTF8.self)
            == "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
    }

    @Test func framingHeadersCannotBeOverridden() {
        let r = HTTPResponse(status: .ok, headers: [("Content-Length", "99"), ("Connection", "keep-alive")])
        let text = String(decoding: r.serialize(), as: UTF8.self)
        #expect(text == "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    }

    @Test func noHeaderInjection() {
        let r = HTTPResponse(status: .ok, headers: [("X-A", "v\r\nSet-Cookie: evil")])
        let text = String(decoding: r.serialize(), as: UTF8.self)
        #expect(text.contains("X-A: v  Set-Cookie: evil\r\n"))
    }

    @Test func statuses() {
        #expect(HTTPStatus.ok.code == 200 && HTTPStatus.switchingProtocols.code == 101)
        #expect(HTTPStatus.badRequest.code == 400 && HTTPStatus.notFound.code == 404)
        #expect(HTTPStatus.methodNotAllowed.code == 405 && HTTPStatus.requestTimeout.code == 408)
        #expect(HTTPStatus.upgradeRequired.code == 426 && HTTPStatus.headerFieldsTooLarge.code == 431)
        #expect(HTTPStatus.internalServerError.code == 500 && HTTPStatus.serviceUnavailable.code == 503)
    }
}
