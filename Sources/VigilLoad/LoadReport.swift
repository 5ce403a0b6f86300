/// The result of one load run: what was asked, what happened, how fast, whether it was right,
/// and what it cost the server. Rendered as a table for people (`renderTable`) and as JSON for
/// the benchmark records (`renderJSON`); both are plain functions of this value.
public struct LoadReport: Sendable {
    public var scenario: String
    /// The run's settings in the order the scenario lists them (seed included, so it repeats).
    public var parameters: [(key: String, value: String)]
    /// Wall time of the measured phase (connect and drain excluded), seconds.
    public var durationSeconds: Double
    public var connectionsOpened: UInt64
    public var connectionsFailed: UInt64
    /// Messages the clients sent.
    public var sent: UInt64
    /// Events the clients received.
    public var delivered: UInt64
    /// Latency series by name, in display order ("map event", "panic location").
    public var latencies: [(name: String, summary: LatencySummary)]
    public var checks: [CheckSummary]
    /// The server process sampled before and after the measured phase.
    public var serverBefore: ProcSample?
    public var serverAfter: ProcSample?
    /// The load client's own CPU seconds during the measured phase.
    public var clientCPUSeconds: Double?
    /// Derived figures a scenario adds (e.g. "server RSS per connection KiB"), in order.
    public var figures: [(key: String, value: Double)] = []
    /// The nodes the run was spread over (vigil-load's `--url`s, in order), with what each served.
    public var nodes: [NodeFigures] = []

    /// One node of the run: its URL, the connections opened to it (reconnections included) and
    /// the events delivered by it.
    public struct NodeFigures: Equatable, Sendable {
        public var url: String
        public var connections: UInt64
        public var delivered: UInt64

        public init(url: String, connections: UInt64, delivered: UInt64) {
            self.url = url
            self.connections = connections
            self.delivered = delivered
        }
    }

    public init(scenario: String, parameters: [(key: String, value: String)] = [], durationSeconds: Double,
                connectionsOpened: UInt64 = 0, connectionsFailed: UInt64 = 0, sent: UInt64 = 0, delivered: UInt64 = 0,
                latencies: [(name: String, summary: LatencySummary)] = [], checks: [CheckSummary] = [],
                serverBefore: ProcSample? = nil, serverAfter: ProcSample? = nil, clientCPUSeconds: Double? = nil) {
        self.scenario = scenario
        self.parameters = parameters
        self.durationSeconds = durationSeconds
        self.connectionsOpened = connectionsOpened
        self.connectionsFailed = connectionsFailed
        self.sent = sent
        self.delivered = delivered
        self.latencies = latencies
        self.checks = checks
        self.serverBefore = serverBefore
        self.serverAfter = serverAfter
        self.clientCPUSeconds = clientCPUSeconds
    }

    public var sentPerSecond: Double { perSecond(sent) }
    public var deliveredPerSecond: Double { perSecond(delivered) }
    public func deliveredPerSecond(_ node: NodeFigures) -> Double { perSecond(node.delivered) }

    /// Server CPU seconds spent during the run (after minus before).
    public var serverCPUSeconds: Double? {
        guard let before = serverBefore, let after = serverAfter else { return nil }
        return after.cpuSeconds - before.cpuSeconds
    }

    /// Server CPU as a percentage of one core over the run (200 means two cores busy).
    public var serverCPUPercent: Double? {
        serverCPUSeconds.flatMap(percentOfOneCore)
    }

    public var clientCPUPercent: Double? {
        clientCPUSeconds.flatMap(percentOfOneCore)
    }

    /// Errors over every checker: a run with any is a failed run.
    public var errorCount: UInt64 {
        checks.reduce(0) { $0 + $1.errors.count }
    }

    private func perSecond(_ count: UInt64) -> Double {
        durationSeconds > 0 ? Double(count) / durationSeconds : 0
    }

    private func percentOfOneCore(_ seconds: Double) -> Double? {
        durationSeconds > 0 ? seconds / durationSeconds * 100 : nil
    }
}
