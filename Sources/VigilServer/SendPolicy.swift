import VigilWire

/// What a send did, so the caller (the fan-out, a reply) can count it and a policy is a value
/// rather than an `if` at each call site.
public enum SendResult: Equatable, Sendable {
    /// In the connection's output queue; out at the end of the turn.
    case queued
    /// Queued, after older unsent messages of the same kind were taken back (a newer location
    /// makes an older one moot).
    case conflated
    /// Not sent: the connection is not open (closing, or gone).
    case dropped
    /// Over the connection's budget: its policy is closing the connection instead of queueing.
    case closing
}

/// The kinds of traffic a connection sends, each with its own policy.
public enum TrafficClass: Int, CaseIterable, Sendable {
    /// Replies to the client's own requests, and the welcome.
    case reply
    /// Live map events (`pin.*`).
    case mapEvent
    /// A panic stream's `panic.location`: a newer one supersedes an older one still unsent.
    case panicLocation
    /// The rest of a panic stream's news (`panic.status`, `panic.ended`, `panic.revoked`,
    /// `panic.stale`, `panic.watchers`): never dropped for being behind.
    case panicNotice
    /// Control frames: ping, pong, close.
    case control
}

/// What a connection does when a send would take its unsent output past its budget.
///
/// Named per traffic class (`SendPolicies`), so the rules read in one place:
/// - a map subscriber that falls behind is closed with 1013 after its backlog is dropped (its
///   close frame goes out next, so it learns why at once and re-subscribes, getting a fresh
///   snapshot of its area);
/// - a panic watcher's unsent locations of a stream are replaced by the newest once its queue is
///   past `conflateAbove` (it sees the seq jump; status, end and revocation are never replaced);
/// - panic notices and control frames are always queued, up to twice the budget (a connection
///   that far behind is closed: it will reconnect and replay with `since`);
/// - a client that does not read its own replies is closed with 1008.
public struct OutputPolicy: Equatable, Sendable {
    public enum Overflow: Equatable, Sendable {
        /// Drop the unsent backlog and close with this code and reason.
        case close(CloseCode, reason: String)
        /// Drop the connection at once, without a close frame.
        case disconnect
    }

    /// Unsent bytes a connection may hold for this class of traffic.
    public var maxQueuedBytes: Int
    public var overflow: Overflow
    /// Above this many unsent bytes, older unsent messages with the same tag are taken back before
    /// a new one is queued (nil: never).
    public var conflateAbove: Int?

    public init(maxQueuedBytes: Int, overflow: Overflow, conflateAbove: Int? = nil) {
        self.maxQueuedBytes = maxQueuedBytes
        self.overflow = overflow
        self.conflateAbove = conflateAbove
    }
}

/// The output policy of each traffic class, and the budget of all connections together.
public struct SendPolicies: Equatable, Sendable {
    private var policies: [OutputPolicy]
    /// Unsent bytes of every connection together (config `websocket.max_total_output_bytes`).
    /// Past it, no connection may hold more than `globalFloorBytes`: the furthest behind are
    /// closed first, and memory stays bounded whatever the number of slow readers.
    public var maxTotalQueuedBytes: Int
    public var globalFloorBytes: Int

    /// The daemon's policies for a per-connection budget `maxQueuedBytes`
    /// (`websocket.max_output_buffer_bytes`).
    public init(maxQueuedBytes: Int, maxTotalQueuedBytes: Int, conflateAbove: Int, globalFloorBytes: Int = 65_536) {
        let behind = "too slow: events were lost; reconnect and subscribe again"
        policies = TrafficClass.allCases.map { traffic in
            switch traffic {
            case .reply:
                return OutputPolicy(maxQueuedBytes: maxQueuedBytes, overflow: .close(.policyViolation, reason: "replies are not being read"))
            case .mapEvent:
                return OutputPolicy(maxQueuedBytes: maxQueuedBytes, overflow: .close(.tryAgainLater, reason: behind))
            case .panicLocation:
                return OutputPolicy(maxQueuedBytes: maxQueuedBytes, overflow: .close(.tryAgainLater, reason: behind),
                                    conflateAbove: conflateAbove)
            case .panicNotice, .control:
                return OutputPolicy(maxQueuedBytes: maxQueuedBytes * 2, overflow: .close(.tryAgainLater, reason: behind))
            }
        }
        self.maxTotalQueuedBytes = maxTotalQueuedBytes
        self.globalFloorBytes = globalFloorBytes
    }

    public subscript(_ traffic: TrafficClass) -> OutputPolicy {
        get { policies[traffic.rawValue] }
        set { policies[traffic.rawValue] = newValue }
    }

    /// The budget every connection of this class has throughout a fan-out that adds at most
    /// `most` bytes to `totalQueued` (each recipient a frame, or a close frame instead), or nil
    /// when it may change during the walk (then each recipient asks `budget(_:totalQueued:)`).
    ///
    /// Exact: below the total budget at the end of the walk means below it at every recipient
    /// (the total only grows by the walk's own sends, or shrinks when a policy drops a backlog),
    /// so `budget(_:totalQueued:)` would have answered the connection's own budget each time.
    @inline(__always)
    public func budget(_ traffic: TrafficClass, totalQueued: Int, growingBy most: Int) -> Int? {
        totalQueued + most <= maxTotalQueuedBytes ? policies[traffic.rawValue].maxQueuedBytes : nil
    }

    /// A fan-out's budget, decided once for its walk (`FanOutBudget`): the exact one when the walk
    /// cannot change it (`budget(_:totalQueued:growingBy:)`), else the least a connection of this
    /// class can have (its own budget capped at the floor), past which each send asks.
    @inline(__always)
    public func fanOutBudget(_ traffic: TrafficClass, totalQueued: Int, growingBy most: Int) -> FanOutBudget {
        if let exact = budget(traffic, totalQueued: totalQueued, growingBy: most) { return FanOutBudget(least: exact, exact: true) }
        return FanOutBudget(least: min(policies[traffic.rawValue].maxQueuedBytes, globalFloorBytes), exact: false)
    }

    /// The budget a connection of this class has now, given every connection's unsent bytes.
    @inline(__always)
    public func budget(_ traffic: TrafficClass, totalQueued: Int) -> Int {
        let own = policies[traffic.rawValue].maxQueuedBytes
        return totalQueued > maxTotalQueuedBytes ? min(own, globalFloorBytes) : own
    }
}

/// The budget of one fan-out's recipients (`SendPolicies.fanOutBudget`): each has at least
/// `least` bytes; exactly that when `exact`, else a send that would take a recipient past it asks
/// the policies then (`SendPolicies.budget(_:totalQueued:)`), as every send did before. The
/// common send is one comparison either way.
public struct FanOutBudget: Equatable, Sendable {
    public let least: Int
    public let exact: Bool

    public init(least: Int, exact: Bool) {
        self.least = least
        self.exact = exact
    }
}
