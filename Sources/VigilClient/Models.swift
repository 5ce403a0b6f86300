import Foundation

// The protocol's objects (docs/PROTOCOL.md), read with Foundation's JSONDecoder: snake_case keys
// become camelCase, members the client does not know are ignored. Times are Unix milliseconds.

/// The server's limits, from `welcome` (docs/LIMITS.md gives each key's setting).
public struct Limits: Sendable, Codable, Equatable {
    /// A pin's `ttl_s` rule.
    public struct TTL: Sendable, Codable, Equatable {
        /// The default, in seconds.
        public var `default`: Int
        /// The shortest, in seconds.
        public var min: Int
        /// The longest, in seconds.
        public var max: Int
    }
    /// The largest message, in bytes.
    public var maxMessageBytes: Int
    /// A pin title's cap in characters.
    public var titleMaxChars: Int?
    /// A pin title's cap in bytes of UTF-8.
    public var titleMaxBytes: Int?
    /// A pin description's cap in characters.
    public var descriptionMaxChars: Int?
    /// A pin description's cap in bytes of UTF-8.
    public var descriptionMaxBytes: Int?
    /// The configured pin categories.
    public var categories: [String]
    /// The pin time-to-live rule.
    public var ttlS: TTL?
    /// `down − up` at which a pin is removed as flagged.
    public var voteFlagThreshold: Int?
    /// The session's write budget per minute.
    public var writesPerMinute: Int?
    /// The session's write burst.
    public var writeBurst: Int?
    /// The session's message rate.
    public var messagesPerSecond: Int?
    /// The session's message burst.
    public var messageBurst: Int?
    /// At most this many pins in a subscribe reply.
    public var maxSubscribePins: Int?
    /// The longest reach of a pin, in metres.
    public var maxRangeM: Int?
    /// A panic note's cap in characters.
    public var panicNoteMaxChars: Int?
    /// A panic note's cap in bytes.
    public var panicNoteMaxBytes: Int?
    /// A check-in label's cap in characters.
    public var checkinLabelMaxChars: Int?
    /// A check-in label's cap in bytes.
    public var checkinLabelMaxBytes: Int?
    /// A check-in answer note's cap in characters.
    public var checkinNoteMaxChars: Int?
    /// A check-in answer note's cap in bytes.
    public var checkinNoteMaxBytes: Int?
}

/// The server's first message on a connection.
public struct Welcome: Sendable, Codable, Equatable {
    /// This connection's random session id (a reconnect is a new session).
    public var session: String
    /// The protocol version (1).
    public var `protocol`: Int
    /// The server's limits.
    public var limits: Limits?
}

/// An area of the map: a bounding box in degrees, or a circle.
public enum Area: Sendable, Equatable {
    /// South, west, north, east in degrees (west > east crosses the antimeridian).
    case bbox(south: Double, west: Double, north: Double, east: Double)
    /// A centre and a radius in metres.
    case circle(lat: Double, lon: Double, radiusMeters: Double)

    /// The `area` member of `subscribe`.
    public var json: JSONValue {
        switch self {
        case let .bbox(s, w, n, e): return ["bbox": [.number(s), .number(w), .number(n), .number(e)]]
        case let .circle(lat, lon, r): return ["center": ["lat": .number(lat), "lon": .number(lon)], "radius_m": .number(r)]
        }
    }
}

/// A live map pin.
public struct Pin: Sendable, Codable, Equatable, Identifiable {
    /// A random UUID.
    public var id: String
    /// Latitude in degrees.
    public var lat: Double
    /// Longitude in degrees.
    public var lon: Double
    /// The title.
    public var title: String
    /// The description (may be empty).
    public var description: String
    /// The category.
    public var category: String
    /// Created (ms).
    public var createdAt: Int64
    /// Last changed (ms).
    public var updatedAt: Int64
    /// Expires (ms).
    public var expiresAt: Int64
    /// Up votes.
    public var up: Int
    /// Down votes.
    public var down: Int
    /// The reach in metres, for a pin seen only by viewers within it (Radar); `nil`: everyone in the area.
    public var rangeM: Int?

    /// Time left before the pin expires, never below zero, at `nowMs` (Unix ms).
    public func timeLeft(nowMs: Int64) -> Duration { .milliseconds(Swift.max(0, expiresAt - nowMs)) }
}

/// A pin to create (`pin.create`).
public struct NewPin: Sendable, Equatable {
    /// Latitude.
    public var lat: Double
    /// Longitude.
    public var lon: Double
    /// The title (1–80 characters).
    public var title: String
    /// The description.
    public var description: String?
    /// The category (`general` by default).
    public var category: String?
    /// Time to live in seconds.
    public var ttlSeconds: Int?
    /// A reach in metres (seen only by viewers within it).
    public var rangeMeters: Int?

    /// A new pin.
    public init(lat: Double, lon: Double, title: String, description: String? = nil, category: String? = nil,
                ttlSeconds: Int? = nil, rangeMeters: Int? = nil) {
        self.lat = lat; self.lon = lon; self.title = title; self.description = description
        self.category = category; self.ttlSeconds = ttlSeconds; self.rangeMeters = rangeMeters
    }

    var json: JSONValue {
        var o: JSONObject = ["lat": .number(lat), "lon": .number(lon), "title": .string(title)]
        if let description { o["description"] = .string(description) }
        if let category { o["category"] = .string(category) }
        if let ttlSeconds { o["ttl_s"] = .number(Double(ttlSeconds)) }
        if let rangeMeters { o["range_m"] = .number(Double(rangeMeters)) }
        return .object(o)
    }
}

/// The reply to `pin.create`: the pin and its edit token (keep it: the only proof of ownership).
public struct CreatedPin: Sendable, Codable, Equatable {
    /// The new pin.
    public var pin: Pin
    /// The token to edit or delete it.
    public var editToken: String
}

/// Why a pin left the map.
public enum PinRemoval: Sendable, Equatable {
    /// Its owner deleted it.
    case deleted
    /// An edit took it out of the subscription.
    case moved
    /// Down votes reached the threshold.
    case flagged
    /// Its time passed.
    case expired
    /// It was not in the subscribe reply after a reconnect (or a new area): gone while away.
    case reconciled
    /// A reason this client does not know.
    case other(String)

    init(_ s: String) {
        switch s {
        case "deleted": self = .deleted
        case "moved": self = .moved
        case "flagged": self = .flagged
        case "expired": self = .expired
        default: self = .other(s)
        }
    }
}

/// One cell of a clusters view.
public struct ClusterCell: Sendable, Codable, Equatable {
    /// The geohash.
    public var cell: String
    /// The number of pins (0: remove its bubble).
    public var count: Int
    /// The split by category (only categories with pins).
    public var byCategory: [String: Int]?
    /// The mean latitude of its pins.
    public var lat: Double?
    /// The mean longitude of its pins.
    public var lon: Double?
}

/// A zoomed-out map's counts per geohash cell (`subscribe` with `"view":"clusters"`).
public struct ClustersView: Sendable, Codable, Equatable {
    /// The geohash precision of the cells.
    public var precision: Int
    /// The cells that hold pins.
    public var clusters: [ClusterCell]
    /// Whether the reply held only the cells that fit.
    public var truncated: Bool?
}

// MARK: panic streams

/// A stream's status.
public enum PanicStatus: String, Sendable, Codable, Equatable {
    /// Danger.
    case red
    /// Uneasy: keep an eye on me.
    case amber
}

/// A position to send (`panic.start`, `panic.update`).
public struct Position: Sendable, Equatable {
    /// Latitude.
    public var lat: Double
    /// Longitude.
    public var lon: Double
    /// Accuracy in metres (0–100,000).
    public var accuracyM: Double?
    /// Heading in degrees (0–360).
    public var heading: Double?
    /// Speed in metres a second (0–1,000).
    public var speedMps: Double?

    /// A position.
    public init(lat: Double, lon: Double, accuracyM: Double? = nil, heading: Double? = nil, speedMps: Double? = nil) {
        self.lat = lat; self.lon = lon; self.accuracyM = accuracyM; self.heading = heading; self.speedMps = speedMps
    }

    var fields: JSONObject {
        var o: JSONObject = ["lat": .number(lat), "lon": .number(lon)]
        if let accuracyM { o["accuracy_m"] = .number(Swift.min(100_000, accuracyM)) }
        if let heading, heading >= 0, heading <= 360 { o["heading"] = .number(heading) }
        if let speedMps, speedMps >= 0, speedMps <= 1000 { o["speed_mps"] = .number(speedMps) }
        return o
    }
}

/// A point of a stream's trail.
public struct TrailPoint: Sendable, Codable, Equatable {
    /// Its event's seq.
    public var seq: Int
    /// Latitude.
    public var lat: Double
    /// Longitude.
    public var lon: Double
    /// Accuracy in metres.
    public var accuracyM: Double?
    /// When (ms).
    public var at: Int64
}

/// The last known position of a stream.
public struct LastPosition: Sendable, Codable, Equatable {
    /// Latitude.
    public var lat: Double
    /// Longitude.
    public var lon: Double
    /// Accuracy in metres.
    public var accuracyM: Double?
    /// Heading in degrees.
    public var heading: Double?
    /// Speed in metres a second.
    public var speedMps: Double?
    /// When (ms).
    public var at: Int64
}

/// How a stream ended.
public struct PanicEnd: Sendable, Codable, Equatable {
    /// `safe`, `cancelled` or `abandoned`.
    public var reason: String
    /// When (ms).
    public var at: Int64
}

/// A safety timer's deadline.
public struct PanicTimer: Sendable, Codable, Equatable {
    /// The deadline (ms).
    public var dueAt: Int64
}

/// The server raised the alarm for a missed check-in.
public struct Escalation: Sendable, Codable, Equatable {
    /// `missed_check_in`.
    public var reason: String
    /// The deadline (or the stream's last event, if that came later), ms.
    public var at: Int64
    /// When the alarm went out (ms; `sentAt − at` is how late).
    public var sentAt: Int64
}

/// A stream's state, as `panic.watch` and `panic.resume` give it.
public struct PanicState: Sendable, Codable, Equatable {
    /// The stream id.
    public var stream: String
    /// Its status.
    public var status: PanicStatus
    /// Started (ms).
    public var startedAt: Int64
    /// Last changed (ms).
    public var updatedAt: Int64
    /// The seq of its last event.
    public var seq: Int
    /// The owner's note.
    public var note: String?
    /// The last position.
    public var last: LastPosition?
    /// The location events still kept, oldest first.
    public var trail: [TrailPoint]
    /// Whether the trail was cut to the newest points that fit.
    public var trailTruncated: Bool?
    /// How it ended, once it did.
    public var ended: PanicEnd?
    /// The safety timer, while one is set.
    public var timer: PanicTimer?
    /// The missed check-in's alarm, once raised.
    public var escalated: Escalation?
    /// The check-in circle the stream belongs to.
    public var circle: String?
    /// True for an end-to-end encrypted stream: `last` and `trail` hold only the points that
    /// opened with the watch's key (the others came as ``WatchEvent/cannotDecrypt(_:)``).
    public var e2e: Bool?
    /// An e2e stream's current key id.
    public var kid: String?
}

/// `panic.location`.
public struct PanicLocation: Sendable, Codable, Equatable {
    /// The stream.
    public var stream: String
    /// The event's seq.
    public var seq: Int
    /// Latitude.
    public var lat: Double
    /// Longitude.
    public var lon: Double
    /// Accuracy in metres.
    public var accuracyM: Double?
    /// Heading.
    public var heading: Double?
    /// Speed.
    public var speedMps: Double?
    /// When (ms).
    public var at: Int64
}

/// `panic.status`: a new status, or the missed check-in (`reason` `missed_check_in`).
public struct PanicStatusChange: Sendable, Codable, Equatable {
    /// The stream.
    public var stream: String
    /// The event's seq.
    public var seq: Int
    /// The new status.
    public var status: PanicStatus
    /// `missed_check_in` when the server raised the alarm.
    public var reason: String?
    /// The missed deadline.
    public var dueAt: Int64?
    /// The last known position, with a missed check-in.
    public var last: LastPosition?
    /// When (ms; the deadline for a missed check-in).
    public var at: Int64
    /// When the alarm went out.
    public var sentAt: Int64?
}

/// `panic.timer`: the safety timer set, moved or cancelled (`dueAt` nil).
public struct PanicTimerChange: Sendable, Codable, Equatable {
    /// The stream.
    public var stream: String
    /// The event's seq.
    public var seq: Int
    /// The deadline, or `nil` once cancelled.
    public var dueAt: Int64?
    /// When (ms).
    public var at: Int64
}

/// `panic.ended`.
public struct PanicEnded: Sendable, Codable, Equatable {
    /// The stream.
    public var stream: String
    /// The event's seq.
    public var seq: Int
    /// `safe`, `cancelled` or `abandoned`.
    public var reason: String
    /// When (ms).
    public var at: Int64
}

/// `panic.stale`: no location for a while (the phone may be off).
public struct PanicStale: Sendable, Codable, Equatable {
    /// The stream.
    public var stream: String
    /// When the last location came (ms).
    public var lastLocationAt: Int64?
    /// When (ms).
    public var at: Int64
}

// MARK: check-in circles

/// A member of a circle.
public struct CircleMember: Sendable, Codable, Equatable {
    /// Its number.
    public var member: Int
    /// Its label.
    public var label: String?
    /// When it was invited (ms).
    public var addedAt: Int64?
}

/// A member's token, shown once (`checkin.create`, `checkin.invite`).
public struct MemberInvite: Sendable, Equatable {
    /// Its number.
    public var member: Int
    /// Its label.
    public var label: String?
    /// The member token (the invite link is made of it).
    public var token: String
}

/// "Are you safe?": a pending request.
public struct CheckinRequest: Sendable, Codable, Equatable {
    /// Who asked.
    public var member: Int
    /// Their label.
    public var label: String?
    /// When (ms).
    public var at: Int64
}

/// The owner's answer.
public struct CheckinAnswer: Sendable, Codable, Equatable {
    /// `safe`.
    public var status: String
    /// When (ms).
    public var at: Int64
    /// The owner's note.
    public var note: String?
    /// The requests it answered.
    public var answered: [CheckinRequest]?
}

/// Home safe, until a time.
public struct HomeSafe: Sendable, Codable, Equatable {
    /// Set at (ms).
    public var at: Int64
    /// Until (ms).
    public var until: Int64
}

/// An active panic stream of a circle.
public struct CirclePanic: Sendable, Codable, Equatable {
    /// The stream.
    public var stream: String
    /// Its status.
    public var status: PanicStatus
    /// Started (ms).
    public var startedAt: Int64
    /// When its safety timer escalated it.
    public var escalatedAt: Int64?
}

/// Someone has seen a notice (`checkin.acked`, and the state's `acks`).
public struct NoticeAck: Sendable, Codable, Equatable {
    /// The notice id.
    public var notice: String
    /// Its kind (`panic_started`, …).
    public var kind: String
    /// `member` or `owner`.
    public var by: String
    /// The member, when a member acknowledged.
    public var member: Int?
    /// Its label.
    public var label: String?
    /// When (ms).
    public var at: Int64
}

/// A circle's state, as `checkin.open` and `checkin.join` give it.
public struct CircleState: Sendable, Codable, Equatable {
    /// The circle id.
    public var circle: String
    /// Created (ms).
    public var createdAt: Int64?
    /// Last kept alive (ms).
    public var activeAt: Int64?
    /// Removed if idle until then (ms).
    public var expiresAt: Int64?
    /// `owner` or `member`.
    public var role: String
    /// The members (the owner's view only).
    public var members: [CircleMember]?
    /// This member (a member's view only).
    public var you: CircleMember?
    /// Pending requests, oldest first.
    public var requests: [CheckinRequest]
    /// The last answer.
    public var answer: CheckinAnswer?
    /// Home safe, while in force.
    public var home: HomeSafe?
    /// The circle's active panic streams, oldest first.
    public var panics: [CirclePanic]
    /// Acknowledgements of notices still within their time to live.
    public var acks: [NoticeAck]?

    enum CodingKeys: String, CodingKey {
        case circle, createdAt, activeAt, expiresAt, role, members, you, requests, answer, home, panics, acks
    }

    /// Reads a state (absent lists are empty).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        circle = try c.decode(String.self, forKey: .circle)
        createdAt = try c.decodeIfPresent(Int64.self, forKey: .createdAt)
        activeAt = try c.decodeIfPresent(Int64.self, forKey: .activeAt)
        expiresAt = try c.decodeIfPresent(Int64.self, forKey: .expiresAt)
        role = try c.decode(String.self, forKey: .role)
        members = try c.decodeIfPresent([CircleMember].self, forKey: .members)
        you = try c.decodeIfPresent(CircleMember.self, forKey: .you)
        requests = try c.decodeIfPresent([CheckinRequest].self, forKey: .requests) ?? []
        answer = try c.decodeIfPresent(CheckinAnswer.self, forKey: .answer)
        home = try c.decodeIfPresent(HomeSafe.self, forKey: .home)
        panics = try c.decodeIfPresent([CirclePanic].self, forKey: .panics) ?? []
        acks = try c.decodeIfPresent([NoticeAck].self, forKey: .acks)
    }
}

/// What changed in a circle while this client was not listening: the difference between the
/// state it had and the state of the `checkin.open`/`checkin.join` after a reconnect.
public struct CircleMissed: Sendable, Equatable {
    /// Requests made meanwhile (still pending).
    public var newRequests: [CheckinRequest] = []
    /// The owner's answer, when a new one came.
    public var newAnswer: CheckinAnswer?
    /// Panic streams that started meanwhile.
    public var panicsStarted: [CirclePanic] = []
    /// Panic streams that escalated meanwhile.
    public var panicsEscalated: [CirclePanic] = []
    /// Streams that ended meanwhile (ids).
    public var panicsEnded: [String] = []
    /// Acknowledgements made meanwhile.
    public var newAcks: [NoticeAck] = []
    /// Home safe as it is now, when it changed.
    public var homeChanged: Bool = false

    /// Whether nothing was missed.
    public var isEmpty: Bool {
        newRequests.isEmpty && newAnswer == nil && panicsStarted.isEmpty && panicsEscalated.isEmpty
            && panicsEnded.isEmpty && newAcks.isEmpty && !homeChanged
    }

    init(old: CircleState, new: CircleState) {
        newRequests = new.requests.filter { r in !old.requests.contains(r) }
        if new.answer != old.answer { newAnswer = new.answer }
        let oldPanics = Dictionary(old.panics.map { ($0.stream, $0) }, uniquingKeysWith: { a, _ in a })
        let newIds = Set(new.panics.map(\.stream))
        panicsStarted = new.panics.filter { oldPanics[$0.stream] == nil }
        panicsEscalated = new.panics.filter { p in
            if let o = oldPanics[p.stream] { return o.escalatedAt == nil && p.escalatedAt != nil }
            return false
        }
        panicsEnded = old.panics.map(\.stream).filter { !newIds.contains($0) }
        newAcks = (new.acks ?? []).filter { a in !(old.acks ?? []).contains(a) }
        homeChanged = old.home != new.home
    }
}

/// `checkin.home`: home safe set, cleared, or lapsed.
public struct HomeChange: Sendable, Codable, Equatable {
    /// `set`, `cleared` or `lapsed`.
    public var state: String
    /// Until (ms).
    public var until: Int64?
    /// When (ms).
    public var at: Int64?
}

/// `checkin.panic`: a panic stream of the circle started, escalated or ended.
public struct CirclePanicNews: Sendable, Codable, Equatable {
    /// The stream.
    public var stream: String
    /// `started`, `escalated` or `ended`.
    public var event: String
    /// The stream's status after the event.
    public var status: PanicStatus?
    /// How it ended (`ended` only).
    public var reason: String?
    /// When (ms).
    public var at: Int64
}

/// `checkin.closed`.
public struct CircleClosed: Sendable, Codable, Equatable {
    /// `closed` or `idle`.
    public var reason: String
    /// When (ms).
    public var at: Int64?
}

/// A credential for a circle: its owner token or a member token.
public enum CircleCredential: Sendable, Equatable {
    /// The owner's token.
    case owner(String)
    /// A member's token.
    case member(String)

    var fields: JSONObject {
        switch self {
        case .owner(let t): return ["owner_token": .string(t)]
        case .member(let t): return ["member_token": .string(t)]
        }
    }
}

/// A notice as the app receives it outside the WebSocket: the payload a Web Push service worker
/// decrypts, or the body the operator's relay gets and forwards to the app (with `handle`,
/// `urgent` and `expiresAt`). Acknowledge it with ``VigilClient/ack(circle:credential:notice:)``.
///
/// Read one with `JSONDecoder` (its `convertFromSnakeCase` strategy) or ``Notice/init(json:)``.
public struct Notice: Sendable, Codable, Equatable {
    /// The payload's version (1).
    public var v: Int
    /// The notice id (40 characters of base64url; the same on every attempt).
    public var notice: String
    /// `panic_started`, `panic_escalated`, `panic_ended`, `checkin_requested` or `checkin_answered`.
    public var kind: String
    /// The circle.
    public var circle: String
    /// The stream, for the panic kinds.
    public var stream: String?
    /// The stream's status, for the panic kinds.
    public var status: PanicStatus?
    /// When (ms).
    public var at: Int64
    /// The page to open (Web Push only).
    public var url: String?
    /// The handle the app registered (relay only).
    public var handle: String?
    /// Whether it is about danger (relay only).
    public var urgent: Bool?
    /// When it stops mattering (relay only, ms).
    public var expiresAt: Int64?

    /// Reads a notice from its JSON text; `nil` when it is not one.
    public init?(json text: String) {
        guard let value = JSONValue.parse(text), let n = try? value.decode(Notice.self) else { return nil }
        self = n
    }
}
