/// The RFC 6455 §4 opening handshake: validating a client's upgrade request
/// (§4.2.1), building the server's 101 (§4.2.2), and the client side used by the
/// load-test client (§4.1).
public enum Handshake {
    /// The GUID appended to the key before hashing (§1.3).
    public static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `Sec-WebSocket-Accept` for a key: base64(SHA-1(key + GUID)) (§4.2.2 item 5.4).
    public static func acceptValue(forKey key: String) -> String {
        Crypto.base64Encode(Crypto.sha1(Array((key + guid).utf8)))
    }

    /// Checks an upgrade request against §4.2.1, in order: method, version, Host,
    /// Upgrade, Connection, Sec-WebSocket-Version, Sec-WebSocket-Key. Selects the
    /// first entry of `supportedSubprotocols` (server preference order) that the
    /// client offered; subprotocol names compare case-sensitively. No offer or no
    /// match selects none, and the connection proceeds without one.
    public static func validate(_ head: HTTPRequestHead, supportedSubprotocols: [String]) -> Result<UpgradeRequest, HandshakeError> {
        guard head.method == "GET" else {
            return .failure(HandshakeError(
                status: .methodNotAllowed, message: "WebSocket upgrade requires GET",
                headers: [("Allow", "GET")]))
        }
        guard head.versionMajor == 1 && head.versionMinor >= 1 else {
            return .failure(HandshakeError(status: .badRequest, message: "WebSocket upgrade requires HTTP/1.1"))
        }
        guard head.values("host").count == 1 else {
            return .failure(HandshakeError(status: .badRequest, message: "exactly one Host header required"))
        }
        let upgrade = head.values("upgrade")
        guard !upgrade.isEmpty else {
            // §4.2.2 / RFC 9110 §15.5.22: tell a plain HTTP client what to upgrade to.
            return .failure(HandshakeError(
                status: .upgradeRequired, message: "this endpoint requires a WebSocket upgrade",
                headers: [("Upgrade", "websocket")]))
        }
        // Upgrade elements may carry a version ("websocket/13" is not the token we
        // want); only the bare "websocket" protocol name is accepted.
        guard head.tokens("upgrade").contains("websocket") else {
            return .failure(HandshakeError(status: .badRequest, message: "Upgrade header must include websocket"))
        }
        guard head.tokens("connection").contains("upgrade") else {
            return .failure(HandshakeError(status: .badRequest, message: "Connection header must include Upgrade"))
        }
        let versions = head.values("sec-websocket-version")
        guard versions.count == 1, versions[0] == "13" else {
            // §4.4: answer an unsupported version with the versions we speak.
            return .failure(HandshakeError(
                status: .upgradeRequired, message: "Sec-WebSocket-Version 13 required",
                headers: [("Sec-WebSocket-Version", "13")]))
        }
        let keys = head.values("sec-websocket-key")
        guard keys.count == 1 else {
            return .failure(HandshakeError(status: .badRequest, message: "exactly one Sec-WebSocket-Key required"))
        }
        let key = keys[0]
        // §4.1: the key is a base64-encoded 16-byte value, so exactly 24 characters.
        guard key.utf8.count == 24, let nonce = Crypto.base64Decode(key), nonce.count == 16 else {
            return .failure(HandshakeError(status: .badRequest, message: "Sec-WebSocket-Key must be base64 of 16 bytes"))
        }
        let offered = head.elements("sec-websocket-protocol")
        let selected = supportedSubprotocols.first { offered.contains($0) }
        return .success(UpgradeRequest(
            key: key, subprotocol: selected, extensions: head.values("sec-websocket-extensions")))
    }

    /// The 101 response completing the handshake (§4.2.2 item 5). `extensions` is the
    /// `Sec-WebSocket-Extensions` value of the accepted extensions, e.g.
    /// `PerMessageDeflate.Agreement.responseHeader`; nil sends none (§4.2.2 item 5.6).
    public static func response(accept: String, subprotocol: String?, extensions: String? = nil,
                                extraHeaders: [(String, String)] = []) -> [UInt8] {
        var headers: [(String, String)] = [
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Accept", accept),
        ]
        if let subprotocol {
            headers.append(("Sec-WebSocket-Protocol", subprotocol))
        }
        if let extensions {
            headers.append(("Sec-WebSocket-Extensions", extensions))
        }
        headers.append(contentsOf: extraHeaders)
        return HTTPResponse(status: .switchingProtocols, headers: headers).serialize()
    }

    /// A client's opening handshake request (§4.1). `key` should be
    /// `Crypto.base64Encode(SecureRandom.bytes(count: 16))`.
    public static func clientRequest(host: String, path: String, key: String, subprotocols: [String], extensions: String? = nil) -> [UInt8] {
        var text = "GET \(path.isEmpty ? "/" : path) HTTP/1.1\r\n"
        text += "Host: \(host)\r\n"
        text += "Upgrade: websocket\r\n"
        text += "Connection: Upgrade\r\n"
        text += "Sec-WebSocket-Key: \(key)\r\n"
        text += "Sec-WebSocket-Version: 13\r\n"
        if !subprotocols.isEmpty {
            text += "Sec-WebSocket-Protocol: \(subprotocols.joined(separator: ", "))\r\n"
        }
        if let extensions {
            text += "Sec-WebSocket-Extensions: \(extensions)\r\n"
        }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// Whether a response head completes the handshake for `key` (§4.1, client
    /// steps 1-4): status 101, Upgrade websocket, Connection upgrade, and exactly
    /// one Sec-WebSocket-Accept equal to the expected value.
    public static func checkResponse(_ head: HTTPResponseHead, key: String) -> Bool {
        guard head.statusCode == 101 else { return false }
        guard head.tokens("upgrade").contains("websocket") else { return false }
        guard head.tokens("connection").contains("upgrade") else { return false }
        let accepts = head.values("sec-websocket-accept")
        return accepts.count == 1 && accepts[0] == acceptValue(forKey: key)
    }
}
