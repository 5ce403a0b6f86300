/// How urgent the person says things are: `red` (in danger now) or `amber` (uneasy, watch me).
public enum PanicStatus: String, Sendable {
    case red, amber
}

/// Why a stream ended: the person is safe, or the alarm was a mistake.
public enum PanicEndReason: String, Sendable {
    case safe, cancelled
}

/// One fix from the phone. Range checks (latitude, longitude, non-negative accuracy) happen at decode.
public struct PanicLocation: Equatable, Sendable {
    public var lat: Double
    public var lon: Double
    public var accuracyM: Double?
    public var heading: Double?
    public var speedMps: Double?

    public init(lat: Double, lon: Double, accuracyM: Double? = nil, heading: Double? = nil, speedMps: Double? = nil) {
        self.lat = lat
        self.lon = lon
        self.accuracyM = accuracyM
        self.heading = heading
        self.speedMps = speedMps
    }
}

/// What happened in a stream. Each kind takes the stream's next sequence number.
public enum PanicEventKind: Equatable, Sendable {
    case location(PanicLocation)
    case status(PanicStatus)
    case ended(PanicEndReason)
}

/// One event of a stream. `seq` is contiguous per stream, starting at 1 (the first location), so a
/// watcher that knows the last seq it saw can ask for exactly what it missed.
public struct PanicEvent: Equatable, Sendable {
    public var seq: UInt64
    /// Unix milliseconds, from the hub's clock when the event was applied.
    public var at: Int64
    public var kind: PanicEventKind

    public init(seq: UInt64, at: Int64, kind: PanicEventKind) {
        self.seq = seq
        self.at = at
        self.kind = kind
    }
}
