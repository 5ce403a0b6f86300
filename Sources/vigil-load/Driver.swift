import CLinux
import Glibc
import VigilLoad
import VigilLoop

/// Counters every scenario keeps; the driver turns them into the progress line and the report.
struct RunCounters {
    /// Requests sent by publishers/owners (pin operations, panic updates).
    var sent: UInt64 = 0
    /// Requests the server acknowledged with `ok`.
    var acked: UInt64 = 0
    /// Events received by subscribers/watchers.
    var delivered: UInt64 = 0
    /// `delivered`, by the node that delivered them (the connection's `node`).
    var deliveredByNode: [UInt64] = []
    /// Subscribes answered after a subscriber's first one (panning maps moving their viewport).
    var resubscribes: UInt64 = 0
    var connectFailures: UInt64 = 0
    var unexpectedCloses: UInt64 = 0
    /// Error replies, unexpected closes, failed connects and malformed messages (first ones kept).
    var problems = CheckErrors(limit: 20)

    var errors: UInt64 { problems.count }

    mutating func error(_ text: @autoclosure () -> String) {
        problems.record(text())
    }

    /// One event arrived on a connection to `node`.
    mutating func delivered(by node: Int) {
        delivered += 1
        if node >= deliveredByNode.count { deliveredByNode += Array(repeating: 0, count: node + 1 - deliveredByNode.count) }
        deliveredByNode[node] += 1
    }

    /// Adds another scenario's counts (`MixedScenario`).
    mutating func add(_ other: RunCounters) {
        sent += other.sent
        acked += other.acked
        delivered += other.delivered
        if other.deliveredByNode.count > deliveredByNode.count {
            deliveredByNode += Array(repeating: 0, count: other.deliveredByNode.count - deliveredByNode.count)
        }
        for (node, count) in other.deliveredByNode.enumerated() { deliveredByNode[node] += count }
        problems.merge(other.problems)
        connectFailures += other.connectFailures
        unexpectedCloses += other.unexpectedCloses
    }

    /// A stalled reader's connection ended. Closed by the server is what may happen to a client
    /// that stops reading: counted in `tally`, not an error. A connect that never opened is one.
    mutating func stalledClosed(_ connection: ClientConnection, failure: String?, label: String, tally: inout StalledTally) {
        guard let failure else { return }
        guard connection.everOpen else {
            connectFailures += 1
            return error("\(label): \(failure)")
        }
        tally.closedByServer(code: connection.serverCloseCode)
    }
}

/// One traffic pattern. All calls happen on the loop thread.
protocol Scenario: AnyObject {
    var name: String { get }
    var parameters: [(String, String)] { get }
    /// Connections the scenario wants open before measuring.
    var targetConnections: Int { get }
    var counters: RunCounters { get }
    /// Latency histograms by name (e.g. "panic location"), measured during the whole run.
    var latencies: [(String, LatencyStats)] { get }
    /// The p99 of the last second's events, for the progress line (then reset).
    func takeIntervalP99() -> UInt64?
    /// Opens the next connection of the ramp-up; false when there are none left to open.
    func openNext(pool: ClientPool) -> Bool
    /// Whether the scenario is fully set up (connections open, streams started, subscriptions made).
    var isReady: Bool { get }
    /// Called every tick while measuring: pace the traffic.
    func tick(nowNs: UInt64)
    /// Called every tick from the ramp-up to the end of the drain, before the stage's own work:
    /// requests a scenario retries later (a watch that reached a node before its stream did).
    func housekeeping(nowNs: UInt64)
    /// The measuring window is over: stop generating traffic (and send what ends it, e.g. panic.end).
    func stopSending(nowNs: UInt64)
    /// Everything sent has been answered and every expected event delivered.
    var isDrained: Bool { get }
    /// Checks correctness after the drain; returns (checked things, human errors).
    func verify() -> [CheckSummary]
    /// Closes every connection (closing handshake).
    func closeAll()
    /// Figures of the scenario's own for the report (e.g. "cluster messages/s").
    var figures: [(String, Double)] { get }
}

extension Scenario {
    var figures: [(String, Double)] { [] }
    func housekeeping(nowNs: UInt64) {}
}

/// Runs a scenario on the event loop: ramp-up, measure, drain, verify, close; samples the server's
/// /proc figures and the client's own CPU around the measuring window.
final class Driver {
    struct Options {
        var durationSeconds: Double
        var rampTimeoutSeconds: Double
        var drainTimeoutSeconds: Double = 15
        var connectRate: Int
        var maxConnecting: Int
        /// vigild's pid, or each node's: their /proc figures are summed.
        var serverPIDs: [Int32] = []
        /// The pacing tick (`--tick-ms`): scenarios send what fell due since the last one.
        var tickMs = 1
        var progress: Bool
        var progressNewlines = false
    }

    enum Stage: String { case rampUp = "ramp-up", measuring, draining, closing, done }

    let pool: ClientPool
    let scenario: Scenario
    let options: Options
    private(set) var stage = Stage.rampUp
    private var stageStartNs: UInt64 = 0
    private var runStartNs: UInt64 = 0
    private var measureStartNs: UInt64 = 0
    private var measureEndNs: UInt64 = 0
    private var lastProgressNs: UInt64 = 0
    private var lastDelivered: UInt64 = 0
    private var lastSent: UInt64 = 0
    private var rampCredit = 0.0
    private var lastTickNs: UInt64 = 0
    private var lastExpiryNs: UInt64 = 0
    private var interrupted = false
    private var rampComplete = false
    /// When the pool was last seen with a connection open or connecting (see `noneLeft`).
    private var lastPopulatedNs: UInt64 = 0
    private(set) var serverAtStart: ProcSample?
    private(set) var serverAtReady: ProcSample?
    private(set) var serverAtEnd: ProcSample?
    private(set) var clientCPUAtStart: Double = 0
    private(set) var clientCPUAtEnd: Double = 0
    private(set) var checks: [CheckSummary] = []
    /// Open connections when the measuring window closed.
    private(set) var connectionsAtEnd = 0
    private(set) var notes: [String] = []
    private var timer: PeriodicTimer?
    private var signals: SignalSource?

    init(pool: ClientPool, scenario: Scenario, options: Options) {
        self.pool = pool
        self.scenario = scenario
        self.options = options
    }

    var measuredSeconds: Double { Double(measureEndNs &- measureStartNs) / 1e9 }

    func run() throws {
        serverAtStart = sampleServer()
        stageStartNs = Clock.nowNs()
        runStartNs = stageStartNs
        lastTickNs = stageStartNs
        lastProgressNs = stageStartNs
        signals = try SignalSource(signals: [SIGINT, SIGTERM], loop: pool.loop) { [unowned self] _ in
            self.interrupted = true
        }
        timer = try PeriodicTimer(intervalMs: options.tickMs, loop: pool.loop) { [unowned self] in self.onTick() }
        try pool.loop.run()
        if options.progress && !options.progressNewlines { writeStandardError("\n") }
    }

    private func enter(_ next: Stage, nowNs: UInt64) {
        stage = next
        stageStartNs = nowNs
    }

    private func elapsed(_ nowNs: UInt64) -> Double { Double(nowNs &- stageStartNs) / 1e9 }

    private func onTick() {
        let now = Clock.nowNs()
        let dt = Double(now &- lastTickNs) / 1e9
        lastTickNs = now
        if interrupted && stage.rawValue != Stage.closing.rawValue && stage != .done {
            notes.append("interrupted during \(stage.rawValue)")
            if stage == .measuring || stage == .rampUp { finishMeasuring(now) }
            beginClosing(now)
        }
        if stage != .closing && stage != .done && noneLeft(now) {
            // The server is gone (killed, or it closed everyone): nothing can become ready, be
            // delivered or drain, so waiting out the ramp, measuring and drain timeouts (up to
            // minutes) would only delay the failing report.
            notes.append("every connection closed during \(stage.rawValue): the run ends early")
            if stage == .measuring || stage == .rampUp { finishMeasuring(now) }
            beginVerify(now)
        }
        if stage == .rampUp || stage == .measuring || stage == .draining { scenario.housekeeping(nowNs: now) }
        switch stage {
        case .rampUp:
            ramp(dt: dt)
            if scenario.isReady {
                serverAtReady = sampleServer()
                clientCPUAtStart = Self.ownCPUSeconds()
                measureStartNs = now
                enter(.measuring, nowNs: now)
            } else if elapsed(now) > options.rampTimeoutSeconds {
                notes.append("ramp-up did not complete in \(options.rampTimeoutSeconds) s: measuring with \(pool.openCount) of \(scenario.targetConnections) connections")
                serverAtReady = sampleServer()
                clientCPUAtStart = Self.ownCPUSeconds()
                measureStartNs = now
                enter(.measuring, nowNs: now)
            }
            // A walk over every connection: four times a second is plenty for a 10 s timeout.
            if pool.attempts > 0 && now &- lastExpiryNs >= 250_000_000 {
                lastExpiryNs = now
                pool.expireHandshakes(nowNs: now, timeoutNs: 10_000_000_000)
            }
        case .measuring:
            scenario.tick(nowNs: now)
            if elapsed(now) >= options.durationSeconds {
                finishMeasuring(now)
                enter(.draining, nowNs: now)
            }
        case .draining:
            if scenario.isDrained {
                beginVerify(now)
            } else if elapsed(now) > options.drainTimeoutSeconds {
                notes.append("drain did not complete in \(options.drainTimeoutSeconds) s")
                beginVerify(now)
            }
        case .closing:
            if pool.openCount == 0 || elapsed(now) > 5 {
                for c in Array(pool.allConnections) { c.abort() }
                enter(.done, nowNs: now)
                pool.loop.stop()
            }
        case .done:
            break
        }
        if now &- lastProgressNs >= 1_000_000_000 {
            progressLine(now)
        }
    }

    /// True once the ramp has opened everything it meant to and the pool has been empty (nothing
    /// open, nothing connecting) for a second: a scenario that reconnects opens the next
    /// connection as the old one closes, so its pool is never empty that long.
    private func noneLeft(_ now: UInt64) -> Bool {
        if pool.openCount > 0 || !rampComplete || lastPopulatedNs == 0 {
            lastPopulatedNs = now
            return false
        }
        return now &- lastPopulatedNs >= 1_000_000_000
    }

    private func finishMeasuring(_ now: UInt64) {
        if measureStartNs == 0 { measureStartNs = now }
        measureEndNs = now
        connectionsAtEnd = pool.openedConnections
        serverAtEnd = sampleServer()
        clientCPUAtEnd = Self.ownCPUSeconds()
        scenario.stopSending(nowNs: now)
    }

    private func beginVerify(_ now: UInt64) {
        checks = scenario.verify()
        beginClosing(now)
    }

    private func beginClosing(_ now: UInt64) {
        guard stage != .closing && stage != .done else { return }
        scenario.closeAll()
        enter(.closing, nowNs: now)
    }

    /// Opens connections at `connectRate` per second with at most `maxConnecting` in handshake.
    private func ramp(dt: Double) {
        rampCredit = min(rampCredit + dt * Double(options.connectRate), Double(options.maxConnecting))
        let connecting = pool.openCount - pool.openedConnections
        var budget = min(Int(rampCredit), options.maxConnecting - connecting)
        while budget > 0 && !rampComplete {
            if !scenario.openNext(pool: pool) { rampComplete = true; break }
            budget -= 1
            rampCredit -= 1
        }
    }

    private func progressLine(_ now: UInt64) {
        let seconds = Double(now &- lastProgressNs) / 1e9
        lastProgressNs = now
        let c = scenario.counters
        let p99 = scenario.takeIntervalP99()
        if options.progress {
            let line = ProgressLine.format(
                elapsedSeconds: Double(now &- runStartNs) / 1e9, connections: pool.openedConnections,
                sent: c.sent, sentPerSecond: Double(c.sent &- lastSent) / seconds,
                delivered: c.delivered, deliveredPerSecond: Double(c.delivered &- lastDelivered) / seconds,
                p99Ns: p99, errors: c.errors) + "  " + stage.rawValue
            writeStandardError(options.progressNewlines ? "\(line)\n" : "\r\(line)\u{1B}[K")
        }
        lastSent = c.sent
        lastDelivered = c.delivered
    }

    private func sampleServer() -> ProcSample? {
        guard !options.serverPIDs.isEmpty else { return nil }
        var samples: [ProcSample] = []
        for pid in options.serverPIDs {
            do {
                samples.append(try ProcSampler.sample(pid: pid))
            } catch {
                notes.append("server pid \(pid): \(error)")
                return nil
            }
        }
        return ProcSample.sum(samples)
    }

    static func ownCPUSeconds() -> Double { ProcSampler.selfCPUSeconds() }
}
