import Glibc
import VigilCore
import VigilLoad

/// `panic`: K streams, each updated at a rate by its owner, each watched by W contacts.
///
/// Owners: each owner connection starts `streamsPerOwner` streams (a phone has one; the option
/// exists so a run fits a small fd limit) and sends `panic.update` at `rate` Hz per stream, spread
/// evenly over the period. Watchers: the W watch tokens of every stream are handed to watcher
/// connections, `watchesPerConnection` streams per connection (a contact watching several people).
/// Every watcher checks seq continuity (`WatchChecker`); `reconnectsPerSecond` watcher connections
/// drop without a close (a phone losing coverage) and come back with `since`.
///
/// Latency: the owner notes the send time of each update under the seq the server will give it
/// (updates of one stream go over one connection, so they take consecutive seqs), and a watcher
/// receiving that seq live computes now − send time: one process, one monotonic clock.
///
/// `stalledWatchers` more watcher connections (each watching `stalledWatches` streams, or all of
/// them) stop reading once their watches are accepted, with small receive buffers: the server
/// conflates their locations or closes them, and the normal watchers must not notice. They are
/// left out of the latency, counts and the normal seq check; once the rest is drained they read
/// again and their own check allows the seq jumps of conflation but no duplicate or lost end.
///
/// Over several nodes (`nodes` > 1) owners go round robin and each stream's watchers go to other
/// nodes than its owner's (`NodeSpread`); a watcher that reconnects comes back on the next node,
/// with `since`. A node learns of a stream, and of its events, when it applies them from the
/// replicated log, so a watch that reaches a node before the stream did is refused (`forbidden`,
/// or `invalid_since` for a `since` the node has not reached yet): with `severalNodes` such a watch
/// is sent again after 10 ms, then 20, 40, ... up to 200 ms apart, 30 times (about 5 s), and the
/// retries are counted in the report.
final class PanicScenario: Scenario {
    struct Config {
        var streams: Int
        var watchersPerStream: Int
        var rateHz: Double
        var streamsPerOwner: Int
        var watchesPerConnection: Int
        var reconnectsPerSecond: Double
        var seed: UInt64
        var center: (lat: Double, lon: Double) = (52.52, 13.405)
        var stalledWatchers = 0
        /// Streams each stalled watcher watches (0: every stream).
        var stalledWatches = 0
        /// Each owner from an address of its own (a phone each), so per-address budgets see people, not one client.
        var ownersOwnAddress = false
        /// The pacing granularity (the driver's tick): the streams are spread over buckets this
        /// long, so each tick sends about streams × rate × tick updates at once. 5 ms buckets made
        /// 50-update bursts at 1,000 streams × 10 Hz, and the last update of a burst waited for
        /// the daemon and this client to get through the other 49 (docs/BENCHMARKS.md, issue 13).
        var bucketNs: UInt64 = 1_000_000
        /// Send coordinates rounded to 7 decimals (1e-7°, about 1 cm), as a phone's fix has no
        /// more real precision; the default sends the random walk's full doubles (17 digits).
        var roundCoordinates = false
        /// End-to-end encrypted streams: starts and updates carry a sealed value (`e2e`, `sealed`,
        /// `kid`, `seq`, `status`) of the size a real one has instead of coordinates. The server
        /// cannot open sealed values, so random bytes of that size cost it what real ones do
        /// (see `SealedFiller`).
        var e2e = false
        /// The nodes (`--url`s) connections are spread over.
        var nodes = 1
        /// A node may not know yet what another acknowledged: retry refused watches (see the type).
        var severalNodes = false
    }

    /// A refused watch is sent again after 10 ms, doubling up to 200 ms (a node's message limit
    /// is per second), at most `maxWatchRetries` times in a row: about 5 s in all.
    static func watchRetryDelayNs(afterRetries n: Int) -> UInt64 { UInt64(min(10 << min(n, 8), 200)) * 1_000_000 }
    static let maxWatchRetries = 30

    let name = "panic"
    let config: Config
    private(set) var counters = RunCounters()
    private var locationLatency = LatencyStats()
    private let spread: NodeSpread
    /// "panic location" latency by (owner's node, watcher's node).
    private var pairLatency: NodePairLatency
    /// Deliveries to normal watchers, and those on another node than the stream's owner.
    private var watcherDeliveries: UInt64 = 0
    private var deliveriesAcross: UInt64 = 0
    /// Watches sent again after a refusal, by the refusal's code.
    private var watchRetries: [String: UInt64] = [:]
    /// Refused watches waiting for their retry on their slot's connection (dropped with it: the
    /// reconnection sends every watch of the slot anyway).
    private var retries: [(dueNs: UInt64, slot: Int, index: Int)] = []
    /// Owner's update → its `ok`: what the server's turn costs the sender, apart from the fan-out.
    private var ackLatency = LatencyStats()
    private var interval = IntervalLatency()
    private var rng: SeededRandom

    // Streams, by index.
    private var streamIDs: [String?]
    private var streamIndex: [String: Int] = [:]
    private var nextSeq: [UInt64]          // seq the next update will take
    private var ackedSeq: [UInt64]
    private var ended: [Bool]
    private var positions: [(lat: Double, lon: Double)]
    private var sealed = SealedFiller(seed: 0, sealedBytes: 0)
    private var kids: [String] = []
    /// Send times by seq, a ring of `ring` slots per stream (slot holds seq and ns).
    private let ring = 64
    private var sentSeq: [UInt64]
    private var sentNs: [UInt64]
    private var startedCount = 0
    private var tokens: [[String]]

    // Owners.
    private var owners: [ClientConnection?]
    private var ownerCount: Int { (config.streams + config.streamsPerOwner - 1) / config.streamsPerOwner }
    private var nextOwnerToOpen = 0

    // Watchers: slot w watches pairs (stream, token index); checkers survive reconnects.
    private struct Watch {
        var stream: Int
        var token: Int
        var checker: WatchChecker
        var accepted = false
        var stateSeq: UInt64 = 0
        var retries = 0
    }
    private var watcherSlots: [[Watch]] = []
    private var watchers: [ClientConnection?] = []
    /// Which watches each watcher connection holds and on which node it starts (`NodeSpread`).
    private let watchPlan: [NodeSpread.WatchConnection]
    /// The node each watcher connection is on now (it moves on reconnecting).
    private var watcherNodes: [Int] = []
    private var nextWatcherToOpen = 0
    private var watchersPlanned = false
    private var reconnectCredit = 0.0
    private(set) var reconnects = 0
    private var watchAcceptedCount = 0

    // Stalled watchers: slot k watches its streams with each stream's first token.
    private var stalledSlots: [[Watch]] = []
    private var stalledConnections: [ClientConnection?] = []
    private var nextStalledToOpen = 0
    private var stalledTally = StalledTally()
    private var stalledResumed = false

    // Pacing: streams in buckets of `config.bucketNs` over one period.
    private var buckets: [[Int]] = []
    private var periodNs: UInt64 = 0
    private var startNs: UInt64 = 0
    private var cursor: UInt64 = 0
    private var lastTickNs: UInt64 = 0
    private var stopped = false
    private var writer = JSONWriter(capacity: 256)

    init(config: Config) {
        self.config = config
        let spread = NodeSpread(count: config.nodes)
        self.spread = spread
        pairLatency = NodePairLatency(nodes: config.nodes)
        let perOwner = config.streamsPerOwner
        watchPlan = spread.watchConnections(streams: config.streams, watchersPerStream: config.watchersPerStream,
                                            perConnection: config.watchesPerConnection) { spread.roundRobin($0 / perOwner) }
        rng = SeededRandom(seed: config.seed)
        streamIDs = Array(repeating: nil, count: config.streams)
        nextSeq = Array(repeating: 2, count: config.streams)
        ackedSeq = Array(repeating: 1, count: config.streams)
        ended = Array(repeating: false, count: config.streams)
        sentSeq = Array(repeating: 0, count: config.streams * ring)
        sentNs = Array(repeating: 0, count: config.streams * ring)
        tokens = Array(repeating: [], count: config.streams)
        owners = []
        positions = []
        positions.reserveCapacity(config.streams)
        for _ in 0..<config.streams {
            positions.append((config.center.lat + Double.random(in: -0.2...0.2, using: &rng),
                              config.center.lon + Double.random(in: -0.3...0.3, using: &rng)))
        }
        owners = Array(repeating: nil, count: ownerCount)
        if config.e2e {
            sealed = SealedFiller(seed: config.seed, sealedBytes: SealedFiller.sealedBytes(roundCoordinates: config.roundCoordinates))
            kids = (0..<config.streams).map { _ in sealed.kid() }
        }
    }

    var parameters: [(String, String)] {
        [("streams", "\(config.streams)"), ("watchers per stream", "\(config.watchersPerStream)"),
         ("rate per stream", "\(config.rateHz) Hz"), ("streams per owner connection", "\(config.streamsPerOwner)"),
         ("streams per watcher connection", "\(config.watchesPerConnection)"),
         ("watcher reconnects per second", "\(config.reconnectsPerSecond)"),
         ("owner addresses", config.ownersOwnAddress ? "one each" : "shared"),
         ("stalled watchers", "\(config.stalledWatchers), each watching \(stalledWatchCount) streams, stop reading"),
         ("seed", "\(config.seed)")]
            + (config.nodes > 1 ? [("nodes", "\(config.nodes): owners round robin, watcher k of a stream on the owner's node + k + 1, reconnecting on the next node")] : [])
            + (config.e2e ? [("e2e", "sealed values of \(SealedFiller.sealedBytes(roundCoordinates: config.roundCoordinates)) bytes instead of coordinates")] : [])
            + (config.severalNodes ? [("refused watches", "sent again after 10 ms doubling to 200 ms, 30 times (a node may not have the stream yet)")] : [])
    }

    private var stalledWatchCount: Int {
        config.stalledWatches == 0 ? config.streams : min(config.streams, config.stalledWatches)
    }

    var watcherConnectionCount: Int { watchPlan.count }

    var targetConnections: Int { ownerCount + watcherConnectionCount + config.stalledWatchers }

    var latencies: [(String, LatencyStats)] {
        [("panic location", locationLatency), ("panic update ack", ackLatency)] + pairLatency.series("panic location")
    }

    var figures: [(String, Double)] {
        var list: [(String, Double)] = []
        if config.nodes > 1, watcherDeliveries > 0 {
            list.append(("deliveries across nodes %", Double(deliveriesAcross) * 100 / Double(watcherDeliveries)))
        }
        if config.severalNodes {
            list.append(("watches retried (forbidden)", Double(watchRetries["forbidden", default: 0])))
            list.append(("watches retried (invalid_since)", Double(watchRetries["invalid_since", default: 0])))
        }
        return list
    }

    private func ownerNode(of stream: Int) -> Int { spread.roundRobin(stream / config.streamsPerOwner) }

    func takeIntervalP99() -> UInt64? { interval.takeP99() }

    private enum Role {
        static let watcherBase = 1 << 40
        static let stalledBase = 1 << 41
    }

    // MARK: ramp-up

    func openNext(pool: ClientPool) -> Bool {
        if nextOwnerToOpen < ownerCount {
            owners[nextOwnerToOpen] = pool.connect(tag: nextOwnerToOpen, delegate: self,
                                                   source: config.ownersOwnAddress ? pool.ownSource(nextOwnerToOpen) : nil,
                                                   node: spread.roundRobin(nextOwnerToOpen))
            if owners[nextOwnerToOpen] == nil { counters.connectFailures += 1; counters.error("connect failed (owner \(nextOwnerToOpen))") }
            nextOwnerToOpen += 1
            return true
        }
        // Watchers open once every stream has its id and tokens.
        guard startedCount == config.streams else { return true }
        if !watchersPlanned { planWatchers() }
        if nextWatcherToOpen < watcherSlots.count {
            openWatcher(nextWatcherToOpen, pool: pool)
            nextWatcherToOpen += 1
            return true
        }
        if nextStalledToOpen < config.stalledWatchers {
            let k = nextStalledToOpen
            stalledConnections[k] = pool.connect(tag: Role.stalledBase + k, delegate: self, stalled: true, node: spread.roundRobin(k))
            if stalledConnections[k] == nil { counters.connectFailures += 1; counters.error("connect failed (stalled watcher \(k))") }
            nextStalledToOpen += 1
            return true
        }
        return false
    }

    private func planWatchers() {
        watchersPlanned = true
        watchers = Array(repeating: nil, count: watchPlan.count)
        watcherNodes = watchPlan.map(\.node)
        watcherSlots = watchPlan.map { connection in
            connection.watches.map {
                Watch(stream: $0.stream, token: $0.watcher, checker: WatchChecker(label: "stream \($0.stream) watcher \($0.watcher)"))
            }
        }
        stalledConnections = Array(repeating: nil, count: config.stalledWatchers)
        stalledSlots = (0..<config.stalledWatchers).map { k in
            (0..<stalledWatchCount).map { j in
                let stream = (k * stalledWatchCount + j) % config.streams
                return Watch(stream: stream, token: 0,
                             checker: WatchChecker(label: "stalled watcher \(k) stream \(stream)", toleratesConflation: true))
            }
        }
    }

    private var poolRef: ClientPool?

    private func openWatcher(_ slot: Int, pool: ClientPool) {
        poolRef = pool
        watchers[slot] = pool.connect(tag: Role.watcherBase + slot, delegate: self, node: watcherNodes[slot])
        if watchers[slot] == nil { counters.connectFailures += 1; counters.error("connect failed (watcher \(slot))") }
    }

    var isReady: Bool {
        watchersPlanned && watchAcceptedCount == config.streams * config.watchersPerStream
            && stalledTally.stalled == config.stalledWatchers
    }

    // MARK: traffic

    func tick(nowNs: UInt64) {
        if startNs == 0 {
            startNs = nowNs
            periodNs = UInt64(1e9 / config.rateHz)
            let bucketCount = max(1, Int(periodNs / max(1, config.bucketNs)))
            buckets = Array(repeating: [], count: bucketCount)
            for s in 0..<config.streams { buckets[Int.random(in: 0..<bucketCount, using: &rng)].append(s) }
            lastTickNs = nowNs
            cursor = 0
        }
        // Every bucket whose time has come since the last tick sends one update per stream.
        let bucketNs = periodNs / UInt64(buckets.count)
        let due = (nowNs &- startNs) / bucketNs
        while cursor < due {
            for s in buckets[Int(cursor % UInt64(buckets.count))] { sendUpdate(s, nowNs: nowNs) }
            cursor += 1
        }
        reconnectCredit += Double(nowNs &- lastTickNs) / 1e9 * config.reconnectsPerSecond
        lastTickNs = nowNs
        while reconnectCredit >= 1 {
            reconnectCredit -= 1
            reconnectOne()
        }
    }

    private func owner(of stream: Int) -> ClientConnection? { owners[stream / config.streamsPerOwner] }

    private func sendUpdate(_ s: Int, nowNs: UInt64) {
        guard let id = streamIDs[s], !ended[s], let c = owner(of: s), c.isOpen else { return }
        let seq = nextSeq[s]
        nextSeq[s] += 1
        positions[s].lat += Double.random(in: -0.0002...0.0002, using: &rng)
        positions[s].lon += Double.random(in: -0.0002...0.0002, using: &rng)
        writer.reset()
        writer.beginObject()
        writer.field("op", "panic.update")
        writer.field("ref", Int64(s))
        writer.field("stream", id)
        if config.e2e {
            writer.field("sealed", sealed.next())
            writer.field("kid", kids[s])
            writer.field("seq", Int64(seq))
            writer.field("status", "red")
        } else {
            writer.field("lat", sentCoordinate(positions[s].lat))
            writer.field("lon", sentCoordinate(positions[s].lon))
            writer.field("accuracy_m", 6.0)
        }
        writer.endObject()
        let slot = s * ring + Int(seq % UInt64(ring))
        sentSeq[slot] = seq
        sentNs[slot] = Clock.nowNs()
        c.sendText(writer)
        counters.sent += 1
    }

    private func sentCoordinate(_ degrees: Double) -> Double {
        config.roundCoordinates ? (degrees * 1e7).rounded() / 1e7 : degrees
    }

    private func reconnectOne() {
        guard let pool = poolRef, !watchers.isEmpty else { return }
        // A random watcher connection that is fully watching drops and comes back.
        for _ in 0..<8 {
            let slot = Int.random(in: 0..<watchers.count, using: &rng)
            guard let c = watchers[slot], c.isOpen, watcherSlots[slot].allSatisfy({ $0.accepted }) else { continue }
            for i in watcherSlots[slot].indices {
                watcherSlots[slot][i].accepted = false
                watcherSlots[slot][i].checker.watchEnded()
            }
            watchAcceptedCount -= watcherSlots[slot].count
            c.delegate = nil
            c.abort()
            reconnects += 1
            watcherNodes[slot] = spread.nextNode(after: watcherNodes[slot])
            retries.removeAll { $0.slot == slot }
            openWatcher(slot, pool: pool)
            return
        }
    }

    func stopSending(nowNs: UInt64) {
        stopped = true
        // Every stream ends "safe": watchers must each see `panic.ended` (the drain waits for it).
        for s in 0..<config.streams {
            guard let id = streamIDs[s], !ended[s], let c = owner(of: s), c.isOpen else { continue }
            nextSeq[s] += 1
            writer.reset()
            writer.beginObject()
            writer.field("op", "panic.end")
            writer.field("ref", Int64(s))
            writer.field("stream", id)
            writer.field("reason", "safe")
            writer.endObject()
            c.sendText(writer)
            counters.sent += 1
            ended[s] = true
        }
    }

    /// Every update answered and every normal watcher saw the end; then the stalled watchers read
    /// again, until each is closed or has seen the end of every stream it watches.
    var isDrained: Bool {
        guard counters.acked >= counters.sent else { return false }
        for slot in watcherSlots.indices {
            guard watchers[slot]?.isOpen == true else { continue }
            for w in watcherSlots[slot] where w.checker.endedAt == nil { return false }
        }
        if !stalledResumed {
            stalledResumed = true
            for c in stalledConnections {
                guard let c, c.isOpen else { continue }
                stalledTally.resumedReading()
                c.resumeReading()
            }
        }
        for k in stalledSlots.indices {
            guard stalledConnections[k]?.isOpen == true else { continue }
            for w in stalledSlots[k] where w.checker.endedAt == nil { return false }
        }
        return true
    }

    func verify() -> [CheckSummary] {
        var totals = WatchTotals(maxErrors: 20)
        var neverEnded = CheckErrors(limit: 20)
        for slot in watcherSlots.indices {
            for w in watcherSlots[slot] {
                totals.add(w.checker)
                if w.checker.endedAt == nil && watchers[slot]?.isOpen == true {
                    neverEnded.record("watcher \(slot) stream \(w.stream): never saw panic.ended (last seq \(w.checker.lastSeq.map(String.init) ?? "none"))")
                }
            }
        }
        var summaries = [totals.summary(name: "watcher seq continuity")]
        summaries.append(CheckSummary(name: "every watcher saw the end", checked: watcherSlots.reduce(0) { $0 + $1.count }, errors: neverEnded))
        if config.stalledWatchers > 0 {
            var stalled = WatchTotals(maxErrors: 20)
            for slot in stalledSlots { for w in slot { stalled.add(w.checker) } }
            summaries.append(stalled.summary(name: "stalled watcher seq"))
            summaries.append(stalledTally.summary(name: "stalled watchers", planned: config.stalledWatchers))
        }
        return summaries
    }

    func closeAll() {
        for c in owners { c?.closeHandshake() }
        for c in watchers { c?.closeHandshake() }
        for c in stalledConnections { c?.closeHandshake() }
    }
}

extension PanicScenario: ClientDelegate {
    func opened(_ connection: ClientConnection) {
        if connection.tag >= Role.watcherBase {
            let stalled = connection.tag >= Role.stalledBase
            let slot = connection.tag - (stalled ? Role.stalledBase : Role.watcherBase)
            for (i, w) in (stalled ? stalledSlots[slot] : watcherSlots[slot]).enumerated() {
                sendWatch(w, ref: i, over: connection)
            }
            return
        }
        let first = connection.tag * config.streamsPerOwner
        for s in first..<min(first + config.streamsPerOwner, config.streams) {
            writer.reset()
            writer.beginObject()
            writer.field("op", "panic.start")
            writer.field("ref", Int64(s))
            writer.field("status", "red")
            if config.e2e {
                writer.key("e2e")
                writer.beginObject()
                writer.field("v", Int64(1))
                writer.field("kid", kids[s])
                writer.field("sealed", sealed.next())
                writer.endObject()
            } else {
                writer.field("lat", positions[s].lat)
                writer.field("lon", positions[s].lon)
                writer.field("accuracy_m", 8.0)
            }
            writer.field("watchers", Int64(config.watchersPerStream))
            writer.endObject()
            connection.sendText(writer)
        }
    }

    /// `panic.watch` for `w` (with `since` once it has seen a seq), `ref` its index in its slot.
    private func sendWatch(_ w: Watch, ref: Int, over connection: ClientConnection) {
        guard let id = streamIDs[w.stream] else { return }
        writer.reset()
        writer.beginObject()
        writer.field("op", "panic.watch")
        writer.field("ref", Int64(ref))
        writer.field("stream", id)
        writer.field("watch_token", tokens[w.stream][w.token])
        if let since = w.checker.lastSeq { writer.field("since", Int64(since)) }
        writer.endObject()
        connection.sendText(writer)
    }

    /// Sends the refused watches whose retry is due.
    func housekeeping(nowNs: UInt64) {
        guard !retries.isEmpty else { return }
        var later: [(dueNs: UInt64, slot: Int, index: Int)] = []
        for r in retries {
            guard let c = watchers[r.slot], c.isOpen else { continue }
            if r.dueNs > nowNs {
                later.append(r)
            } else if !watcherSlots[r.slot][r.index].accepted {
                sendWatch(watcherSlots[r.slot][r.index], ref: r.index, over: c)
            }
        }
        retries = later
    }

    /// A watch was refused. Over several nodes a `forbidden` (the stream has not reached this
    /// node) or `invalid_since` (nor has its latest seq) is retried; anything else is an error.
    private func watchRefused(slot: Int, _ m: JSONObject, nowNs: UInt64) {
        let code = m["code"]?.string ?? "?"
        guard config.severalNodes, code == "forbidden" || code == "invalid_since",
              let i = m["ref"]?.int64.map(Int.init), i >= 0, i < watcherSlots[slot].count, !watcherSlots[slot][i].accepted else {
            return counters.error("watcher \(slot): \(code) \(m["message"]?.string ?? "")")
        }
        guard watcherSlots[slot][i].retries < Self.maxWatchRetries else {
            return counters.error("watcher \(slot) stream \(watcherSlots[slot][i].stream): still \(code) after \(Self.maxWatchRetries) retries over about 5 s")
        }
        retries.append((dueNs: nowNs + Self.watchRetryDelayNs(afterRetries: watcherSlots[slot][i].retries), slot: slot, index: i))
        watcherSlots[slot][i].retries += 1
        watchRetries[code, default: 0] += 1
    }

    func message(_ connection: ClientConnection, _ bytes: UnsafeRawBufferPointer) {
        let now = Clock.nowNs()
        guard case .object(let m)? = try? JSONParser.parse(bytes), let type = m["type"]?.string else {
            counters.error("unparseable message")
            return
        }
        if connection.tag >= Role.stalledBase {
            stalledMessage(slot: connection.tag - Role.stalledBase, connection, type: type, m)
        } else if connection.tag >= Role.watcherBase {
            watcherMessage(slot: connection.tag - Role.watcherBase, connection, type: type, m, nowNs: now)
        } else {
            ownerMessage(type: type, m)
        }
    }

    private func ownerMessage(type: String, _ m: JSONObject) {
        switch type {
        case "ok":
            guard let s = m["ref"]?.int64.map(Int.init), s >= 0, s < config.streams else { return counters.error("owner ok without a known ref") }
            if streamIDs[s] == nil {
                guard let id = m["stream"]?.string, let list = m["watch_tokens"]?.array?.compactMap(\.string),
                      list.count == config.watchersPerStream else { return counters.error("panic.start reply without stream/tokens") }
                streamIDs[s] = id
                streamIndex[id] = s
                tokens[s] = list
                startedCount += 1
                return
            }
            counters.acked += 1
            if let seq = m["seq"]?.int64 {
                let ringSlot = s * ring + Int(UInt64(seq) % UInt64(ring))
                if sentSeq[ringSlot] == UInt64(seq) { ackLatency.record(ns: Clock.nowNs() &- sentNs[ringSlot]) }
                let expected = ackedSeq[s] + 1
                if UInt64(seq) != expected { counters.error("stream \(s): ok seq \(seq), expected \(expected)") }
                ackedSeq[s] = UInt64(seq)
            }
        case "error":
            counters.acked += 1
            counters.error("owner error: \(m["code"]?.string ?? "?") \(m["message"]?.string ?? "")")
        case "welcome", "panic.watchers":
            break
        default:
            counters.error("owner got unexpected \(type)")
        }
    }

    private func watcherMessage(slot: Int, _ connection: ClientConnection, type: String, _ m: JSONObject, nowNs: UInt64) {
        switch type {
        case "panic.location", "panic.status", "panic.ended":
            guard let id = m["stream"]?.string, let s = streamIndex[id], let seq = m["seq"]?.int64.map(UInt64.init),
                  let i = watcherSlots[slot].firstIndex(where: { $0.stream == s }) else {
                return counters.error("watcher \(slot): event for a stream it does not watch")
            }
            counters.delivered(by: connection.node)
            let owner = ownerNode(of: s)
            watcherDeliveries += 1
            if owner != connection.node { deliveriesAcross += 1 }
            watcherSlots[slot][i].checker.event(seq: seq, ended: type == "panic.ended")
            // Live events only: a replay after `since` is old news, not latency.
            if type == "panic.location" && seq > watcherSlots[slot][i].stateSeq {
                let ringSlot = s * ring + Int(seq % UInt64(ring))
                if sentSeq[ringSlot] == seq {
                    let ns = nowNs &- sentNs[ringSlot]
                    locationLatency.record(ns: ns)
                    interval.record(ns: ns)
                    pairLatency.record(from: owner, to: connection.node, ns: ns)
                }
            }
        case "ok":
            guard let i = m["ref"]?.int64.map(Int.init), i >= 0, i < watcherSlots[slot].count,
                  let state = m["state"]?.object, let seq = state["seq"]?.int64.map(UInt64.init) else {
                return counters.error("watcher \(slot): ok without ref/state")
            }
            let gap = m["gap"]?.bool ?? false
            // The `since` this watch was sent with: the checker's high-water mark at that time.
            let since = watcherSlots[slot][i].checker.lastSeq
            watcherSlots[slot][i].checker.watchAccepted(stateSeq: seq, since: since, gap: gap, stateEnded: state["ended"] != nil)
            watcherSlots[slot][i].stateSeq = seq
            watcherSlots[slot][i].retries = 0  // the budget is per attempt to watch, not per run
            if !watcherSlots[slot][i].accepted {
                watcherSlots[slot][i].accepted = true
                watchAcceptedCount += 1
            }
        case "error":
            watchRefused(slot: slot, m, nowNs: nowNs)
        case "welcome", "panic.stale":
            break
        default:
            counters.error("watcher \(slot) got unexpected \(type)")
        }
    }

    /// A stalled watcher: its watches are checked like any (conflation allowed); it stops reading
    /// once all are accepted, and what it reads after resuming is counted.
    private func stalledMessage(slot k: Int, _ connection: ClientConnection, type: String, _ m: JSONObject) {
        if stalledResumed { stalledTally.messageAfterResume() }
        switch type {
        case "panic.location", "panic.status", "panic.ended":
            guard let id = m["stream"]?.string, let s = streamIndex[id], let seq = m["seq"]?.int64.map(UInt64.init),
                  let i = stalledSlots[k].firstIndex(where: { $0.stream == s }) else {
                return stalledTally.error("stalled watcher \(k): event for a stream it does not watch")
            }
            stalledSlots[k][i].checker.event(seq: seq, ended: type == "panic.ended")
        case "ok":
            guard let i = m["ref"]?.int64.map(Int.init), i >= 0, i < stalledSlots[k].count,
                  let state = m["state"]?.object, let seq = state["seq"]?.int64.map(UInt64.init) else {
                return stalledTally.error("stalled watcher \(k): ok without ref/state")
            }
            stalledSlots[k][i].checker.watchAccepted(stateSeq: seq, since: nil, gap: false, stateEnded: state["ended"] != nil)
            stalledSlots[k][i].accepted = true
            if !connection.isReadingStopped && !stalledResumed && stalledSlots[k].allSatisfy(\.accepted) {
                stalledTally.stoppedReading()
                connection.stopReading()
            }
        case "error":
            counters.error("stalled watcher \(k): \(m["code"]?.string ?? "?") \(m["message"]?.string ?? "")")
        case "welcome", "panic.stale":
            break
        default:
            stalledTally.error("stalled watcher \(k) got unexpected \(type)")
        }
    }

    func closed(_ connection: ClientConnection, failure: String?) {
        if connection.tag >= Role.stalledBase {
            let k = connection.tag - Role.stalledBase
            stalledConnections[k] = nil
            return counters.stalledClosed(connection, failure: failure, label: "stalled watcher \(k)", tally: &stalledTally)
        }
        if connection.tag >= Role.watcherBase {
            let slot = connection.tag - Role.watcherBase
            if watchers.indices.contains(slot), watchers[slot] === connection {
                watchers[slot] = nil
                retries.removeAll { $0.slot == slot }
            }
        } else if owners[connection.tag] === connection {
            owners[connection.tag] = nil
        }
        // Our own closes and deliberate drops report no failure: anything else is an error.
        guard let failure else { return }
        counters.unexpectedCloses += 1
        counters.error("connection \(connection.tag): \(failure)")
    }
}
