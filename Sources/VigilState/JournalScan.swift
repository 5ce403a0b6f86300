/// What `JournalCodec.scan` found.
public struct JournalScan: Sendable {
    /// The good records, in order.
    public var records: [JournalRecord]
    /// Offset just past the last good record.
    public var validLength: Int
    /// Why the scan stopped before the end; nil when every byte was a good record.
    public var stop: JournalStop?

    /// Whether the scan stopped before the end of the bytes.
    public var torn: Bool { stop != nil }
}

/// Why a journal scan stopped early.
public enum JournalStop: Equatable, Sendable, CustomStringConvertible {
    /// The bytes end inside a record's frame or payload.
    case incomplete(offset: Int)
    /// A length of 0 or beyond `maxPayloadBytes` (often zeros a crash left past the end of data).
    case badLength(offset: Int, length: UInt32)
    /// The payload does not match its checksum.
    case checksumMismatch(offset: Int)
    /// The checksum matches but the payload is not a record this build reads: not a torn write,
    /// so never truncated away (it may come from a newer Vigil).
    case undecodable(offset: Int, reason: String)

    /// Damage a crash during an append explains: safe to cut off when it is at the journal's tail.
    public var isTornWrite: Bool {
        if case .undecodable = self { return false }
        return true
    }

    public var offset: Int {
        switch self {
        case .incomplete(let o), .badLength(let o, _), .checksumMismatch(let o), .undecodable(let o, _): return o
        }
    }

    public var description: String {
        switch self {
        case .incomplete(let o): return "record at byte \(o) is cut short"
        case .badLength(let o, let n): return "record at byte \(o) has impossible length \(n)"
        case .checksumMismatch(let o): return "record at byte \(o) fails its checksum"
        case .undecodable(let o, let reason): return "record at byte \(o) has a valid checksum but cannot be read: \(reason)"
        }
    }
}
