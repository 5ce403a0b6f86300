import Glibc
import VigilCore
import VigilGeo
import VigilLoad

/// `map`: subscribers with city-sized viewports over a region (some panning), and publishers
/// creating, moving, voting on and deleting pins.
///
/// Publishers serialize operations per pin (at most one in flight), so the order they send in is
/// the order the server applies, and every acknowledged operation becomes the next version of the
/// pin in the `PinHistory`. Each create and move carries a stamp in the pin's description (moves,
/// votes, send time): subscribers that time events read it straight from the event bytes without
/// parsing the JSON. A sample of subscribers records every event for the exactness check done
/// after the drain (`MapChecker`).
///
/// `stalled` more subscribers watch the whole region and stop reading once their subscribe is
/// answered (a small receive buffer, so the kernel's buffers fill soon): the server must close or
/// outlast them without the others noticing. They are left out of every latency, count and check;
/// once the rest is drained they read again, and the report says how many the server had closed,
/// with which code, and what the others read.
///
/// Over several nodes (`nodes` > 1, vigil-load's `--url` given more than once) publishers and
/// subscribers go round robin over them (`NodeSpread`), each op's stamp names the node it was
/// sent to, and the check takes a node's lag into account (`MapChecker.AckScope.severalNodes`,
/// also with `--cluster-checks`). The run then ends with a barrier per checked subscriber: once
/// every op is acknowledged, the subscriber creates a pin in the middle of its area and waits for
/// its `added` before it unsubscribes. The pin is the last change of the replicated log, so its
/// event arriving shows the subscriber's node has applied, and sent, everything before it.
final class MapScenario: Scenario {
    struct Config {
        var subscribers: Int
        var publishers: Int
        var rate: Double
        var window: Int
        var pinsPerPublisher: Int
        var region: GeoBox
        var viewportKm: Double
        var sameViewport: Bool
        var panning: Double
        var panIntervalSeconds: Double
        /// Publishers create all their pins during the ramp-up, before the measured window.
        var prefill: Bool
        var checkSubscribers: Int
        var latencySubscribers: Int
        var seed: UInt64
        var stalled = 0
        /// `--range`: the share of pins created with a `range_m` (0: none). Subscribers then send
        /// a `viewer` position (three in four; the rest none, and must never get a ranged pin), and
        /// one move in four also sets, changes or removes the pin's range.
        var rangeShare = 0.0
        /// The nodes (`--url`s) connections are spread over.
        var nodes = 1
        /// Check as for several nodes (a node may apply a change after its writer's `ok`) and end
        /// with the barrier: on with several nodes, or asked for (`--cluster-checks`).
        var severalNodes = false
    }


    static func parseRegion(_ text: String) -> GeoBox? {
        let parts = text.split(separator: ",").compactMap { Double($0.filter { $0 != " " }) }
        guard parts.count == 4, (-90...90).contains(parts[0]), (-90...90).contains(parts[2]), parts[0] < parts[2],
              (-180...180).contains(parts[1]), (-180...180).contains(parts[3]), parts[1] < parts[3] else { return nil }
        return GeoBox(south: parts[0], west: parts[1], north: parts[2], east: parts[3])
    }

    let name = "map"
    let config: Config
    private(set) var counters = RunCounters()
    private var eventLatency = LatencyStats()
    /// Publisher's operation → its `ok` (the server's turn, without the fan-out to subscribers).
    private var ackLatency = LatencyStats()
    private var interval = IntervalLatency()
    private var rng: SeededRandom
    private var writer = JSONWriter(capacity: 512)
    private(set) var truth = PinHistory()
    private let spread: NodeSpread
    /// "map event" latency by (publisher's node, subscriber's node).
    private var pairLatency: NodePairLatency

    // Publishers.
    private struct Pending {
        enum Op { case create, move(GeoPoint), vote, delete }
        var op: Op
        var pin: Int          // local pin index (-1 for a create until its reply)
        var publisher: Int
        var sendNs: UInt64
    }
    private struct LocalPin {
        var serverID: String
        var id: PinID
        var token: String
        var owner: Int
        var point: GeoPoint
        var moves: Int
        var votes: Int
        var inFlight: Bool
        var deleted: Bool
        var voters: Set<Int>
        var range: Int? = nil
    }
    private var publisherConnections: [ClientConnection?]
    private var publisherPins: [[Int]]          // live local pins per publisher
    private var publisherCreating: [Int]        // creates in flight per publisher
    private var publisherInFlight: [Int]
    private var pending: [Int64: Pending] = [:]
    private var nextRef: Int64 = 1
    private var pins: [LocalPin] = []
    private var openPublishers = 0
    private var nextPublisherToOpen = 0
    private var rateCredit = 0.0
    private var nextPublisher = 0
    private var lastTickNs: UInt64 = 0
    private var stopped = false

    // Subscribers.
    private struct Subscriber {
        var area: GeoBox
        /// The `viewer` it subscribes with (`--range` only), a point of its viewport.
        var viewer: GeoPoint? = nil
        var nextPanNs: UInt64 = 0
        var subscribed = false
        var awaitingRef: Int64 = 0
        /// The request awaited is the unsubscribe that ends the run.
        var leaving = false
        var checked: Bool
        var timed: Bool
        /// The node it connects to (`NodeSpread.withinClasses`: checked, timed, the rest).
        var node = 0
        /// The end-of-run barrier (several nodes): its create's ref, send time and, once answered,
        /// its pin; and the pins `added` since it was sent (its event may beat its `ok`).
        var barrierRef: Int64 = 0
        var barrierSentNs: UInt64 = 0
        var barrierPin: PinID?
        var barrierSeen = false
        var addedSinceBarrier: Set<PinID> = []
    }
    private var subscribers: [Subscriber] = []
    /// The subscribers that pan: the only ones a tick needs to look at.
    private var panners: [Int] = []
    private var subscriberConnections: [ClientConnection?]
    private var nextSubscriberToOpen = 0
    private var subscribedCount = 0
    private var logs: [Int: SubscriberLog] = [:]
    private var lastDeliveryNs: UInt64 = 0
    private var unsubscribed = false

    // Stalled subscribers.
    private var stalledConnections: [ClientConnection?]
    private var stalledAwaiting: [Int64]
    private var nextStalledToOpen = 0
    private var stalledTally = StalledTally()
    private var stalledResumedNs: UInt64 = 0
    private var lastStalledMessageNs: UInt64 = 0

    private enum Role {
        static let subscriberBase = 1 << 40
        static let stalledBase = 1 << 41
    }

    init(config: Config) {
        self.config = config
        spread = NodeSpread(count: config.nodes)
        pairLatency = NodePairLatency(nodes: config.nodes)
        rng = SeededRandom(seed: config.seed)
        publisherConnections = Array(repeating: nil, count: config.publishers)
        publisherPins = Array(repeating: [], count: config.publishers)
        publisherCreating = Array(repeating: 0, count: config.publishers)
        publisherInFlight = Array(repeating: 0, count: config.publishers)
        subscriberConnections = Array(repeating: nil, count: config.subscribers)
        stalledConnections = Array(repeating: nil, count: config.stalled)
        stalledAwaiting = Array(repeating: 0, count: config.stalled)
        let checkEvery = max(1, config.subscribers / max(1, config.checkSubscribers))
        let timeEvery = max(1, config.subscribers / max(1, config.latencySubscribers))
        for i in 0..<config.subscribers {
            let area = config.sameViewport ? config.region : randomViewport()
            if !config.sameViewport && Double.random(in: 0..<1, using: &rng) < config.panning { panners.append(i) }
            subscribers.append(Subscriber(
                area: area,
                checked: config.checkSubscribers > 0 && i % checkEvery == 0 && i / checkEvery < config.checkSubscribers,
                timed: config.latencySubscribers > 0 && i % timeEvery == 0))
            if config.rangeShare > 0 && i % 4 != 3 { subscribers[i].viewer = randomPoint(in: area) }
        }
        let nodes = spread.withinClasses(subscribers.map { $0.checked ? 0 : $0.timed ? 1 : 2 })
        for i in subscribers.indices { subscribers[i].node = nodes[i] }
    }

    var parameters: [(String, String)] {
        let r = config.region
        return [("subscribers", "\(config.subscribers)"), ("publishers", "\(config.publishers)"),
                ("rate", config.rate == 0 ? "closed loop, window \(config.window) per publisher" : "\(config.rate) ops/s"),
                ("pins per publisher", "\(config.pinsPerPublisher)"),
                ("region", "\(r.south),\(r.west),\(r.north),\(r.east)"),
                ("viewport", config.sameViewport ? "the whole region (all subscribers)" : "\(config.viewportKm) km"),
                ("panning", "\(config.panning) every \(config.panIntervalSeconds) s"),
                ("pins made before measuring", config.prefill ? "yes" : "no"),
                ("checked subscribers", "\(subscribers.filter(\.checked).count)"),
                ("timed subscribers", "\(subscribers.filter(\.timed).count)"),
                ("stalled subscribers", "\(config.stalled) (the whole region, stop reading)"),
                ("pins with a range", config.rangeShare > 0 ? "\(config.rangeShare) (200 to \(maxRange) m; 3 in 4 subscribers send a viewer)" : "none"),
                ("seed", "\(config.seed)")] + nodeParameters
    }

    private var nodeParameters: [(String, String)] {
        var list: [(String, String)] = []
        if config.nodes > 1 { list.append(("nodes", "\(config.nodes): publishers round robin, subscribers round robin within their sample (checked, timed, the rest)")) }
        if config.severalNodes { list.append(("checks", "for several nodes (a node may apply a change after its writer's ok; barrier pin at the end)")) }
        return list
    }

    var targetConnections: Int { config.subscribers + config.publishers + config.stalled }
    var latencies: [(String, LatencyStats)] {
        [("map event", eventLatency), ("map op ack", ackLatency)] + pairLatency.series("map event")
    }

    var figures: [(String, Double)] {
        guard pairLatency.recorded > 0 else { return [] }
        return [("timed events across nodes %", Double(pairLatency.across) * 100 / Double(pairLatency.recorded))]
    }
    func takeIntervalP99() -> UInt64? { interval.takeP99() }

    // MARK: geometry

    private func randomPoint(in box: GeoBox) -> GeoPoint {
        GeoPoint(lat: Double.random(in: box.south...box.north, using: &rng), lon: Double.random(in: box.west...box.east, using: &rng))
    }

    /// A viewport of `viewportKm` around a random point of the region (clamped to it).
    private func randomViewport(around center: GeoPoint? = nil) -> GeoBox {
        let c = center ?? randomPoint(in: config.region)
        let dLat = config.viewportKm / 111.32 / 2
        let dLon = config.viewportKm / (111.32 * max(0.1, cos(c.lat * .pi / 180))) / 2
        return GeoBox(south: max(-90, c.lat - dLat), west: max(-180, c.lon - dLon),
                      north: min(90, c.lat + dLat), east: min(180, c.lon + dLon))
    }

    /// The largest `range_m` a pin gets: half the viewport, so that reaches end inside viewports
    /// (and within the default `pins.max_range_m`, 50 km).
    private var maxRange: Int { min(50_000, max(200, Int(config.viewportKm * 500))) }

    /// A random `range_m` with probability `share`, else nil.
    private func randomRange(share: Double) -> Int? {
        guard share > 0, Double.random(in: 0..<1, using: &rng) < share else { return nil }
        return Int.random(in: 200...maxRange, using: &rng)
    }

    /// A pin's next position: a short walk (about 1 km), kept inside the region.
    private func moved(_ p: GeoPoint) -> GeoPoint {
        let r = config.region
        let lat = min(r.north, max(r.south, p.lat + Double.random(in: -0.01...0.01, using: &rng)))
        let lon = min(r.east, max(r.west, p.lon + Double.random(in: -0.015...0.015, using: &rng)))
        return GeoPoint(lat: lat, lon: lon)
    }

    // MARK: ramp-up

    func openNext(pool: ClientPool) -> Bool {
        if nextPublisherToOpen < config.publishers {
            // Each publisher from an address of its own: vigild counts one vote per address and pin.
            publisherConnections[nextPublisherToOpen] = pool.connect(tag: nextPublisherToOpen, delegate: self,
                                                                     source: pool.ownSource(nextPublisherToOpen),
                                                                     node: spread.roundRobin(nextPublisherToOpen))
            if publisherConnections[nextPublisherToOpen] == nil { counters.connectFailures += 1; counters.error("connect failed (publisher)") }
            nextPublisherToOpen += 1
            return true
        }
        if nextSubscriberToOpen < config.subscribers {
            subscriberConnections[nextSubscriberToOpen] = pool.connect(tag: Role.subscriberBase + nextSubscriberToOpen, delegate: self,
                                                                       node: subscribers[nextSubscriberToOpen].node)
            if subscriberConnections[nextSubscriberToOpen] == nil { counters.connectFailures += 1; counters.error("connect failed (subscriber)") }
            nextSubscriberToOpen += 1
            return true
        }
        if nextStalledToOpen < config.stalled {
            stalledConnections[nextStalledToOpen] = pool.connect(tag: Role.stalledBase + nextStalledToOpen, delegate: self,
                                                                 stalled: true, node: spread.roundRobin(nextStalledToOpen))
            if stalledConnections[nextStalledToOpen] == nil { counters.connectFailures += 1; counters.error("connect failed (stalled subscriber)") }
            nextStalledToOpen += 1
            return true
        }
        return false
    }

    var isReady: Bool {
        openPublishers == config.publishers && subscribedCount == config.subscribers && stalledTally.stalled == config.stalled
            && (!config.prefill || publisherPins.allSatisfy { $0.count >= config.pinsPerPublisher })
    }

    /// `--prefill`: keeps `window` creates in flight until the publisher holds its pins.
    private func fill(_ p: Int) {
        guard config.prefill, let c = publisherConnections[p], c.isOpen else { return }
        while publisherInFlight[p] < config.window && publisherPins[p].count + publisherCreating[p] < config.pinsPerPublisher {
            _ = sendCreate(p, c)
        }
    }

    // MARK: traffic

    func tick(nowNs: UInt64) {
        if lastTickNs == 0 { lastTickNs = nowNs }
        let dt = Double(nowNs &- lastTickNs) / 1e9
        lastTickNs = nowNs
        if config.rate > 0 {
            rateCredit = min(rateCredit + dt * config.rate, max(1, config.rate / 10))
            var guardCount = config.publishers * 4
            while rateCredit >= 1 && guardCount > 0 {
                let p = nextPublisher
                nextPublisher = (nextPublisher + 1) % config.publishers
                if sendOne(publisher: p, nowNs: nowNs) { rateCredit -= 1; guardCount = config.publishers * 4 } else { guardCount -= 1 }
            }
        } else {
            for p in 0..<config.publishers {
                while publisherInFlight[p] < config.window && sendOne(publisher: p, nowNs: nowNs) {}
            }
        }
        for i in panners where subscribers[i].subscribed && nowNs >= subscribers[i].nextPanNs {
            let old = subscribers[i].area
            subscribers[i].area = randomViewport(around: moved(GeoPoint(lat: (old.south + old.north) / 2, lon: (old.west + old.east) / 2)))
            if subscribers[i].viewer != nil { subscribers[i].viewer = randomPoint(in: subscribers[i].area) }
            subscribe(i, nowNs: nowNs)
        }
    }

    /// Sends the publisher's next operation; false when it has nothing it may send now.
    private func sendOne(publisher p: Int, nowNs: UInt64) -> Bool {
        guard !stopped, let c = publisherConnections[p], c.isOpen else { return false }
        let live = publisherPins[p].count + publisherCreating[p]
        if live < config.pinsPerPublisher {
            return sendCreate(p, c)
        }
        let roll = Double.random(in: 0..<1, using: &rng)
        if roll < 0.15 {
            // Vote +1 on another publisher's pin this one has not voted on.
            for _ in 0..<4 {
                let q = Int.random(in: 0..<config.publishers, using: &rng)
                guard q != p, let i = publisherPins[q].randomElement(using: &rng), !pins[i].inFlight,
                      !pins[i].voters.contains(p) else { continue }
                return sendPinOp(p, c, pin: i, op: .vote)
            }
        }
        guard let i = publisherPins[p].randomElement(using: &rng), !pins[i].inFlight else { return false }
        if roll < 0.3 { return sendPinOp(p, c, pin: i, op: .delete) }
        return sendPinOp(p, c, pin: i, op: .move(moved(pins[i].point)))
    }

    /// The stamp of an op sent over `c` (naming its node when there are several).
    private func stamp(moves: Int, votes: Int, sendNs: UInt64, _ c: ClientConnection) -> String {
        PayloadStamp.format(moves: moves, votes: votes, sendNs: sendNs, node: config.nodes > 1 ? c.node : nil)
    }

    private func sendCreate(_ p: Int, _ c: ClientConnection) -> Bool {
        let ref = nextRef
        nextRef += 1
        let point = randomPoint(in: config.region)
        let now = Clock.nowNs()
        writeCreate(ref: ref, at: point, title: "load", sendNs: now, c, range: randomRange(share: config.rangeShare))
        pending[ref] = Pending(op: .create, pin: -1, publisher: p, sendNs: now)
        publisherCreating[p] += 1
        publisherInFlight[p] += 1
        c.sendText(writer)
        counters.sent += 1
        return true
    }

    /// `pin.create` of a stamped pin (version 0, sent at `sendNs` over `c`).
    private func writeCreate(ref: Int64, at point: GeoPoint, title: String, sendNs: UInt64, _ c: ClientConnection, range: Int? = nil) {
        writer.reset()
        writer.beginObject()
        writer.field("op", "pin.create")
        writer.field("ref", ref)
        writer.key("pin")
        writer.beginObject()
        writer.field("lat", point.lat)
        writer.field("lon", point.lon)
        writer.field("title", title)
        writer.field("description", stamp(moves: 0, votes: 0, sendNs: sendNs, c))
        if let range { writer.field("range_m", Int64(range)) }
        writer.endObject()
        writer.endObject()
    }

    private func sendPinOp(_ p: Int, _ c: ClientConnection, pin i: Int, op: Pending.Op) -> Bool {
        let ref = nextRef
        nextRef += 1
        let now = Clock.nowNs()
        writer.reset()
        writer.beginObject()
        switch op {
        case .move(let to):
            writer.field("op", "pin.update")
            writer.field("ref", ref)
            writer.field("id", pins[i].serverID)
            writer.field("edit_token", pins[i].token)
            writer.key("changes")
            writer.beginObject()
            writer.field("lat", to.lat)
            writer.field("lon", to.lon)
            writer.field("description", stamp(moves: pins[i].moves + 1, votes: pins[i].votes, sendNs: now, c))
            if config.rangeShare > 0 && Int.random(in: 0..<4, using: &rng) == 0 {
                writer.key("range_m")
                if let range = randomRange(share: 0.5) { writer.int(Int64(range)) } else { writer.null() }
            }
            writer.endObject()
        case .vote:
            writer.field("op", "pin.vote")
            writer.field("ref", ref)
            writer.field("id", pins[i].serverID)
            writer.field("value", Int64(1))
            pins[i].voters.insert(p)
        case .delete:
            writer.field("op", "pin.delete")
            writer.field("ref", ref)
            writer.field("id", pins[i].serverID)
            writer.field("edit_token", pins[i].token)
        case .create:
            preconditionFailure("creates go through sendCreate")
        }
        writer.endObject()
        pins[i].inFlight = true
        pending[ref] = Pending(op: op, pin: i, publisher: p, sendNs: now)
        publisherInFlight[p] += 1
        c.sendText(writer)
        counters.sent += 1
        return true
    }

    private func subscribe(_ i: Int, nowNs: UInt64) {
        guard let c = subscriberConnections[i], c.isOpen else { return }
        let ref = nextRef
        nextRef += 1
        writeSubscribe(ref: ref, area: subscribers[i].area, viewer: subscribers[i].viewer)
        subscribers[i].awaitingRef = ref
        // Jittered (0.5x to 1.5x the interval), so panning subscribers do not move in lockstep.
        subscribers[i].nextPanNs = nowNs &+ UInt64(config.panIntervalSeconds * 1e9 * Double.random(in: 0.5...1.5, using: &rng))
        if subscribers[i].checked { logs[i, default: SubscriberLog(subscriber: i)].subscribeSent(area: .box(subscribers[i].area), viewer: subscribers[i].viewer, atNs: Clock.nowNs()) }
        c.sendText(writer)
    }

    private func writeSubscribe(ref: Int64, area: GeoBox, viewer: GeoPoint? = nil) {
        Self.writeSubscribe(into: &writer, ref: ref, area: area, viewer: viewer)
    }

    /// `{"op":"subscribe","ref":R,"area":{"bbox":[...]}}` with its optional `viewer` and `view`
    /// (`"clusters"`: the `clusters` scenario's subscribers).
    static func writeSubscribe(into writer: inout JSONWriter, ref: Int64, area a: GeoBox, viewer: GeoPoint? = nil, view: String? = nil) {
        writer.reset()
        writer.beginObject()
        writer.field("op", "subscribe")
        writer.field("ref", ref)
        writer.key("area")
        writer.beginObject()
        writer.key("bbox")
        writer.beginArray()
        writer.double(a.south); writer.double(a.west); writer.double(a.north); writer.double(a.east)
        writer.endArray()
        writer.endObject()
        if let viewer {
            writer.key("viewer")
            writer.beginObject()
            writer.field("lat", viewer.lat)
            writer.field("lon", viewer.lon)
            writer.endObject()
        }
        if let view { writer.field("view", view) }
        writer.endObject()
    }

    func stopSending(nowNs: UInt64) { stopped = true }

    /// Every operation answered; then the checked subscribers unsubscribe (closing their last
    /// epoch) and the drain ends when they are answered and no event came for 300 ms. Then the
    /// stalled subscribers read again, until each is closed or none has read anything for 300 ms.
    /// Over several nodes each checked subscriber first passes its barrier (see the type's notes).
    var isDrained: Bool {
        guard pending.isEmpty else { return false }
        if !unsubscribed {
            if config.severalNodes {
                for i in subscribers.indices where subscribers[i].checked { advanceBarrier(i) }
                guard subscribers.indices.allSatisfy({ !subscribers[$0].checked || subscribers[$0].leaving || subscriberConnections[$0] == nil })
                else { return false }
            } else {
                for i in subscribers.indices where subscribers[i].checked { unsubscribe(i) }
            }
            unsubscribed = true
        }
        let now = Clock.nowNs()
        guard subscribers.allSatisfy({ $0.awaitingRef == 0 }) && now &- lastDeliveryNs > 300_000_000 else { return false }
        if stalledResumedNs == 0 {
            stalledResumedNs = now
            lastStalledMessageNs = now
            for c in stalledConnections {
                guard let c, c.isOpen else { continue }
                stalledTally.resumedReading()
                c.resumeReading()
            }
        }
        return stalledConnections.allSatisfy { $0 == nil } || now &- lastStalledMessageNs > 300_000_000
    }

    /// Several nodes, after every op's `ok`: a checked subscriber whose subscribes are all answered
    /// creates its barrier pin; once the pin's `ok` and its `added` are both in, it unsubscribes.
    private func advanceBarrier(_ i: Int) {
        guard !subscribers[i].leaving, let c = subscriberConnections[i], c.isOpen else { return }
        if subscribers[i].barrierRef == 0 {
            guard subscribers[i].awaitingRef == 0 else { return }
            let a = subscribers[i].area
            let center = GeoPoint(lat: (a.south + a.north) / 2, lon: (a.west + a.east) / 2)
            let ref = nextRef
            nextRef += 1
            let now = Clock.nowNs()
            writeCreate(ref: ref, at: center, title: "load barrier", sendNs: now, c)
            subscribers[i].barrierRef = ref
            subscribers[i].barrierSentNs = now
            c.sendText(writer)
            return
        }
        if subscribers[i].barrierSeen { unsubscribe(i) }
    }

    /// The barrier's create was answered: it is the run's last change (recorded like any create).
    private func barrierAnswered(_ i: Int, _ m: JSONObject, nowNs: UInt64) {
        guard m["type"]?.string == "ok", let pin = m["pin"]?.object, let text = pin["id"]?.string, let id = PinID(text),
              let lat = pin["lat"]?.double, let lon = pin["lon"]?.double else {
            counters.error("subscriber \(i): barrier pin refused (\(m["code"]?.string ?? "no pin") \(m["message"]?.string ?? ""); lift the pin limits as benchmarks/vigild-bench.yaml does): the end of its last epoch cannot be checked")
            subscribers[i].barrierSeen = true  // unsubscribe all the same; the error fails the run
            return
        }
        truth.recordCreate(id, at: GeoPoint(lat: lat, lon: lon), sendNs: subscribers[i].barrierSentNs, ackNs: nowNs)
        subscribers[i].barrierPin = id
        if subscribers[i].addedSinceBarrier.contains(id) { subscribers[i].barrierSeen = true }
        subscribers[i].addedSinceBarrier = []
    }

    private func unsubscribe(_ i: Int) {
        guard let c = subscriberConnections[i], c.isOpen else { return }
        let ref = nextRef
        nextRef += 1
        writer.reset()
        writer.beginObject()
        writer.field("op", "unsubscribe")
        writer.field("ref", ref)
        writer.endObject()
        subscribers[i].awaitingRef = ref
        subscribers[i].leaving = true
        logs[i, default: SubscriberLog(subscriber: i)].unsubscribeSent(atNs: Clock.nowNs())
        c.sendText(writer)
    }

    func verify() -> [CheckSummary] {
        var checker = MapChecker(history: truth, maxErrors: 20, scope: config.severalNodes ? .severalNodes : .oneNode)
        for (_, log) in logs.sorted(by: { $0.key < $1.key }) { checker.check(log) }
        var summaries = [checker.result.summary(name: "viewport exactness")]
        if config.stalled > 0 { summaries.append(stalledTally.summary(name: "stalled subscribers", planned: config.stalled)) }
        return summaries
    }

    func closeAll() {
        for c in publisherConnections { c?.closeHandshake() }
        for c in subscriberConnections { c?.closeHandshake() }
        for c in stalledConnections { c?.closeHandshake() }
    }
}

extension MapScenario: ClientDelegate {
    func opened(_ connection: ClientConnection) {
        if connection.tag >= Role.stalledBase {
            let k = connection.tag - Role.stalledBase
            stalledAwaiting[k] = nextRef
            nextRef += 1
            writeSubscribe(ref: stalledAwaiting[k], area: config.region)
            connection.sendText(writer)
        } else if connection.tag >= Role.subscriberBase {
            subscribe(connection.tag - Role.subscriberBase, nowNs: Clock.nowNs())
        } else {
            openPublishers += 1
            fill(connection.tag)
        }
    }

    func message(_ connection: ClientConnection, _ bytes: UnsafeRawBufferPointer) {
        if connection.tag >= Role.stalledBase {
            stalledMessage(connection.tag - Role.stalledBase, connection, bytes)
        } else if connection.tag >= Role.subscriberBase {
            subscriberMessage(connection.tag - Role.subscriberBase, connection, bytes)
        } else {
            publisherMessage(connection.tag, bytes)
        }
    }

    /// `{"type":"pin.` — an event; anything else is a reply or the welcome.
    private static let eventPrefix: [UInt8] = Array(#"{"type":"pin."#.utf8)

    private func isEvent(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count > Self.eventPrefix.count && Self.hasPrefix(bytes, Self.eventPrefix)
    }

    /// Whether the message begins with these bytes (a look at its type without parsing it).
    static func hasPrefix(_ bytes: UnsafeRawBufferPointer, _ prefix: [UInt8]) -> Bool {
        guard bytes.count >= prefix.count else { return false }
        for (k, b) in prefix.enumerated() where bytes[k] != b { return false }
        return true
    }

    private func subscriberMessage(_ i: Int, _ connection: ClientConnection, _ bytes: UnsafeRawBufferPointer) {
        let now = Clock.nowNs()
        if isEvent(bytes) {
            counters.delivered(by: connection.node)
            lastDeliveryNs = now
            guard subscribers[i].timed || subscribers[i].checked else { return }
            guard let event = PinEventScan.event(bytes) else { return counters.error("subscriber \(i): unreadable event") }
            if subscribers[i].timed, let sent = event.latencySendNs {
                let ns = now &- sent
                eventLatency.record(ns: ns)
                interval.record(ns: ns)
                if let from = event.pin.stamp?.node { pairLatency.record(from: from, to: connection.node, ns: ns) }
            }
            if subscribers[i].checked {
                logs[i, default: SubscriberLog(subscriber: i)].event(event)
                if subscribers[i].barrierRef != 0, event.kind == .added, let id = event.pin.id {
                    if id == subscribers[i].barrierPin {
                        subscribers[i].barrierSeen = true
                    } else if subscribers[i].barrierPin == nil {
                        subscribers[i].addedSinceBarrier.insert(id)
                    }
                }
            }
            return
        }
        // A subscriber that checks nothing needs only the reply's ref: a panning map's reply holds
        // hundreds of pins, and parsing them all would make the client, not the server, the limit.
        if !subscribers[i].checked, let ref = Self.okRef(bytes) {
            if ref == subscribers[i].awaitingRef { answered(i) }
            return
        }
        guard case .object(let m)? = try? JSONParser.parse(bytes), let type = m["type"]?.string else {
            return counters.error("subscriber \(i): unparseable message")
        }
        switch type {
        // Replies come in the order the requests went out, so a checked subscriber's log takes
        // every one as the answer to its oldest open request: also a reply to a subscribe that a
        // newer pan has overtaken (its ref is then not the awaited one). Taking only the awaited
        // one paired the newest reply with the oldest open area.
        case "ok" where m["ref"]?.int64 == subscribers[i].barrierRef && subscribers[i].barrierRef != 0,
             "error" where m["ref"]?.int64 == subscribers[i].barrierRef && subscribers[i].barrierRef != 0:
            barrierAnswered(i, m, nowNs: now)
        case "ok":
            guard let ref = m["ref"]?.int64 else { return }
            if subscribers[i].checked {
                let scan = PinEventScan.pins(bytes)
                logs[i, default: SubscriberLog(subscriber: i)].replyReceived(
                    atNs: now, snapshot: SubscriberLog.observedPins(scan.pins), truncated: scan.truncated)
            }
            if ref == subscribers[i].awaitingRef { answered(i) }
        case "error":
            if subscribers[i].checked, m["ref"]?.int64 != nil {
                logs[i, default: SubscriberLog(subscriber: i)].requestRefused()
            }
            if m["ref"]?.int64 == subscribers[i].awaitingRef { subscribers[i].awaitingRef = 0 }
            counters.error("subscriber \(i): \(m["code"]?.string ?? "?") \(m["message"]?.string ?? "")")
        case "welcome":
            break
        default:
            counters.error("subscriber \(i) got unexpected \(type)")
        }
    }

    /// `{"type":"ok","ref":`: how vigild begins every `ok` reply to a request with a ref.
    private static let okPrefix: [UInt8] = Array(#"{"type":"ok","ref":"#.utf8)

    /// The ref of an `ok` reply that begins with `okPrefix` and a non-negative integer ref; nil
    /// for anything else (which then takes the parser's way).
    static func okRef(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        guard bytes.count > okPrefix.count else { return nil }
        for (k, b) in okPrefix.enumerated() where bytes[k] != b { return nil }
        var ref: Int64 = 0
        var at = okPrefix.count
        while at < bytes.count, (0x30...0x39).contains(bytes[at]), ref < Int64.max / 10 - 9 {
            ref = ref * 10 + Int64(bytes[at] - 0x30)
            at += 1
        }
        guard at > okPrefix.count, at < bytes.count, bytes[at] == 0x2C || bytes[at] == 0x7D else { return nil }
        return ref
    }

    /// The subscriber's awaited request was answered `ok`.
    private func answered(_ i: Int) {
        subscribers[i].awaitingRef = 0
        if !subscribers[i].subscribed {
            subscribers[i].subscribed = true
            subscribedCount += 1
        } else if !subscribers[i].leaving && !stopped {
            counters.resubscribes += 1
        }
    }

    /// A stalled subscriber stops reading as soon as its subscribe is answered; what it reads
    /// after resuming is only counted.
    private func stalledMessage(_ k: Int, _ connection: ClientConnection, _ bytes: UnsafeRawBufferPointer) {
        if stalledResumedNs != 0 {
            stalledTally.messageAfterResume()
            lastStalledMessageNs = Clock.nowNs()
            return
        }
        guard !isEvent(bytes) else { return }  // an event that came in the same read as the reply
        guard case .object(let m)? = try? JSONParser.parse(bytes), let type = m["type"]?.string else {
            return counters.error("stalled subscriber \(k): unparseable message")
        }
        switch type {
        case "ok" where m["ref"]?.int64 == stalledAwaiting[k] && stalledAwaiting[k] != 0:
            stalledAwaiting[k] = 0
            stalledTally.stoppedReading()
            connection.stopReading()
        case "error":
            counters.error("stalled subscriber \(k): \(m["code"]?.string ?? "?") \(m["message"]?.string ?? "")")
        default:
            break
        }
    }

    private func publisherMessage(_ p: Int, _ bytes: UnsafeRawBufferPointer) {
        let now = Clock.nowNs()
        guard case .object(let m)? = try? JSONParser.parse(bytes), let type = m["type"]?.string else {
            return counters.error("publisher \(p): unparseable message")
        }
        guard type == "ok" || type == "error" else {
            if type != "welcome" && !type.hasPrefix("pin.") { counters.error("publisher \(p) got unexpected \(type)") }
            return
        }
        guard let ref = m["ref"]?.int64, let op = pending.removeValue(forKey: ref) else {
            return counters.error("publisher \(p): reply to an unknown ref")
        }
        publisherInFlight[p] -= 1
        counters.acked += 1
        ackLatency.record(ns: now &- op.sendNs)
        if case .create = op.op { publisherCreating[p] -= 1 } else { pins[op.pin].inFlight = false }
        if type == "error" {
            return counters.error("publisher \(p): \(m["code"]?.string ?? "?") \(m["message"]?.string ?? "")")
        }
        switch op.op {
        case .create:
            guard let pin = m["pin"]?.object, let text = pin["id"]?.string, let id = PinID(text), let token = m["edit_token"]?.string,
                  let lat = pin["lat"]?.double, let lon = pin["lon"]?.double else { return counters.error("publisher \(p): create reply without pin") }
            let point = GeoPoint(lat: lat, lon: lon)
            let range = pin["range_m"]?.int64.map { Int($0) }
            pins.append(LocalPin(serverID: text, id: id, token: token, owner: p, point: point, moves: 0, votes: 0,
                                 inFlight: false, deleted: false, voters: [], range: range))
            publisherPins[p].append(pins.count - 1)
            truth.recordCreate(id, at: point, rangeMeters: range, sendNs: op.sendNs, ackNs: now)
            fill(p)
        case .move:
            let i = op.pin
            guard let pin = m["pin"]?.object, let lat = pin["lat"]?.double, let lon = pin["lon"]?.double else {
                return counters.error("publisher \(p): update reply without pin")
            }
            pins[i].point = GeoPoint(lat: lat, lon: lon)
            pins[i].moves += 1
            pins[i].range = pin["range_m"]?.int64.map { Int($0) }
            truth.recordUpdate(pins[i].id, to: pins[i].point, rangeMeters: pins[i].range, sendNs: op.sendNs, ackNs: now)
        case .vote:
            let i = op.pin
            let up = Int(m["pin"]?.object?["up"]?.int64 ?? 0), down = Int(m["pin"]?.object?["down"]?.int64 ?? 0)
            pins[i].votes += 1
            if up + down != pins[i].votes { counters.error("pin \(pins[i].serverID): \(up + down) votes after a vote, expected \(pins[i].votes)") }
            truth.recordVote(pins[i].id, up: up, down: down, sendNs: op.sendNs, ackNs: now)
        case .delete:
            let i = op.pin
            pins[i].deleted = true
            publisherPins[pins[i].owner].removeAll { $0 == i }
            truth.recordDelete(pins[i].id, sendNs: op.sendNs, ackNs: now)
        }
    }

    func closed(_ connection: ClientConnection, failure: String?) {
        if connection.tag >= Role.stalledBase {
            let k = connection.tag - Role.stalledBase
            stalledConnections[k] = nil
            return counters.stalledClosed(connection, failure: failure, label: "stalled subscriber \(k)", tally: &stalledTally)
        }
        if connection.tag >= Role.subscriberBase {
            let i = connection.tag - Role.subscriberBase
            subscriberConnections[i] = nil
            subscribers[i].awaitingRef = 0
            if subscribers[i].checked { logs[i, default: SubscriberLog(subscriber: i)].connectionLost() }
        } else {
            let p = connection.tag
            publisherConnections[p] = nil
            // Operations without an answer may or may not have been applied: the checker skips those pins.
            for (ref, op) in pending where op.publisher == p {
                pending[ref] = nil
                if op.pin >= 0 { truth.abandon(pins[op.pin].id) }
            }
        }
        guard let failure else { return }
        counters.unexpectedCloses += 1
        counters.error("connection \(connection.tag >= Role.subscriberBase ? "subscriber \(connection.tag - Role.subscriberBase)" : "publisher \(connection.tag)"): \(failure)")
    }
}
