/// The errors a checker found: every one counted, the first `limit` kept as text.
///
/// A broken server can produce millions of identical errors; the report needs the count and a
/// few examples, not all the text. `record` takes an autoclosure so that the hot path builds no
/// string once the examples are full.
public struct CheckErrors: Equatable, Sendable {
    /// How many messages are kept.
    public let limit: Int
    /// Every error recorded, kept or not.
    public private(set) var count: UInt64 = 0
    /// The first `limit` messages, in the order they were recorded.
    public private(set) var first: [String] = []

    public init(limit: Int = 20) {
        self.limit = Swift.max(0, limit)
    }

    public var isEmpty: Bool { count == 0 }

    public mutating func record(_ message: @autoclosure () -> String) {
        count += 1
        if first.count < limit { first.append(message()) }
    }

    /// Adds `other`'s count and as many of its messages as there is room for.
    public mutating func merge(_ other: CheckErrors) {
        count += other.count
        for message in other.first where first.count < limit {
            first.append(message)
        }
    }
}

/// One checker's outcome as the report shows it: how many clients it checked, its errors, and a
/// few named counters in a fixed order (events, duplicates, lost, ...).
public struct CheckSummary: Sendable {
    public var name: String
    public var checked: Int
    public var errors: CheckErrors
    public var counters: [(name: String, value: UInt64)]

    public init(name: String, checked: Int, errors: CheckErrors, counters: [(name: String, value: UInt64)] = []) {
        self.name = name
        self.checked = checked
        self.errors = errors
        self.counters = counters
    }
}
