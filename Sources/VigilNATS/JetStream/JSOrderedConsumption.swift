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
        // 409 on a push consumer's subject: "Consumer Deleted" (its server lost it, or it was
        // removed): nothing more comes from it.
        if message.status == 409 { return reset() }
        if message.status != nil { return .none }
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

    // MARK: acknowledged but not delivered

    /// The highest stream sequence a publish was acknowledged at that has not been delivered
    /// yet (0: none awaited), and since when (`watchedSinceMs`) the consumer has been at
    /// `watchedSequence` without moving.
    public private(set) var awaitedSequence: UInt64 = 0
    private var watchedSequence: UInt64 = 0
    private var watchedSinceMs: Int64 = 0

    /// A publish of ours was acknowledged at `sequence`: the stream holds it, so the consumer
    /// must deliver it. If it does not move at all for a while, it is lost (`tick`).
    public mutating func acknowledged(sequence: UInt64, nowMs: Int64) {
        guard sequence > lastStreamSequence else { return }
        if awaitedSequence <= lastStreamSequence {
            watchedSequence = lastStreamSequence
            watchedSinceMs = nowMs
        }
        awaitedSequence = max(awaitedSequence, sequence)
    }

    /// A new consumer was created: it gets the full `noProgressMs` to start delivering.
    public mutating func consumerCreated(nowMs: Int64) {
        watchedSequence = lastStreamSequence
        watchedSinceMs = nowMs
    }

    /// Whether the consumer has not delivered anything for `noProgressMs` although an
    /// acknowledged sequence is still ahead of it. Any progress, however slow, restarts the
    /// wait: a consumer catching up under load is left alone.
    public mutating func tick(nowMs: Int64, noProgressMs: Int64) -> Verdict {
        guard awaitedSequence > lastStreamSequence else { return .none }
        if lastStreamSequence != watchedSequence {
            watchedSequence = lastStreamSequence
            watchedSinceMs = nowMs
            return .none
        }
        guard nowMs - watchedSinceMs >= noProgressMs else { return .none }
        watchedSinceMs = nowMs
        return reset()
    }

    /// A new consumer is subscribed: its deliveries are numbered from 1 again.
    private mutating func reset() -> Verdict {
        expectedConsumerSequence = 1
        resets += 1
        return .reset(fromStreamSequence: nextStreamSequence)
    }
}
