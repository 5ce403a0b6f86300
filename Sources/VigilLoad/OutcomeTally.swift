/// Counts by a short label (an error code, a close code), in the order the labels first came.
///
/// The labels come from the server, so they are bounded like anything read off the network: a
/// label that is not a short snake_case or numeric word, or one past the first `limit` distinct
/// ones, is counted as `other`.
public struct CodeCounts: Equatable, Sendable {
    public let limit: Int
    public private(set) var labels: [String] = []
    public private(set) var counts: [UInt64] = []

    public init(limit: Int = 12) {
        self.limit = Swift.max(1, limit)
    }

    /// `raw` if it is a plausible code (1 to 32 of `a-z`, `0-9`, `_`), otherwise `other`.
    public static func label(_ raw: String) -> String {
        let bytes = raw.utf8
        guard (1...32).contains(bytes.count),
              bytes.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F }) else { return "other" }
        return raw
    }

    public mutating func add(_ raw: String, _ n: UInt64 = 1) {
        var label = Self.label(raw)
        if let i = labels.firstIndex(of: label) {
            counts[i] += n
            return
        }
        if labels.count >= limit - 1 && label != "other" { label = "other" }
        if let i = labels.firstIndex(of: label) {
            counts[i] += n
        } else {
            labels.append(label)
            counts.append(n)
        }
    }

    public subscript(_ label: String) -> UInt64 {
        labels.firstIndex(of: label).map { counts[$0] } ?? 0
    }

    public var total: UInt64 { counts.reduce(0, +) }

    /// `(prefix + label, count)` pairs in first-seen order, for a report's counters.
    public func counters(prefix: String) -> [(name: String, value: UInt64)] {
        zip(labels, counts).map { (name: prefix + $0.0, value: $0.1) }
    }
}

/// What became of the requests of one kind an abusive client sent (`panic.start`, `pin.vote`, ...):
/// answered `ok`, refused with an error code, or left unanswered because the server closed the
/// connection (by close code). Refusals are the expected outcome of abuse, not errors; what the
/// server must never do is leave a request without a reply on a connection it keeps open.
public struct OutcomeTally: Sendable {
    public let name: String
    public private(set) var sent: UInt64 = 0
    public private(set) var ok: UInt64 = 0
    public private(set) var refused = CodeCounts()
    /// Connections of this kind the server closed, by close code (`tcp` when it sent none).
    public private(set) var closes = CodeCounts()
    /// Requests outstanding when the server closed their connection.
    public private(set) var unanswered: UInt64 = 0
    /// Anything the contract does not allow (a reply to nothing, an unreadable message).
    public private(set) var errors: CheckErrors

    public init(name: String, maxErrors: Int = 10) {
        self.name = name
        errors = CheckErrors(limit: maxErrors)
    }

    public mutating func requestSent() { sent += 1 }
    public mutating func answeredOK() { ok += 1 }
    public mutating func refused(code: String) { refused.add(code) }

    /// The server closed a connection of this kind with `code` (nil: no close frame) while
    /// `outstanding` of its requests had no reply.
    public mutating func closedByServer(code: UInt16?, outstanding: Int) {
        closes.add(code.map { String($0) } ?? "tcp")
        unanswered += UInt64(Swift.max(0, outstanding))
    }

    public mutating func error(_ text: @autoclosure () -> String) {
        errors.record(text())
    }

    /// Requests that got a reply.
    public var answered: UInt64 { ok + refused.total }

    public func summary() -> CheckSummary {
        CheckSummary(name: "abuse \(name)", checked: Int(clamping: sent), errors: errors,
                     counters: [("sent", sent), ("ok", ok), ("refused", refused.total), ("unanswered", unanswered)]
                        + refused.counters(prefix: "refused ") + closes.counters(prefix: "closed "))
    }
}
