/// JetStream's answer to a publish on its reply subject: `{"stream":"S","seq":N}` once the
/// stream has stored (and, replicated, a quorum of its servers has) the message; `duplicate`
/// when a message with the same `Nats-Msg-Id` was already stored within the window (then `seq`
/// is the earlier message's). Anything else is an error: the write is not durable.
public struct JSPubAck: Equatable, Sendable {
    public var stream: String
    public var sequence: UInt64
    public var duplicate: Bool

    public init(stream: String, sequence: UInt64, duplicate: Bool = false) {
        self.stream = stream
        self.sequence = sequence
        self.duplicate = duplicate
    }

    /// The header that names a message for de-duplication.
    public static let messageIDHeader = "Nats-Msg-Id"

    public static func decode(_ payload: [UInt8]) -> Result<JSPubAck, JSAPIError> {
        switch JSAPI.object(payload) {
        case .failure(let error):
            return .failure(error)
        case .success(let object):
            guard let stream = object["stream"]?.string, let seq = JSAPI.sequence(object["seq"]), seq > 0 else {
                return .failure(JSAPIError(code: 0, errorCode: 0, description: "publish ack without stream and seq"))
            }
            return .success(JSPubAck(stream: stream, sequence: seq, duplicate: object["duplicate"]?.bool ?? false))
        }
    }
}
