import VigilGeo

/// A live map pin. Everything a client sees, plus what only the server keeps: the digest of the
/// edit token and the votes by voter. Nothing identifies the person who created it.
public struct Pin: Equatable, Sendable {
    public let id: PinID
    // Every field the public JSON object shows drops `json` when it changes (the `didSet`s).
    public var point: GeoPoint { didSet { json = nil } }
    public var title: String { didSet { json = nil } }
    public var description: String { didSet { json = nil } }
    public var category: String { didSet { json = nil } }
    public var createdAt: Int64 { didSet { json = nil } }
    public var updatedAt: Int64 { didSet { json = nil } }
    public var expiresAt: Int64 { didSet { json = nil } }
    public var up: Int { didSet { json = nil } }
    public var down: Int { didSet { json = nil } }
    /// The pin's reach in metres (Radar): when set, only a subscriber whose viewer position is
    /// within this great-circle distance of the pin sees it (`PinReach`); nil, the usual rule.
    public var rangeMeters: Int? { didSet { json = nil } }
    /// SHA-256 of the edit token; the token itself is never stored.
    public let editDigest: TokenDigest
    /// Vote per voter (+1 or -1). A voter is an opaque number the server gives each source of
    /// votes (one per address while the address is known: see `AddressBudgets.voter`), never the
    /// address or a hash of it; `up` and `down` count these values. At most
    /// `PinSettings.maxVotersPerPin` voters, except on a pin restored with more.
    public var votes: [UInt64: Int8]
    /// The pin's geohash cell at full precision; covers and channels use its ancestors.
    public var cell: GeohashCell
    /// Creation order in this store (ties of `createdAt` within a millisecond sort by it).
    public var sequence: UInt64 = 0
    /// The public JSON object (`ServerMessages.pin`), once made: made when the pin is created,
    /// edited or voted on (its reply needs it anyway) or first shown after a restart, and kept in
    /// the store, so that subscribe replies and events splice these bytes instead of encoding the
    /// pin again (a panning map's reply holds hundreds of pins). Changing any field it shows sets
    /// it back to nil, so bytes that are here always say what the fields say. Not state: a
    /// snapshot does not keep it, and equality ignores it.
    public internal(set) var json: [UInt8]?

    public init(id: PinID, point: GeoPoint, title: String, description: String, category: String,
                createdAt: Int64, expiresAt: Int64, editDigest: TokenDigest) {
        self.id = id
        self.point = point
        self.title = title
        self.description = description
        self.category = category
        self.createdAt = createdAt
        self.updatedAt = createdAt
        self.expiresAt = expiresAt
        self.up = 0
        self.down = 0
        self.editDigest = editDigest
        self.votes = [:]
        self.cell = Geohash.cell(point, precision: Geohash.maxPrecision)
    }

    /// Sets `voter`'s vote, keeping `up` and `down` equal to the counts of the two values.
    /// False when the voter had that vote already (nothing changed).
    @discardableResult
    public mutating func setVote(_ voter: UInt64, _ value: Int8) -> Bool {
        precondition(value == 1 || value == -1, "a vote is +1 or -1")
        let previous = votes.updateValue(value, forKey: voter)
        if previous == value { return false }
        if previous == 1 { up -= 1 } else if previous == -1 { down -= 1 }
        if value == 1 { up += 1 } else { down += 1 }
        return true
    }

    /// Puts `voter`'s vote back to `value` (nil: no vote), keeping `up` and `down` equal to the
    /// counts: how a vote the server could not record is taken back.
    public mutating func restoreVote(_ voter: UInt64, to value: Int8?) {
        if let value {
            setVote(voter, value)
        } else if let previous = votes.removeValue(forKey: voter) {
            if previous == 1 { up -= 1 } else { down -= 1 }
        }
    }

    public static func == (a: Pin, b: Pin) -> Bool {
        a.id == b.id && a.point == b.point && a.title == b.title && a.description == b.description
            && a.category == b.category && a.createdAt == b.createdAt && a.updatedAt == b.updatedAt
            && a.expiresAt == b.expiresAt && a.up == b.up && a.down == b.down
            && a.editDigest == b.editDigest && a.votes == b.votes && a.rangeMeters == b.rangeMeters
    }
}

/// The fields of a new pin, validated (title trimmed, category known, ttl in range).
public struct PinDraft: Equatable, Sendable {
    public var point: GeoPoint
    public var title: String
    public var description: String
    public var category: String
    public var ttlSeconds: Int
    /// `range_m`: nil for a pin everyone in the area sees.
    public var rangeMeters: Int?

    public init(point: GeoPoint, title: String, description: String, category: String, ttlSeconds: Int, rangeMeters: Int? = nil) {
        self.point = point
        self.title = title
        self.description = description
        self.category = category
        self.ttlSeconds = ttlSeconds
        self.rangeMeters = rangeMeters
    }
}

/// A validated edit: each field nil when unchanged. `lat`/`lon` may come alone (the other keeps its value).
public struct PinChanges: Equatable, Sendable {
    public var lat: Double?
    public var lon: Double?
    public var title: String?
    public var description: String?
    public var category: String?
    public var ttlSeconds: Int?
    /// `range_m`: `.set(m)` gives the pin a reach (or a new one), `.remove` (`"range_m": null`) takes it away.
    public var range: PinRangeChange?

    public init(lat: Double? = nil, lon: Double? = nil, title: String? = nil, description: String? = nil, category: String? = nil,
                ttlSeconds: Int? = nil, range: PinRangeChange? = nil) {
        self.lat = lat
        self.lon = lon
        self.title = title
        self.description = description
        self.category = category
        self.ttlSeconds = ttlSeconds
        self.range = range
    }
}
