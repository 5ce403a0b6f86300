/// An HTTP status code and its reason phrase (RFC 9110 §15), as Vigil sends them.
public struct HTTPStatus: Equatable, Sendable {
    public var code: Int
    public var reason: String

    public init(code: Int, reason: String) {
        self.code = code
        self.reason = reason
    }

    public static let switchingProtocols = HTTPStatus(code: 101, reason: "Switching Protocols")
    public static let ok = HTTPStatus(code: 200, reason: "OK")
    public static let notModified = HTTPStatus(code: 304, reason: "Not Modified")
    public static let badRequest = HTTPStatus(code: 400, reason: "Bad Request")
    public static let notFound = HTTPStatus(code: 404, reason: "Not Found")
    public static let methodNotAllowed = HTTPStatus(code: 405, reason: "Method Not Allowed")
    public static let requestTimeout = HTTPStatus(code: 408, reason: "Request Timeout")
    public static let upgradeRequired = HTTPStatus(code: 426, reason: "Upgrade Required")
    public static let headerFieldsTooLarge = HTTPStatus(code: 431, reason: "Request Header Fields Too Large")
    public static let internalServerError = HTTPStatus(code: 500, reason: "Internal Server Error")
    public static let serviceUnavailable = HTTPStatus(code: 503, reason: "Service Unavailable")
}
