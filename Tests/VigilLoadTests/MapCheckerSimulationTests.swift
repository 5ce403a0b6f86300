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
    }

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
    func scenario(seed: UInt64, mutate: (inout [(UInt64, Delivery)]) -> Void = { _ in }) -> Scenario {
        var rng = SeededRandom(seed: seed)
        func r(_ range: ClosedRange<Int>) -> UInt64 { UInt64(Int.random(in: range, using: &rng)) }
        let threshold = 3
        let pinIDs = (0..<6).map { PinID(high: 0x4000, low: UInt64($0) + 1) }

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
        let unsubscribeSent = Swift.max(lastAck, apply) + 1
        let unsubscribeApply = unsubscribeSent + 1

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
                let id = pinIDs[op.pin]
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
        return Scenario(history: history, log: log, received: received)
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

    func testADuplicatedEventIsAlwaysFound() {
        var tried = 0
        for seed in 0..<200 as Range<UInt64> {
            var duplicated = false
            let s = scenario(seed: seed) { delivered in
                let eventIndexes = delivered.indices.filter { if case .event = delivered[$0].1 { return true } else { return false } }
                guard let index = eventIndexes.last else { return }
                delivered.insert(delivered[index], at: index + 1)
                duplicated = true
            }
            guard duplicated else { continue }
            tried += 1
            var checker = MapChecker(history: s.history)
            checker.check(s.log)
            XCTAssertGreaterThanOrEqual(checker.result.wrong, 1, "seed \(seed)")
        }
        XCTAssertGreaterThan(tried, 100)
    }

    func testAHoleInARunIsAlwaysFound() {
        var tried = 0
        for seed in 0..<200 as Range<UInt64> {
            var dropped = false
            let s = scenario(seed: seed) { delivered in
                // Drop an event that has a later event of the same pin before the next reply.
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
            var checker = MapChecker(history: s.history)
            checker.check(s.log)
            XCTAssertGreaterThanOrEqual(checker.result.lost + checker.result.wrong, 1, "seed \(seed)")
        }
        XCTAssertGreaterThan(tried, 50)
    }
}
