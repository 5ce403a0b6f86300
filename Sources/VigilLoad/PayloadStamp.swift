/// The stamp a publisher writes into a pin's description, `m<moves> v<votes> t<sendNs>`, so a
/// subscriber can tell from an event alone which version of the pin it shows and when the change
/// was sent.
///
/// - `moves`: how many `pin.update` ops the pin has had, this one included. Every update
///   rewrites the stamp (position changed or not), so it counts updates, not distances.
/// - `votes`: up + down at the time the op was sent. A vote cannot change the description, so an
///   event whose up + down exceeds `votes` was caused by a vote.
/// - `sendNs`: the client's monotonic clock when the op was sent (for latency). CLOCK_MONOTONIC
///   is one clock for the whole machine, so the figure holds whichever node the op went to and
///   whichever node delivered the event, as long as client and nodes share the machine.
/// - `node` (optional, ` n<index>` after the time): which of vigil-load's `--url`s the op was sent
///   to, so a subscriber can file the latency under the pair of nodes it crossed.
///
/// With one op in flight per pin and every vote adding one to up + down, each op adds exactly one
/// to moves + (up + down): that sum is the pin's version index (`versionIndex`), 0 at creation.
/// Text may follow the stamp (padding to a chosen payload size) after a space.
public struct PayloadStamp: Equatable, Sendable {
    public var moves: Int
    public var votes: Int
    public var sendNs: UInt64
    public var node: Int?

    public init(moves: Int, votes: Int, sendNs: UInt64, node: Int? = nil) {
        self.moves = moves
        self.votes = votes
        self.sendNs = sendNs
        self.node = node
    }

    /// The description text: `m3 v2 t1234567`, or `m3 v2 t1234567 n1` with a node.
    public static func format(moves: Int, votes: Int, sendNs: UInt64, node: Int? = nil) -> String {
        node.map { "m\(moves) v\(votes) t\(sendNs) n\($0)" } ?? "m\(moves) v\(votes) t\(sendNs)"
    }

    public var text: String { Self.format(moves: moves, votes: votes, sendNs: sendNs, node: node) }

    /// The version index of a pin state showing this stamp and `upPlusDown` votes.
    public static func versionIndex(moves: Int, upPlusDown: Int) -> Int {
        moves + upPlusDown
    }

    /// Finds `"description":"m` in raw JSON (an event, a reply) and parses the stamp after it.
    /// Nil when there is none or it is malformed.
    public static func parse<C: Collection>(_ utf8: C) -> PayloadStamp? where C.Element == UInt8 {
        RawScan.withBytes(utf8) { scan(in: $0, from: 0, limit: $0.count) }
    }

    /// The same over the connection layer's raw message buffer.
    public static func parse(_ raw: UnsafeRawBufferPointer) -> PayloadStamp? {
        RawScan.withBytes(raw) { scan(in: $0, from: 0, limit: $0.count) }
    }

    /// Parses a bare description (already decoded from JSON) that starts with the stamp.
    public init?(description: String) {
        var text = description
        guard let stamp = text.withUTF8({ Self.stampBody(in: $0, at: 0) }) else { return nil }
        self = stamp
    }

    /// The stamp of the first description in `bytes[from..<limit]`.
    static func scan(in bytes: UnsafeBufferPointer<UInt8>, from: Int, limit: Int) -> PayloadStamp? {
        guard let start = RawScan.indexAfter("\"description\":\"", in: bytes, from: from, limit: limit) else { return nil }
        return stampBody(in: bytes, at: start)
    }

    /// `m<digits> v<digits> t<digits>` at `index`, optionally ` n<digits>` (up to 65535), followed
    /// by the end, a quote or a space.
    static func stampBody(in bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> PayloadStamp? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "m"),
              let moves = RawScan.unsigned(in: bytes, at: index + 1),
              moves.end + 1 < bytes.count, bytes[moves.end] == UInt8(ascii: " "), bytes[moves.end + 1] == UInt8(ascii: "v"),
              let votes = RawScan.unsigned(in: bytes, at: moves.end + 2),
              votes.end + 1 < bytes.count, bytes[votes.end] == UInt8(ascii: " "), bytes[votes.end + 1] == UInt8(ascii: "t"),
              let send = RawScan.unsigned(in: bytes, at: votes.end + 2),
              moves.value <= UInt64(Int32.max), votes.value <= UInt64(Int32.max)
        else { return nil }
        var end = send.end
        var node: Int?
        if end + 1 < bytes.count, bytes[end] == UInt8(ascii: " "), bytes[end + 1] == UInt8(ascii: "n"),
           let n = RawScan.unsigned(in: bytes, at: end + 2), n.value <= UInt64(UInt16.max) {
            node = Int(n.value)
            end = n.end
        }
        if end < bytes.count {
            let next = bytes[end]
            guard next == UInt8(ascii: "\"") || next == UInt8(ascii: " ") else { return nil }
        }
        return PayloadStamp(moves: Int(moves.value), votes: Int(votes.value), sendNs: send.value, node: node)
    }
}
