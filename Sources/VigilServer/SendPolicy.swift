import VigilWire

/// What a send did, so the caller (the fan-out, a reply) can count it and a policy is a value
/// rather than an `if` at each call site.
public enum SendResult: Equatable, Sendable {
    /// In the connection's output queue; out at the end of the turn.
    case queued
    /// Replaced an older queued message of the same kind (a newer location makes an older one moot).
    case conflated
    /// Not sent: the connection is not open (closing, or gone).
    case dropped
    /// Over the connection's budget: the policy is closing the connection instead of queueing.
    case closing
}

/// The kinds of traffic a connection sends, each with its own policy.
public enum TrafficClass: Int, CaseIterable, Sendable {
    /// Replies to the client's own requests, and the welcome.
    case reply
    /// Live map events (`pin.*`).
    case mapEvent
    /// Panic stream events and notices (`panic.*`).
    case panicEvent
    /// Control frames: ping, pong, close.
    case control
}

/// What a connection does when a send would take its unsent output past `maxQueuedBytes`.
public struct OutputPolicy: Equatable, Sendable {
    public enum Overflow: Equatable, Sendable {
        /// Drop the connection at once (no close frame could get through a full queue anyway).
        case disconnect
    }

    /// Unsent bytes a connection may hold for this class of traffic.
    public var maxQueuedBytes: Int
    public var overflow: Overflow
    /// Whether the cap applies to a send when nothing is queued yet. False keeps the rule of the
    /// first releases: a single message larger than the cap still goes out whole.
    public var capsFirstMessage: Bool

    public init(maxQueuedBytes: Int, overflow: Overflow = .disconnect, capsFirstMessage: Bool = false) {
        self.maxQueuedBytes = maxQueuedBytes
        self.overflow = overflow
        self.capsFirstMessage = capsFirstMessage
    }

    /// Whether `bytes` more may be queued on top of `queued`.
    @inline(__always)
    public func admits(_ bytes: Int, queued: Int) -> Bool {
        if queued == 0 && !capsFirstMessage { return true }
        return queued + bytes <= maxQueuedBytes
    }
}

/// The output policy of each traffic class (config `websocket.max_output_buffer_bytes` for all of
/// them today: a consumer that falls that far behind is disconnected).
public struct SendPolicies: Equatable, Sendable {
    private var policies: [OutputPolicy]

    public init(uniform policy: OutputPolicy) {
        policies = Array(repeating: policy, count: TrafficClass.allCases.count)
    }

    public subscript(_ traffic: TrafficClass) -> OutputPolicy {
        get { policies[traffic.rawValue] }
        set { policies[traffic.rawValue] = newValue }
    }
}
