import Glibc
import VigilCore
import VigilGeo
import VigilLoad

/// `clusters`: cluster subscribers (`"view":"clusters"`) over parts of a country-sized region,
/// while the `map` scenario's publishers (with no pin subscribers of their own) create, move,
/// vote on and delete pins across it at a set rate.
///
/// Checks, after the publishers stop: (1) convergence: once every write is answered and one
/// interval (plus 250 ms) has passed, the checked subscribers subscribe again to the same area on
/// the same connection; the reply is what a fresh subscriber sees, and everything that arrived
/// before it is applied to the old view, which must then equal the reply; (2) pacing: no subscriber got two `clusters.changed` less than
/// `--interval-ms` minus `--pacing-slack-ms` apart (receive times: the client's own delays shift
/// them by up to the slack); (3) no error reply, unreadable message or dropped connection.
final class ClusterScenario: Scenario {
    struct Config {
        var subscribers: Int
        var checkSubscribers: Int
        var intervalMs: Int
        var slackMs: Int
        /// Each subscriber's area is a random part of the region, this share of it to all of it.
        var minAreaShare: Double
        var seed: UInt64
    }

    let name = "clusters"
    let config: Config
    let map: MapScenario
    private var rng: SeededRandom
    private var writer = JSONWriter(capacity: 256)
    private var checker: ClusterChecker
    private var ownCounters = RunCounters()

    private struct Subscriber {
        var area: GeoBox
        var checked: Bool
        var subscribed = false
        var awaitingRef: Int64 = 0
        var view = ClusterView()
        var lastChangedNs: UInt64 = 0
        var precision = 0
        /// The final re-subscribe was answered and compared.
        var compared = false
    }
    private var subscribers: [Subscriber] = []
    private var connections: [ClientConnection?]
    private var nextToOpen = 0
    private var subscribedCount = 0
    private var nextRef: Int64 = 1

    // The measured window's tallies.
    private var windowStartNs: UInt64 = 0
    private var windowEndNs: UInt64 = 0
    private var sentAtStart: UInt64 = 0
    private var sentAtEnd: UInt64 = 0
    private var messages: UInt64 = 0
    private var cells: UInt64 = 0
    private var bytes: UInt64 = 0

    // The end: publishers answered at `writesDoneNs`; the re-subscribes went out at `recheckNs`.
    private var writesDoneNs: UInt64 = 0
    private var recheckNs: UInt64 = 0

    init(config: Config, publishers: MapScenario.Config) {
        self.config = config
        var p = publishers
        p.subscribers = 0
        p.checkSubscribers = 0
        p.latencySubscribers = 0
        p.stalled = 0
        p.rangeShare = 0  // pins with a reach are never counted in clusters
        map = MapScenario(config: p)
        rng = SeededRandom(seed: config.seed &+ 0x5eed)
        checker = ClusterChecker(intervalNs: UInt64(config.intervalMs) * 1_000_000, slackNs: UInt64(config.slackMs) * 1_000_000)
        connections = Array(repeating: nil, count: config.subscribers)
        let checkEvery = max(1, config.subscribers / max(1, config.checkSubscribers))
        let r = p.region
        for i in 0..<config.subscribers {
            let h = (r.north - r.south) * Double.random(in: config.minAreaShare...1, using: &rng)
            let w = (r.east - r.west) * Double.random(in: config.minAreaShare...1, using: &rng)
            let s = r.south + Double.random(in: 0...(r.north - r.south - h), using: &rng)
            let west = r.west + Double.random(in: 0...(r.east - r.west - w), using: &rng)
            subscribers.append(Subscriber(
                area: GeoBox(south: s, west: west, north: s + h, east: west + w),
                checked: config.checkSubscribers > 0 && i % checkEvery == 0 && i / checkEvery < config.checkSubscribers))
        }
    }

    var parameters: [(String, String)] {
        [("cluster subscribers", "\(config.subscribers) (areas \(config.minAreaShare) to 1 of the region per side)"),
         ("checked subscribers", "\(subscribers.filter(\.checked).count)"),
         ("cluster interval", "\(config.intervalMs) ms (pacing slack \(config.slackMs) ms)")]
            + map.parameters.filter { !["subscribers", "viewport", "panning", "checked subscribers", "timed subscribers",
                                        "stalled subscribers", "pins with a range"].contains($0.0) }
    }

    var targetConnections: Int { config.subscribers + map.targetConnections }

    var counters: RunCounters {
        var c = map.counters
        c.delivered += ownCounters.delivered
        c.problems.merge(ownCounters.problems)
        c.connectFailures += ownCounters.connectFailures
        c.unexpectedCloses += ownCounters.unexpectedCloses
        return c
    }

    var latencies: [(String, LatencyStats)] { map.latencies.filter { $0.0 == "map op ack" } }
    func takeIntervalP99() -> UInt64? { nil }

    /// Rates over the measured window, for the report.
    var figures: [(String, Double)] {
        let seconds = Double(windowEndNs &- windowStartNs) / 1e9
        guard windowStartNs > 0, windowEndNs > windowStartNs else { return [] }
        var out: [(String, Double)] = [
            ("cluster msgs/s", Double(messages) / seconds), ("cluster cells/s", Double(cells) / seconds),
            ("cluster bytes/s", Double(bytes) / seconds), ("writes/s", Double(sentAtEnd - sentAtStart) / seconds)]
        // The shortest gap between two `clusters.changed` of one subscriber (the pacing check's).
        if checker.gapsChecked > 0 { out.append(("min gap ms", Double(checker.shortestGapNs) / 1e6)) }
        // How many subscribers' areas got each precision (their covers differ).
        var byPrecision: [Int: Int] = [:]
        for s in subscribers { byPrecision[s.precision, default: 0] += 1 }
        for (p, n) in byPrecision.sorted(by: { $0.key < $1.key }) { out.append(("subs at p\(p)", Double(n))) }
        return out
    }

    func openNext(pool: ClientPool) -> Bool {
        if map.openNext(pool: pool) { return true }
        guard nextToOpen < config.subscribers else { return false }
        connections[nextToOpen] = pool.connect(tag: nextToOpen, delegate: self)
        if connections[nextToOpen] == nil { ownCounters.connectFailures += 1; ownCounters.error("connect failed (cluster subscriber)") }
        nextToOpen += 1
        return true
    }

    var isReady: Bool { map.isReady && subscribedCount == config.subscribers }

    func tick(nowNs: UInt64) {
        if windowStartNs == 0 {
            windowStartNs = nowNs
            sentAtStart = map.counters.sent
            messages = 0; cells = 0; bytes = 0
        }
        map.tick(nowNs: nowNs)
    }

    func stopSending(nowNs: UInt64) {
        windowEndNs = nowNs
        sentAtEnd = map.counters.sent
        map.stopSending(nowNs: nowNs)
    }

    /// Every write answered; then one interval (plus a grace for the loop) for the last changes to
    /// go out; then the checked subscribers subscribe again, and the drain ends when every one is
    /// answered. The wait is not cut short when every subscriber has heard a `clusters.changed`
    /// after the last ok: one read after it may still have been sent before the last write.
    var isDrained: Bool {
        let now = Clock.nowNs()
        if writesDoneNs == 0 {
            guard map.isDrained else { return false }
            writesDoneNs = now
            if windowEndNs == 0 { windowEndNs = now }
        }
        if recheckNs == 0 {
            let bound = writesDoneNs &+ UInt64(config.intervalMs + 250) * 1_000_000
            guard now >= bound else { return false }
            recheckNs = now
            for i in subscribers.indices where subscribers[i].checked { subscribe(i) }
        }
        return subscribers.allSatisfy { !$0.checked || $0.awaitingRef == 0 }
    }

    private func subscribe(_ i: Int) {
        guard let c = connections[i], c.isOpen else { return }
        let ref = nextRef
        nextRef += 1
        MapScenario.writeSubscribe(into: &writer, ref: ref, area: subscribers[i].area, view: "clusters")
        subscribers[i].awaitingRef = ref
        c.sendText(writer)
    }

    func verify() -> [CheckSummary] {
        for i in subscribers.indices where subscribers[i].checked && !subscribers[i].compared {
            checker.noteUnchecked(subscriber: i)
        }
        return [CheckSummary(name: "cluster convergence", checked: checker.viewsChecked, errors: checker.convergence),
                CheckSummary(name: "cluster pacing", checked: config.subscribers, errors: checker.pacing,
                             counters: [("gaps", checker.gapsChecked)])]
    }

    func closeAll() {
        map.closeAll()
        for c in connections { c?.closeHandshake() }
    }
}

extension ClusterScenario: ClientDelegate {
    func opened(_ connection: ClientConnection) { subscribe(connection.tag) }

    private static let changedPrefix: [UInt8] = Array(#"{"type":"clusters.changed""#.utf8)
    private static let cellKey: [UInt8] = Array(#""cell":"#.utf8)

    /// Occurrences of `"cell":` (one per cell; a cell id is a geohash, which holds no quote).
    private static func cellCount(_ bytes: UnsafeRawBufferPointer) -> Int {
        var n = 0
        var at = 0
        let key = cellKey
        while at + key.count <= bytes.count {
            if bytes[at] == key[0] {
                var k = 1
                while k < key.count && bytes[at + k] == key[k] { k += 1 }
                if k == key.count { n += 1; at += k; continue }
            }
            at += 1
        }
        return n
    }

    func message(_ connection: ClientConnection, _ bytes: UnsafeRawBufferPointer) {
        let i = connection.tag
        let now = Clock.nowNs()
        if MapScenario.hasPrefix(bytes, Self.changedPrefix) {
            ownCounters.delivered += 1
            messages += 1
            self.bytes += UInt64(bytes.count)
            let last = subscribers[i].lastChangedNs
            if last != 0 { checker.gap(subscriber: i, ns: now &- last) }
            subscribers[i].lastChangedNs = now
            guard subscribers[i].checked else { cells += UInt64(Self.cellCount(bytes)); return }
            guard case .object(let m)? = try? JSONParser.parse(bytes), let n = subscribers[i].view.apply(changed: m) else {
                return ownCounters.error("cluster subscriber \(i): unreadable clusters.changed")
            }
            cells += UInt64(n)
            return
        }
        guard case .object(let m)? = try? JSONParser.parse(bytes), let type = m["type"]?.string else {
            return ownCounters.error("cluster subscriber \(i): unparseable message")
        }
        switch type {
        case "ok":
            guard let ref = m["ref"]?.int64, ref == subscribers[i].awaitingRef else {
                return ownCounters.error("cluster subscriber \(i): reply to an unknown ref")
            }
            subscribers[i].awaitingRef = 0
            guard let view = ClusterView.reply(m) else { return ownCounters.error("cluster subscriber \(i): reply without clusters") }
            if m["truncated"]?.bool == true { ownCounters.error("cluster subscriber \(i): reply truncated") }
            if !subscribers[i].subscribed {
                subscribers[i].subscribed = true
                subscribers[i].precision = view.precision
                subscribedCount += 1
                if subscribers[i].checked { subscribers[i].view = view }
            } else if subscribers[i].checked && !subscribers[i].compared {
                subscribers[i].compared = true
                checker.converged(subscriber: i, view: subscribers[i].view, fresh: view)
            }
        case "error":
            if m["ref"]?.int64 == subscribers[i].awaitingRef { subscribers[i].awaitingRef = 0 }
            ownCounters.error("cluster subscriber \(i): \(m["code"]?.string ?? "?") \(m["message"]?.string ?? "")")
        case "welcome":
            break
        default:
            ownCounters.error("cluster subscriber \(i) got unexpected \(type)")
        }
    }

    func closed(_ connection: ClientConnection, failure: String?) {
        let i = connection.tag
        connections[i] = nil
        subscribers[i].awaitingRef = 0
        guard let failure else { return }
        ownCounters.unexpectedCloses += 1
        ownCounters.error("cluster subscriber \(i): \(failure)")
    }
}
