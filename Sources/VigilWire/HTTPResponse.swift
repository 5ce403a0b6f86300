/// An HTTP/1.1 response Vigil writes: a 101 for an upgrade, or a short final
/// response after which the connection closes (Vigil serves one request per
/// plain-HTTP connection, so every non-101 response carries `Connection: close`).
public struct HTTPResponse {
    public var status: HTTPStatus
    public var headers: [(String, String)]
    public var body: [UInt8]
    public var contentType: String?
    /// The Content-Length to declare when no body is sent: a HEAD or 304 response names the length
    /// a GET would carry (RFC 9110 §8.6). Nil: the body's own length.
    public var contentLength: Int?

    public init(status: HTTPStatus, headers: [(String, String)] = [], body: [UInt8] = [], contentType: String? = nil,
                contentLength: Int? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.contentType = contentType
        self.contentLength = contentLength
    }

    /// The response bytes. Adds `Content-Type` (if given), `Content-Length`
    /// (except on 101, which has no body, RFC 9110 §8.6) and `Connection: close`
    /// (except on 101). Caller headers named Content-Length, and Connection on
    /// non-101 responses, are dropped so the framing cannot contradict itself. CR,
    /// LF and NUL inside names and values become spaces, so a header can never
    /// inject another (response splitting).
    public func serialize() -> [UInt8] {
        let switching = status.code == 101
        var out: [UInt8] = []
        out.reserveCapacity(128 + body.count)
        append("HTTP/1.1 \(status.code) \(status.reason)", to: &out)
        out.append(contentsOf: [13, 10])
        for (name, value) in headers {
            if HTTPHeaderSearch.equalsIgnoringCase(name, "content-length") { continue }
            if !switching && HTTPHeaderSearch.equalsIgnoringCase(name, "connection") { continue }
            appendField(name, value, to: &out)
        }
        if let type = contentType {
            appendField("Content-Type", type, to: &out)
        }
        if !switching {
            appendField("Content-Length", String(body.isEmpty ? contentLength ?? 0 : body.count), to: &out)
            appendField("Connection", "close", to: &out)
        }
        out.append(contentsOf: [13, 10])
        if !switching {
            out.append(contentsOf: body)
        }
        return out
    }

    private func appendField(_ name: String, _ value: String, to out: inout [UInt8]) {
        append(name, to: &out)
        out.append(contentsOf: [UInt8(ascii: ":"), UInt8(ascii: " ")])
        append(value, to: &out)
        out.append(contentsOf: [13, 10])
    }

    private func append(_ text: String, to out: inout [UInt8]) {
        for byte in text.utf8 {
            out.append(byte == 13 || byte == 10 || byte == 0 ? UInt8(ascii: " ") : byte)
        }
    }
}
