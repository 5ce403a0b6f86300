import VigilLoad

/// `mixed`: the map and panic scenarios on one daemon at once. Each keeps its own connections,
/// counters and checks; this only interleaves their ramp-ups and sums their counters.
final class MixedScenario: Scenario {
    let name = "mixed"
    let map: MapScenario
    let panic: PanicScenario
    private var turn = false

    init(map: MapScenario, panic: PanicScenario) {
        self.map = map
        self.panic = panic
    }

    var parameters: [(String, String)] {
        map.parameters.map { ("map: \($0.0)", $0.1) } + panic.parameters.map { ("panic: \($0.0)", $0.1) }
    }
    var targetConnections: Int { map.targetConnections + panic.targetConnections }

    var counters: RunCounters {
        var c = map.counters
        c.add(panic.counters)
        return c
    }

    var latencies: [(String, LatencyStats)] { map.latencies + panic.latencies }

    func takeIntervalP99() -> UInt64? {
        let a = map.takeIntervalP99(), b = panic.takeIntervalP99()
        switch (a, b) {
        case let (x?, y?): return max(x, y)
        default: return a ?? b
        }
    }

    func openNext(pool: ClientPool) -> Bool {
        turn.toggle()
        if turn, map.openNext(pool: pool) { return true }
        if panic.openNext(pool: pool) { return true }
        return map.openNext(pool: pool)
    }

    var isReady: Bool { map.isReady && panic.isReady }
    func tick(nowNs: UInt64) { map.tick(nowNs: nowNs); panic.tick(nowNs: nowNs) }
    func housekeeping(nowNs: UInt64) { map.housekeeping(nowNs: nowNs); panic.housekeeping(nowNs: nowNs) }
    var figures: [(String, Double)] { map.figures + panic.figures }
    func stopSending(nowNs: UInt64) { map.stopSending(nowNs: nowNs); panic.stopSending(nowNs: nowNs) }
    var isDrained: Bool { map.isDrained && panic.isDrained }
    func verify() -> [CheckSummary] { map.verify() + panic.verify() }
    func closeAll() { map.closeAll(); panic.closeAll() }
}
