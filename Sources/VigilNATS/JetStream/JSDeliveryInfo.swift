/// Where a pushed JetStream message sits, read from its reply subject:
/// `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<timestamp>.<pending>`
/// or the newer form with a domain and an account hash in front (and a random token after).
public struct JSDeliveryInfo: Equatable, Sendable {
    public var stream: String
    public var consumer: String
    public var deliveries: UInt64
    public var streamSequence: UInt64
    public var consumerSequence: UInt64
    /// Nanoseconds since 1970 when the stream stored it.
    public var timestampNs: UInt64
    public var pending: UInt64

    public init?(replySubject: String) {
        let tokens = replySubject.split(separator: ".", omittingEmptySubsequences: false)
        guard tokens.count >= 9, tokens[0] == "$JS", tokens[1] == "ACK" else { return nil }
        let base: Int
        switch tokens.count {
        case 9: base = 2
        case 11, 12: base = 4  // $JS.ACK.<domain>.<account hash>.<stream>...
        default: return nil
        }
        func number(_ i: Int) -> UInt64? { NATSParser.number(ArraySlice(tokens[base + i].utf8), maxDigits: 20) }
        guard let deliveries = number(2), let sseq = number(3), let cseq = number(4), let ts = number(5),
              let pending = number(6) else { return nil }
        stream = String(tokens[base])
        consumer = String(tokens[base + 1])
        self.deliveries = deliveries
        streamSequence = sseq
        consumerSequence = cseq
        timestampNs = ts
        self.pending = pending
    }
}
