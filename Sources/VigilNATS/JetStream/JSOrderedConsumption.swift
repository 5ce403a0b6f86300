/// The rules of an ordered consumption, as a value: each thing the consumer's subscription
/// receives goes in, what to do comes out. No I/O; the connection layer executes the verdicts.
///
/// The stream is read in stream-sequence order with nothing skipped: a message is applied only
/// when its consumer sequence is the next one expected (the server numbers a consumer's
/// deliveries 1, 2, 3…). Anything else (a gap after a reconnect, a heartbeat saying the server
/// sent more than we got, heartbeats that stop coming) means deliveries were lost; the consumer is
/// then recreated from the stream sequence after the last one applied, and deliveries from the
/// old consumer are ignored from then on (its subscription id is left behind). So each stream
/// sequence is applied at most once and, as long as the stream still holds it, at least once.
public struct JSOrderedConsumption: Equatable, Sendable {
    /// The last stream sequence applied (0 before the first).
    public private(set) var lastStreamSequence: UInt64
    /// The consumer sequence the next delivery must carry.
    public private(set) var expectedConsumerSequence: UInt64 = 1
    /// Recreations so far (for metrics).
    public private(set) var resets = 0

    public init(startAfter lastApplied: UInt64) {
        lastStreamSequence = lastApplied
    }

    public enum Verdict: Equatable, Sendable {
        /// Apply the message: it is the next one, at this stream sequence.
        case apply(streamSequence: UInt64)
        /// Publish an empty message to this subject (flow control, or a stalled consumer's wake-up).
        case respond(to: String)
        /// Nothing to do (a heartbeat that shows nothing missing).
        case none
        /// Recreate the consumer from this stream sequence.
        case reset(fromStreamSequence: UInt64)
    }

    /// The stream sequence a new consumer starts at.
    public var nextStreamSequence: UInt64 { lastStreamSequence + 1 }

    /// One message on the consumer's subscription: a stream message, a flow-control request or an
    /// idle heartbeat (status 100).
    public mutating func received(_ message: NATSMessage) -> Verdict {
        if let headers = message.headers, headers.status == 100 {
            if let stalled = headers["Nats-Consumer-Stalled"] { return .respond(to: stalled) }
            if headers.statusDescription.lowercased().contains("flowcontrol"), let reply = message.replyTo {
                return .respond(to: reply)
            }
            // An idle heartbeat: the last consumer sequence the server sent must be ours.
            if let last = headers["Nats-Last-Consumer"].flatMap({ UInt64($0) }), last != expectedConsumerSequence - 1 {
                return reset()
            }
            return .none
        }
        if message.status != nil { return .none }  // another status (e.g. 409 consumer deleted): the heartbeat timer decides
        guard let reply = message.replyTo, let info = JSDeliveryInfo(replySubject: reply) else { return reset() }
        guard info.consumerSequence == expectedConsumerSequence, info.streamSequence > lastStreamSequence else {
            return reset()
        }
        expectedConsumerSequence += 1
        lastStreamSequence = info.streamSequence
        return .apply(streamSequence: info.streamSequence)
    }

    /// No heartbeat or message within the allowed time: the consumer is presumed lost.
    public mutating func heartbeatsMissed() -> Verdict { reset() }

    /// A new consumer is subscribed: its deliveries are numbered from 1 again.
    private mutating func reset() -> Verdict {
        expectedConsumerSequence = 1
        resets += 1
        return .reset(fromStreamSequence: nextStreamSequence)
    }
}
