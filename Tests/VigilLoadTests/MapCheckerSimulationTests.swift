import XCTest
import VigilCore
import VigilGeo
@testable import VigilLoad

/// A tiny model of a correct server, run on random timelines: ops in flight while subscribes
/// are, subscribes pipelined, pins moving across area edges, votes, flags and deletes. Whatever
/// the timing, the checker must find nothing wrong with what a correct server sends; and it must
/// find a duplicated event or a hole in a run every time.
final class MapCheckerSimulationTests: XCTestCase {
    enum OpKind {
        case create(GeoPoint)
        case update(GeoPoint)
        case vote(up: Int, down: Int)
        case delete
    }

    struct Op {
        var pin: Int
        var kind: OpKind
        var sendNs: UInt64
        var applyNs: UInt64
        var ackNs: UInt64
    }

    enum Delivery {
        case reply(snapshot: [ObservedPin])
        case event(PinEventKind, PinID, Int)
    }

    enum ClientAction {
        case subscribeSent(GeoArea)
        case unsubscribeSent
        case received(Delivery)
    }

    struct Scenario {
        var history: PinHistory
        var log: SubscriberLog
        var received: Int
        /// Events whose change the subscriber's node applied after the writer's `ok` (cluster runs).
        var appliedAfterAck = 0
    }

    /// Inside every area of `areas`: where a cluster run's barrier pin goes.
    static let everywhere = GeoPoint(lat: 8, lon: 8)

    static let areas: [GeoArea] = [
        .box(GeoBox(south: 0, west: 0, north: 10, east: 10)),
        .box(GeoBox(south: 5, west: 5, north: 15, east: 15)),
        .circle(center: GeoPoint(lat: 8, lon: 8), radiusMeters: 500_000),
        .box(GeoBox(south: -5, west: -5, north: 30, east: 30)),
    ]
    static let positions: [GeoPoint] = [
        GeoPoint(lat: 1, lon: 1), GeoPoint(lat: 7, lon: 7), GeoPoint(lat: 12, lon: 12),
        GeoPoint(lat: 25, lon: 25), GeoPoint(lat: 40, lon: 40), GeoPoint(lat: 9, lon: 3),
    ]

    /// Builds one random run and what a correct server delivers for it. `mutate` may change the
    /// delivered stream before the client sees it.
    ///
    /// `cluster`: the publishers write on another node. Each op enters the replicated log at a
    /// commit time between its send and its `ok`; the subscriber's node applies the log in commit
    /// order, each op some time after its commit, so before or after the writer's `ok`. The run
    /// ends as vigil-load ends one over several nodes: a barrier pin created after the last `ok`,
    /// and the unsubscribe sent once its `added` has arrived.
    func scenario(seed: UInt64, cluster: Bool = false, mutate: (inout [(UInt64, Delivery)]) -> Void = { _ in }) -> Scenario {
        var rng = SeededRandom(seed: seed)
        func r(_ range: ClosedRange<Int>) -> UInt64 { UInt64(Int.random(in: range, using: &rng)) }
        let threshold = 3
        let pinIDs = (0..<6).map { PinID(high: 0x4000, low: UInt64($0) + 1) }
        let barrierID = PinID(high: 0x4000, low: 0xBA)

        // Publishers: one op in flight per pin.
        var ops: [Op] = []
        for pin in pinIDs.indices {
            var send = r(0...300)
            var up = 0, down = 0
            let start = Self.positions.randomElement(using: &rng) ?? Self.positions[0]
            var kind = OpKind.create(start)
            for _ in 0..<Int.random(in: 1...12, using: &rng) {
                let apply = send + r(1...15)
                let ack = apply + r(1...15)
                ops.append(Op(pin: pin, kind: kind, sendNs: send, applyNs: apply, ackNs: ack))
                if case .delete = kind { break }
                if case .vote = kind, down - up >= threshold { break }
                send = ack + r(0...25)
                switch Int.random(in: 0..<20, using: &rng) {
                case 0..<11: kind = .update(Self.positions.randomElement(using: &rng) ?? start)
                case 11..<18:
                    if Bool.random(using: &rng) { up += 1 } else { down += 1 }
                    kind = .vote(up: up, down: down)
                default: kind = .delete
                }
            }
        }

        // One subscriber: subscribes, sometimes sent before the previous reply arrived.
        var subscribes: [(sent: UInt64, apply: UInt64, area: GeoArea)] = []
        var sent = r(0...60)
        var apply: UInt64 = 0
        for _ in 0..<Int.random(in: 1...6, using: &rng) {
            apply = Swift.max(sent, apply) + r(1...12)
            subscribes.append((sent, apply, Self.areas.randomElement(using: &rng) ?? Self.areas[0]))
            sent += r(3...120)
        }
        let lastAck = ops.map(\.ackNs).max() ?? 0
        var unsubscribeSent = Swift.max(lastAck, apply) + 1
        var unsubscribeApply = unsubscribeSent + 1
        var commits: [Int: UInt64] = [:]
        if cluster {
            let barrier = ops.count
            // As vigil-load: once every ok is in and the last subscribe answered (at most 6 after its apply).
            let barrierSent = Swift.max(lastAck, apply + 6) + r(1...5)
            ops.append(Op(pin: pinIDs.count, kind: .create(Self.everywhere), sendNs: barrierSent, applyNs: 0, ackNs: barrierSent + r(2...30)))
            // Commit strictly inside (send, ack): the writer's node answers after its own apply.
            for k in ops.indices {
                commits[k] = ops[k].sendNs + r(1...Int(ops[k].ackNs - ops[k].sendNs - 1))
            }
            // The subscriber's node: commit order, each a lag after its commit (up to 40).
            var last: UInt64 = 0
            for k in ops.indices.sorted(by: { (commits[$0]!, $0) < (commits[$1]!, $1) }) {
                last = Swift.max(last, commits[k]! + r(0...40))
                ops[k].applyNs = last
            }
            // The unsubscribe goes out once the barrier's event has arrived (at most 6 after it was sent).
            unsubscribeSent = Swift.max(ops[barrier].applyNs, apply) + 7
            unsubscribeApply = unsubscribeSent + 1
        }

        // The server: applies ops and subscribes in time order, fans events out to the current area.
        enum Step { case op(Op), subscribe(Int), unsubscribe }
        var steps: [(UInt64, Step)] = ops.map { ($0.applyNs, .op($0)) }
        steps += subscribes.indices.map { (subscribes[$0].apply, .subscribe($0)) }
        steps.append((unsubscribeApply, .unsubscribe))
        steps.sort { $0.0 < $1.0 }

        struct Live { var position: GeoPoint; var version: Int; var up = 0; var down = 0 }
        var live: [Int: Live] = [:]
        var area: GeoArea?
        var delivered: [(UInt64, Delivery)] = []
        var history = PinHistory(voteFlagThreshold: threshold)
        var appliedAfterAck = 0
        for (time, step) in steps {
            switch step {
            case .subscribe(let k):
                area = subscribes[k].area
                let snapshot = live.keys.sorted().compactMap { pin -> ObservedPin? in
                    guard let state = live[pin], subscribes[k].area.contains(state.position) else { return nil }
                    return ObservedPin(pin: pinIDs[pin], observedVersion: state.version)
                }
                delivered.append((time, .reply(snapshot: snapshot)))
            case .unsubscribe:
                area = nil
                delivered.append((time, .reply(snapshot: [])))
            case .op(let op):
                let id = op.pin < pinIDs.count ? pinIDs[op.pin] : barrierID
                let old = live[op.pin]
                var new = old
                var removal: RemovalReason?
                switch op.kind {
                case .create(let at):
                    new = Live(position: at, version: 0)
                    history.recordCreate(id, at: at, sendNs: op.sendNs, ackNs: op.ackNs)
                case .update(let to):
                    new?.position = to
                    new?.version += 1
                    history.recordUpdate(id, to: to, sendNs: op.sendNs, ackNs: op.ackNs)
                case .vote(let up, let down):
                    new?.version += 1
                    new?.up = up
                    new?.down = down
                    if down - up >= threshold { removal = .flagged }
                    history.recordVote(id, up: up, down: down, sendNs: op.sendNs, ackNs: op.ackNs)
                case .delete:
                    removal = .deleted
                    history.recordDelete(id, sendNs: op.sendNs, ackNs: op.ackNs)
                }
                if let area {
                    let wasIn = old.map { area.contains($0.position) } ?? false
                    let isIn = removal == nil && (new.map { area.contains($0.position) } ?? false)
                    let version = new?.version ?? 0
                    if (wasIn || isIn) && op.applyNs > op.ackNs { appliedAfterAck += 1 }
                    switch (wasIn, isIn) {
                    case (false, true): delivered.append((time, .event(.added, id, version)))
                    case (true, true): delivered.append((time, .event(.updated, id, version)))
                    case (true, false):
                        switch removal {
                        case .deleted?: delivered.append((time, .event(.removed(.deleted), id, old?.version ?? 0)))
                        case .flagged?: delivered.append((time, .event(.removed(.flagged), id, version)))
                        default: delivered.append((time, .event(.removed(.moved), id, version)))
                        }
                    case (false, false): break
                    }
                }
                live[op.pin] = removal == nil ? new : nil
            }
        }
        mutate(&delivered)

        // The wire: FIFO, each message a little after the server sent it.
        var actions: [(UInt64, Int, ClientAction)] = []
        var arrival: UInt64 = 0
        for (index, (time, delivery)) in delivered.enumerated() {
            arrival = Swift.max(arrival, time + r(1...6))
            actions.append((arrival, 1_000_000 + index, .received(delivery)))
        }
        for (index, s) in subscribes.enumerated() { actions.append((s.sent, index, .subscribeSent(s.area))) }
        actions.append((unsubscribeSent, 999_999, .unsubscribeSent))
        actions.sort { ($0.0, $0.1) < ($1.0, $1.1) }

        var log = SubscriberLog(subscriber: Int(seed))
        var received = 0
        for (time, _, action) in actions {
            switch action {
            case .subscribeSent(let a): log.subscribeSent(area: a, atNs: time)
            case .unsubscribeSent: log.unsubscribeSent(atNs: time)
            case .received(.reply(let snapshot)): log.replyReceived(atNs: time, snapshot: snapshot)
            case .received(.event(let kind, let pin, let version)):
                received += 1
                log.event(kind, pin: pin, observedVersion: version)
            }
        }
        return Scenario(history: history, log: log, received: received, appliedAfterAck: appliedAfterAck)
    }

    func testACorrectServerIsNeverFlagged() {
        var events = 0
        var certain: UInt64 = 0
        for seed in 0..<400 as Range<UInt64> {
            let s = scenario(seed: seed)
            var checker = MapChecker(history: s.history)
            checker.check(s.log)
            XCTAssertEqual(checker.result.errors.count, 0, "seed \(seed): \(checker.result.errors.first)")
            XCTAssertEqual(s.history.abandonedCount, 0)
            XCTAssertEqual(s.log.strayEvents, 0)
            events += s.received
            certain += checker.result.certainChanges
        }
        // The runs must actually exercise the checker.
        XCTAssertGreaterThan(events, 1000)
        XCTAssertGreaterThan(certain, 500)
    }

    func testADuplicatedEventIsAlwaysFound() { assertDuplicatesAreFound(cluster: false) }

    func testAHoleInARunIsAlwaysFound() { assertHolesAreFound(cluster: false) }

    /// The last event delivered twice: always `wrong`.
    func assertDuplicatesAreFound(cluster: Bool, file: StaticString = #filePath, line: UInt = #line) {
        var tried = 0
        for seed in 0..<200 as Range<UInt64> {
            var duplicated = false
            let s = scenario(seed: seed, cluster: cluster) { delivered in
                let eventIndexes = delivered.indices.filter { if case .event = delivered[$0].1 { return true } else { return false } }
                guard let index = eventIndexes.last else { return }
                delivered.insert(delivered[index], at: index + 1)
                duplicated = true
            }
            guard duplicated else { continue }
            tried += 1
            var checker = MapChecker(history: s.history, scope: cluster ? .severalNodes : .oneNode)
            checker.check(s.log)
            XCTAssertGreaterThanOrEqual(checker.result.wrong, 1, "seed \(seed)", file: file, line: line)
        }
        XCTAssertGreaterThan(tried, 100, file: file, line: line)
    }

    /// An event dropped that has a later event of the same pin before the next reply: always found.
    func assertHolesAreFound(cluster: Bool, file: StaticString = #filePath, line: UInt = #line) {
        var tried = 0
        for seed in 0..<200 as Range<UInt64> {
            var dropped = false
            let s = scenario(seed: seed, cluster: cluster) { delivered in
                for i in delivered.indices {
                    guard case .event(_, let pin, _) = delivered[i].1 else { continue }
                    var j = i + 1
                    var hasLater = false
                    while j < delivered.count {
                        if case .reply = delivered[j].1 { break }
                        if case .event(_, let other, _) = delivered[j].1, other == pin { hasLater = true; break }
                        j += 1
                    }
                    if hasLater {
                        delivered.remove(at: i)
                        dropped = true
                        return
                    }
                }
            }
            guard dropped else { continue }
            tried += 1
            var checker = MapChecker(history: s.history, scope: cluster ? .severalNodes : .oneNode)
            checker.check(s.log)
            XCTAssertGreaterThanOrEqual(checker.result.lost + checker.result.wrong, 1, "seed \(seed)", file: file, line: line)
        }
        XCTAssertGreaterThan(tried, 50, file: file, line: line)
    }

    // MARK: - Several nodes

    func testACorrectClusterIsNeverFlagged() {
        var events = 0, afterAck = 0
        var certain: UInt64 = 0
        var flaggedByOneNodeRules = 0
        for seed in 0..<400 as Range<UInt64> {
            let s = scenario(seed: seed, cluster: true)
            var checker = MapChecker(history: s.history, scope: .severalNodes)
            checker.check(s.log)
            XCTAssertEqual(checker.result.errors.count, 0, "seed \(seed): \(checker.result.errors.first)")
            XCTAssertEqual(s.history.abandonedCount, 0)
            events += s.received
            afterAck += s.appliedAfterAck
            certain += checker.result.certainChanges
            var oneNode = MapChecker(history: s.history)
            oneNode.check(s.log)
            if oneNode.result.errors.count > 0 { flaggedByOneNodeRules += 1 }
        }
        XCTAssertGreaterThan(events, 1000)
        // Both orders happen: events applied after the writer's ok, and (the rest) before it.
        XCTAssertGreaterThan(afterAck, 200)
        XCTAssertLessThan(afterAck, events)
        // The barrier makes every change after the last reply certain, as on one node.
        XCTAssertGreaterThan(certain, 500)
        // The one-node rules would call a correct cluster wrong: the reason for the scope.
        XCTAssertGreaterThan(flaggedByOneNodeRules, 40)
    }

    func testADuplicatedEventIsAlwaysFoundOnSeveralNodes() { assertDuplicatesAreFound(cluster: true) }

    func testAHoleInARunIsAlwaysFoundOnSeveralNodes() { assertHolesAreFound(cluster: true) }

    /// The last epoch's last event before the barrier's, dropped: when its change was sent after
    /// the epoch's reply arrived, the barrier made it certain and the loss must be found.
    func testALostTailIsFoundThanksToTheBarrier() {
        var tried = 0
        for seed in 0..<300 as Range<UInt64> {
            var droppedEvent: (PinEventKind, PinID, Int)?
            let s = scenario(seed: seed, cluster: true) { delivered in
                let replies = delivered.indices.filter { if case .reply = delivered[$0].1 { return true } else { return false } }
                let eventIndexes = delivered.indices.filter { if case .event = delivered[$0].1 { return true } else { return false } }
                // [.., last subscribe's reply, .., event, barrier's added, unsubscribe's reply]
                guard replies.count >= 2, eventIndexes.count >= 2 else { return }
                let victim = eventIndexes[eventIndexes.count - 2]
                guard victim > replies[replies.count - 2], case .event(let kind, let pin, let version) = delivered[victim].1 else { return }
                droppedEvent = (kind, pin, version)
                delivered.remove(at: victim)
            }
            guard let (kind, pin, version) = droppedEvent, let last = s.log.epochs.last,
                  let versions = s.history.versions(of: pin) else { continue }
            let change = PinTransitions.changeIndex(kind: kind, observedVersion: version)
            guard versions[change].sendNs > last.replyNs else { continue }
            tried += 1
            var checker = MapChecker(history: s.history, scope: .severalNodes)
            checker.check(s.log)
            XCTAssertGreaterThanOrEqual(checker.result.lost, 1, "seed \(seed)")
        }
        XCTAssertGreaterThan(tried, 30)
    }
}
