import VigilCore

/// The JetStream API subjects Vigil calls (docs.nats.io, "JetStream wire API reference").
/// Every call is a request whose reply is one JSON document, an error or the result.
public enum JSAPI {
    public static func streamInfo(_ stream: String) -> String { "$JS.API.STREAM.INFO.\(stream)" }
    public static func streamCreate(_ stream: String) -> String { "$JS.API.STREAM.CREATE.\(stream)" }
    /// The whole config again, with the settings to change (JetStream refuses to change some).
    public static func streamUpdate(_ stream: String) -> String { "$JS.API.STREAM.UPDATE.\(stream)" }
    public static func consumerCreate(_ stream: String) -> String { "$JS.API.CONSUMER.CREATE.\(stream)" }
    public static func consumerDelete(_ stream: String, _ consumer: String) -> String {
        "$JS.API.CONSUMER.DELETE.\(stream).\(consumer)"
    }

    /// Error code of `stream not found` (`err_code` 10059), which makes STREAM.INFO a probe.
    public static let streamNotFound = 10059

    /// Parses a reply: the JSON object, or the API's error, or a description of why it is neither.
    static func object(_ payload: [UInt8]) -> Result<JSONObject, JSAPIError> {
        guard let value = try? JSONParser.parse(payload, maxDepth: 16), let object = value.object else {
            return .failure(JSAPIError(code: 0, errorCode: 0, description: "reply is not a JSON object"))
        }
        if let error = object["error"]?.object {
            return .failure(JSAPIError(code: Int(error["code"]?.int64 ?? 0), errorCode: Int(error["err_code"]?.int64 ?? 0),
                                       description: String((error["description"]?.string ?? "").prefix(200))))
        }
        return .success(object)
    }

    /// A sequence number from JSON: a non-negative integer (exact up to 2^53).
    static func sequence(_ value: JSONValue?) -> UInt64? {
        guard let n = value?.int64, n >= 0 else { return nil }
        return UInt64(n)
    }
}

/// An error the JetStream API answered with (`{"error":{"code":..,"err_code":..,"description":..}}`),
/// or, with codes 0, a reply that could not be read.
public struct JSAPIError: Error, Equatable, Sendable, CustomStringConvertible {
    public var code: Int
    public var errorCode: Int
    public var description: String

    public init(code: Int, errorCode: Int, description: String) {
        self.code = code
        self.errorCode = errorCode
        self.description = description
    }
}
