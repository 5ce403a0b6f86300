/// Why an upgrade request was refused, with the HTTP response to send.
public struct HandshakeError: Error, Equatable {
    public var status: HTTPStatus
    /// Human-readable cause, also the response body.
    public var message: String
    /// Headers the status calls for, e.g. `Sec-WebSocket-Version: 13` on 426
    /// (RFC 6455 §4.4) or `Allow: GET` on 405 (RFC 9110 §15.5.6).
    public var headers: [(String, String)]

    public init(status: HTTPStatus, message: String, headers: [(String, String)] = []) {
        self.status = status
        self.message = message
        self.headers = headers
    }

    /// A `text/plain` response whose body is `message` and a newline.
    public func response() -> HTTPResponse {
        HTTPResponse(
            status: status, headers: headers, body: Array((message + "\n").utf8),
            contentType: "text/plain; charset=utf-8")
    }

    public static func == (lhs: HandshakeError, rhs: HandshakeError) -> Bool {
        lhs.status == rhs.status && lhs.message == rhs.message
            && lhs.headers.elementsEqual(rhs.headers) { $0.0 == $1.0 && $0.1 == $1.1 }
    }
}
