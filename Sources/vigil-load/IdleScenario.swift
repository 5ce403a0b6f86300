import VigilLoad

/// `idle`: C connections opened and held without traffic (they answer the server's pings).
/// What it measures is the server's memory per connection: RSS after the ramp-up minus RSS
/// before, over C, with `--server-pid`.
final class IdleScenario: Scenario {
    let name = "idle"
    let count: Int
    private(set) var counters = RunCounters()
    private var connections: [ClientConnection?]
    private var nextToOpen = 0
    private var openNow = 0

    init(connections: Int) {
        count = connections
        self.connections = Array(repeating: nil, count: connections)
    }

    var parameters: [(String, String)] { [("connections", "\(count)")] }
    var targetConnections: Int { count }
    var latencies: [(String, LatencyStats)] { [] }
    func takeIntervalP99() -> UInt64? { nil }

    func openNext(pool: ClientPool) -> Bool {
        guard nextToOpen < count else { return false }
        connections[nextToOpen] = pool.connect(tag: nextToOpen, delegate: self, node: nextToOpen % pool.urls.count)
        if connections[nextToOpen] == nil {
            counters.connectFailures += 1
            counters.error("connect \(nextToOpen) failed")
        }
        nextToOpen += 1
        return true
    }

    /// Ready when every connection is open or has failed.
    var isReady: Bool { nextToOpen == count && openNow + Int(counters.connectFailures) >= count }
    func tick(nowNs: UInt64) {}
    func stopSending(nowNs: UInt64) {}
    var isDrained: Bool { true }

    func verify() -> [CheckSummary] {
        var errors = CheckErrors()
        let lost = count - openNow
        if lost > 0 { errors.record("\(lost) of \(count) connections were not open at the end") }
        return [CheckSummary(name: "connections held to the end", checked: count, errors: errors)]
    }

    func closeAll() {
        for c in connections { c?.closeHandshake() }
    }
}

extension IdleScenario: ClientDelegate {
    func opened(_ connection: ClientConnection) { openNow += 1 }
    func message(_ connection: ClientConnection, _ bytes: UnsafeRawBufferPointer) {
        // The welcome; an idle client sends nothing.
        counters.delivered(by: connection.node)
    }
    func closed(_ connection: ClientConnection, failure: String?) {
        if connection.everOpen { openNow -= 1 }
        connections[connection.tag] = nil
        guard let failure else { return }
        counters.connectFailures += connection.everOpen ? 0 : 1
        counters.unexpectedCloses += connection.everOpen ? 1 : 0
        counters.error("connection \(connection.tag): \(failure)")
    }
}
