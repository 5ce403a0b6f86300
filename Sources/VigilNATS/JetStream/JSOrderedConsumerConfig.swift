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
        switch JSAPI.object(payload) {
        case .failure(let error): return .failure(error)
        case .success(let object):
            guard let name = object["name"]?.string, NATSSubject.isToken(name) else {
                return .failure(JSAPIError(code: 0, errorCode: 0, description: "consumer info without a valid name"))
            }
            return .success(name)
        }
    }
}

/// Where a pushed JetStream message sits, read from its reply subject:
/// `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<timestamp>.<pending>`
/// or the newer form with a domain and an account hash in front (and a random token after).
public struct JSDeliveryInfo: Equatable, Sendable {
    public var stream: String
    public var consumer: String
    public var deliveries: UInt64
    public var streamSequence: UInt64
    public var consumerSequence: UInt64
    /// Nanoseconds since 1970 when the stream stored it.
    public var timestampNs: UInt64
    public var pending: UInt64

    public init?(replySubject: String) {
        let tokens = replySubject.split(separator: ".", omittingEmptySubsequences: false)
        guard tokens.count >= 9, tokens[0] == "$JS", tokens[1] == "ACK" else { return nil }
        let base: Int
        switch tokens.count {
        case 9: base = 2
        case 11, 12: base = 4  // $JS.ACK.<domain>.<account hash>.<stream>...
        default: return nil
        }
        func number(_ i: Int) -> UInt64? { NATSParser.number(ArraySlice(tokens[base + i].utf8), maxDigits: 20) }
        guard let deliveries = number(2), let sseq = number(3), let cseq = number(4), let ts = number(5),
              let pending = number(6) else { return nil }
        stream = String(tokens[base])
        consumer = String(tokens[base + 1])
        self.deliveries = deliveries
        streamSequence = sseq
        consumerSequence = cseq
        timestampNs = ts
        self.pending = pending
    }
}
