/// What became of the clients that stopped reading (`map --stalled`, `panic --stalled-watchers`):
/// how many the server closed and with which close code (`tcp`: the connection ended without a
/// close frame reaching the client), how many were still open when they read again at the end,
/// and what they read then. Stalled clients are outside every latency and exactness figure; this
/// is their only trace in the report.
public struct StalledTally: Sendable {
    /// Clients that stopped reading (after their subscribe or watch was accepted).
    public private(set) var stalled = 0
    /// Server closes by close code, counted once per client.
    public private(set) var closes = CodeCounts()
    /// Clients still open when they read again.
    public private(set) var resumed = 0
    /// Messages the clients received after they read again (their backlog, then live traffic).
    public private(set) var messagesAfterResume: UInt64 = 0
    public private(set) var errors: CheckErrors

    public init(maxErrors: Int = 10) {
        errors = CheckErrors(limit: maxErrors)
    }

    public mutating func stoppedReading() { stalled += 1 }
    public mutating func closedByServer(code: UInt16?) { closes.add(code.map { String($0) } ?? "tcp") }
    public mutating func resumedReading() { resumed += 1 }
    public mutating func messageAfterResume() { messagesAfterResume += 1 }
    public mutating func error(_ text: @autoclosure () -> String) { errors.record(text()) }

    public var closedByServer: UInt64 { closes.total }

    public func summary(name: String, planned: Int) -> CheckSummary {
        CheckSummary(name: name, checked: planned, errors: errors,
                     counters: [("stalled", UInt64(stalled)), ("closed by server", closedByServer),
                                ("open at resume", UInt64(resumed)), ("messages after resume", messagesAfterResume)]
                        + closes.counters(prefix: "closed "))
    }
}
