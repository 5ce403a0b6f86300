import VigilCore

/// The consumer behind an ordered consumption (ADR-17's "ordered consumer", built from the plain
/// consumer API): ephemeral, pushed to our `deliverSubject`, starting at `startSequence`, no acks
/// and no redelivery (order and completeness are checked by the client, which recreates the
/// consumer from the last sequence it applied whenever it sees a gap), in memory with one replica
/// (it is disposable), with flow control and idle heartbeats so that a stalled or lost consumer
/// is noticed, and removed by the server after `inactiveSeconds` without us.
public struct JSOrderedConsumerConfig: Equatable, Sendable {
    public var stream: String
    public var deliverSubject: String
    public var startSequence: UInt64
    public var filterSubject: String?
    public var heartbeatMs: Int64
    public var inactiveSeconds: Int64

    public init(stream: String, deliverSubject: String, startSequence: UInt64, filterSubject: String? = nil,
                heartbeatMs: Int64 = 5_000, inactiveSeconds: Int64 = 300) {
        self.stream = stream
        self.deliverSubject = deliverSubject
        self.startSequence = startSequence
        self.filterSubject = filterSubject
        self.heartbeatMs = heartbeatMs
        self.inactiveSeconds = inactiveSeconds
    }

    /// The body of `$JS.API.CONSUMER.CREATE.<stream>`.
    public func encode() -> [UInt8] {
        var json = JSONWriter(capacity: 384)
        json.beginObject()
        json.field("stream_name", stream)
        json.key("config")
        json.beginObject()
        json.field("deliver_subject", deliverSubject)
        if startSequence <= 1 {
            json.field("deliver_policy", "all")
        } else {
            json.field("deliver_policy", "by_start_sequence")
            json.field("opt_start_seq", Int64(clamping: startSequence))
        }
        json.field("ack_policy", "none")
        json.field("max_deliver", Int64(1))
        json.field("replay_policy", "instant")
        json.field("flow_control", true)
        json.field("idle_heartbeat", heartbeatMs * 1_000_000)
        json.field("mem_storage", true)
        json.field("num_replicas", Int64(1))
        json.field("inactive_threshold", inactiveSeconds * 1_000_000_000)
        if let filterSubject { json.field("filter_subject", filterSubject) }
        json.endObject()
        json.endObject()
        return json.bytes
    }

    /// The consumer's name from the CREATE reply.
    public static func decodeName(_ payload: [UInt8]) -> Result<String, JSAPIError> {
        decodeCreated(payload).map { $0.name }
    }

    /// The consumer's name and the server it lives on (`cluster.leader`; empty outside a NATS
    /// cluster) from the CREATE reply.
    public static func decodeCreated(_ payload: [UInt8]) -> Result<(name: String, server: String), JSAPIError> {
        switch JSAPI.object(payload) {
        case .failure(let error): return .failure(error)
        case .success(let object):
            guard let name = object["name"]?.string, NATSSubject.isToken(name) else {
                return .failure(JSAPIError(code: 0, errorCode: 0, description: "consumer info without a valid name"))
            }
            return .success((name, String((object["cluster"]?.object?["leader"]?.string ?? "").prefix(64))))
        }
    }
}
