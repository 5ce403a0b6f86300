import VigilCore

/// What `/v1` counts as it goes, on the loop thread (plain integers; the operator's metrics read
/// them at each scrape). Every label set is fixed and small: operation names, error codes (a
/// closed list of string literals), refusal kinds.
struct V1Stats {
    /// Requests decoded, by operation (`ClientOperation.metricIndex`).
    var requests = [Int](repeating: 0, count: ClientOperation.names.count)
    /// Error replies, by code.
    var errors: [String: Int] = [:]
    /// Requests refused by a limit, by which one (`Refusal`).
    var refusals = [Int](repeating: 0, count: Refusal.allCases.count)
    /// Event messages queued to recipients (one per recipient of each event).
    var deliveries = 0
    /// Events fanned out (pin and panic events and notices).
    var events = 0
    /// Changes refused with `unavailable` because they could not be recorded (refused up front
    /// during an outage, or taken back in the turn the journal failed).
    var refusedUnrecorded = 0
    /// `since` replays started (with at least one event), events they sent, and replays ended by
    /// closing the watcher because the history moved past them (`V1Application+Replay`).
    var replays = 0
    var replayedEvents = 0
    var replaysCut = 0
    /// Replays in progress (set when the figures are taken).
    var replaysInProgress = 0

    /// Requests with an idempotency key answered from a kept answer, and refused because the key
    /// was kept for another request (`V1Application+Idempotency`).
    var idemRepeats = 0
    var idemConflicts = 0
    /// Set when the figures are taken: kept answers held, and those evicted by the bounds.
    var idemKeys = 0
    var idemEvicted = 0

    mutating func refused(_ kind: Refusal) { refusals[kind.rawValue] += 1 }
}

/// A limit that refused a request (the `limit` label of `vigil_refusals_total`).
enum Refusal: Int, CaseIterable, Sendable {
    /// Over the per-connection message rate: the connection is closed (1008).
    case sessionMessages
    case sessionWrites
    case sessionSubscribes
    case addressPanicStarts
    case addressOpenStreams
    case addressPinCreates
    case addressLivePins
    case addressSubscribes
    /// The address table was full (`limits.max_tracked_addresses`).
    case addressUntracked
    /// `panic.max_streams` held.
    case panicCapacity
    /// Only the reserved share was left and the caller's address had idle streams.
    case panicReserve
    case addressCircleCreates
    /// `checkin.max_circles` held.
    case checkinCapacity
    /// A member over `checkin.requests_per_minute`.
    case checkinRequests

    var label: String {
        switch self {
        case .sessionMessages: return "session_messages"
        case .sessionWrites: return "session_writes"
        case .sessionSubscribes: return "session_subscribes"
        case .addressPanicStarts: return "address_panic_starts"
        case .addressOpenStreams: return "address_open_streams"
        case .addressPinCreates: return "address_pin_creates"
        case .addressLivePins: return "address_live_pins"
        case .addressSubscribes: return "address_subscribes"
        case .addressUntracked: return "address_untracked"
        case .panicCapacity: return "panic_capacity"
        case .panicReserve: return "panic_reserve"
        case .addressCircleCreates: return "address_circle_creates"
        case .checkinCapacity: return "checkin_capacity"
        case .checkinRequests: return "checkin_member_requests"
        }
    }

    /// The refusal an address budget's answer is, for a request whose rate it limits (`rate`).
    static func of(_ admission: AddressAdmission, rate: Refusal) -> Refusal? {
        switch admission {
        case .admitted: return nil
        case .rateLimited: return rate
        case .overLimit(.openStreams): return .addressOpenStreams
        case .overLimit(.livePins): return .addressLivePins
        case .overLimit(.trackedAddresses): return .addressUntracked
        }
    }
}
