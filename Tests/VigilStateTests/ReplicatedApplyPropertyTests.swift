import Testing
import VigilGeo
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// The writer and a replica. W runs seeded random operations through the real hub methods and
/// makes each change's record as V1Application does (with `base` the pre-change pin's `updatedAt`
/// or circle's `revision`); R, holding the same subscriptions, watchers and listeners under the
/// same ids, applies each record with `ReplicatedApply`. After every step R's durable state is
/// W's, byte for byte, and R delivered what W delivered (same kinds, payloads and recipients, in
/// the same order). Each record applied a second time changes nothing and delivers nothing.
///
/// R stands for any node with the writer's connections: the writer's own node after it took its
/// change back (that is what the lead's glue does), so `owner` is passed for starts and creates.
/// Time passes for both alike: pins expire, and both hubs' ticks run at the same `now`; W's tick
/// decisions (escalations, abandonments, removals) become records that R applies before its own
/// tick, which then finds nothing left to decide.
///
/// A third node, C, is a node of a cluster: it gets the operations' records like R, but its tick
/// decides nothing (`deciding: false`); what it reports due (`dueDecisions`) must be exactly what
/// W's tick decided, and applied back as records must leave C where W's tick left W.
@Suite struct ReplicatedApplyPropertyTests {
    struct StreamTokens {
        var owner: String
        var live: [String]
        var dead: [String] = []
    }

    struct CircleTokens {
        var owner: String
        var members: [UInt32: String]
        var revoked: [String] = []
    }

    final class Run {
        var w = ReplicaNode()
        var r = ReplicaNode()
        /// A cluster node: its tick decides nothing; it reports what is due (`dueDecisions`),
        /// which comes back to it as records. It gets W's operations' records, not W's tick's.
        var replication = ReplicaNode()
        let secrets: TestSecrets
        let dice: TestSecrets
        var now: Int64 = 1_700_000_000_000
        var streams: [StreamID: StreamTokens] = [:]
        var circles: [CircleID: CircleTokens] = [:]
        var applied: [String: Int] = [:]
        /// Deliveries R made from records, by kind (the escalation counted apart from other events).
        var delivered: [String: Int] = [:]

        func count(_ out: ReplicaNode.Out) {
            func kind(_ k: Any) -> String { String(describing: k).prefix(while: { $0 != "(" }).description }
            for d in out.pins { delivered["pin." + (d.kind == .removed(.flagged) ? "flagged" : d.kind == .removed(.moved) ? "moved" : kind(d.kind)), default: 0] += 1 }
            for d in out.panic {
                if case .event(let e) = d.kind { delivered["panic.event." + kind(e.kind), default: 0] += 1 } else { delivered["panic." + kind(d.kind), default: 0] += 1 }
            }
            for d in out.checkin { delivered["checkin." + kind(d.kind), default: 0] += 1 }
        }

        init(seed: UInt64) {
            secrets = TestSecrets(seed: seed)
            dice = TestSecrets(seed: seed &* 7919 &+ 13)
        }

        func roll(_ n: Int) -> Int { dice.roll(n) }
        func unit() -> Double { dice.unit() }

        /// A point in the small square every subscription looks at.
        func point() -> GeoPoint { GeoPoint(lat: unit(), lon: unit()) }

        func anyPin() -> PinID? {
            let ids = w.map.pinIDs.sorted()
            return ids.isEmpty ? nil : ids[roll(ids.count)]
        }

        func anyStream() -> StreamID? {
            let ids = streams.keys.sorted()
            return ids.isEmpty ? nil : ids[roll(ids.count)]
        }

        func anyCircle() -> CircleID? {
            let ids = circles.keys.sorted()
            return ids.isEmpty ? nil : ids[roll(ids.count)]
        }

        func pick<T>(_ xs: [T]) -> T? { xs.isEmpty ? nil : xs[roll(xs.count)] }

        func connection() -> WatcherID { WatcherID(1 + roll(6)) }

        /// R applies W's records; each must apply, and applying it again must change nothing.
        func replicate(_ records: [(JournalRecord, UInt64?, WatcherID?)], wOut: ReplicaNode.Out, ordered: Bool = true,
                       expected: [ReplicatedOutcome]? = nil,
                       then local: (inout ReplicaNode, inout ReplicaNode.Out) -> Void = { _, _ in }) {
            var rOut = ReplicaNode.Out()
            for (i, (record, base, owner)) in records.enumerated() {
                let outcome = r.apply(record, base: base, owner: owner, out: &rOut)
                #expect(outcome == expected?[i] ?? .applied, "\(record)")
                if case .conflict = outcome { conflicts += 1; continue }
                applied[String(describing: record).prefix(while: { $0 != "(" }).description, default: 0] += 1
                let before = r.stateBytes
                var again = ReplicaNode.Out()
                let second = r.apply(record, base: base, owner: owner, out: &again)
                let unchanged = r.stateBytes == before
                #expect(second != .applied && again.isEmpty && unchanged, "\(record) applied twice: \(second)")
            }
            local(&r, &rOut)
            DeliveryText.expectSame(wOut, rOut, ordered: ordered, "after \(records.map(\.0))")
            if !records.isEmpty { count(wOut) }
        }

        /// C applies an operation's records, as R does.
        func replicateToNode(_ records: [(JournalRecord, UInt64?, WatcherID?)], wOut: ReplicaNode.Out, expected: [ReplicatedOutcome]) {
            var out = ReplicaNode.Out()
            for (i, (record, base, owner)) in records.enumerated() {
                #expect(replication.apply(record, base: base, owner: owner, out: &out) == expected[i], "\(record) on the cluster node")
            }
            DeliveryText.expectSame(wOut, out, ordered: true, "the cluster node, after \(records.map(\.0))")
        }

        /// C's tick at `now`: its local tick, then the decisions it reports applied back as records
        /// (then a local tick again, for the removals they make due): what W's deciding tick did.
        func replicationNodeTicks(wOut: ReplicaNode.Out, decided: [StreamEvent], removed: [StreamID], expired: [Pin], idle: [CircleID]) {
            var out = ReplicaNode.Out()
            var cRemoved: [StreamID] = []
            let early = replication.panic.dueDecisions(now: now)            // before the tick: read from the heaps
            #expect(replication.map.expire(now: now, out: &out.pins).map(\.id) == expired.map(\.id))
            #expect(replication.panic.tick(now: now, out: &out.panic, removed: &cRemoved, deciding: false).isEmpty)
            #expect(replication.checkin.tick(now: now, out: &out.checkin) == idle)
            let decisions = replication.panic.dueDecisions(now: now)         // after it: from the entries it set aside
            #expect(early == decided && decisions == decided)
            for d in decisions {
                #expect(replication.apply(.panicEvent(d.stream, d.event), base: nil, owner: nil, out: &out) == .applied)
            }
            #expect(replication.panic.tick(now: now, out: &out.panic, removed: &cRemoved, deciding: false).isEmpty)
            #expect(replication.panic.dueDecisions(now: now).isEmpty)
            #expect(Set(cRemoved) == Set(removed))
            DeliveryText.expectSame(wOut, out, ordered: false, "the cluster node's tick")
            if !decided.isEmpty { decisionsTaken += decided.count }
        }
        var decisionsTaken = 0

        /// The lead's flow on the writer's node: the change made by the hub's own operation (which
        /// validated it) is taken back, then its record is applied as on every node. The state is
        /// then the one the operation made, and the record delivers what the operation delivered;
        /// or, when the record is a conflict (an edit too near an expiry), the state before the
        /// operation and nothing delivered. Returns the outcomes, which every node must share.
        func writerTakesBackAndApplies(_ records: [(JournalRecord, UInt64?, WatcherID?)], undo: (inout ReplicaNode) -> Void,
                                       validated: ReplicaNode.Out, before: [UInt8]) -> [ReplicatedOutcome] {
            let direct = w.stateBytes
            undo(&w)
            var out = ReplicaNode.Out()
            let outcomes = records.map { record, base, owner in w.apply(record, base: base, owner: owner, out: &out) }
            if outcomes.allSatisfy({ $0 == .applied }) {
                let same = w.stateBytes == direct
                #expect(same, "the writer's state after taking back and applying differs from the operation's")
                DeliveryText.expectSame(validated, out, ordered: true, "the writer's own \(records.map(\.0))")
            } else {
                let same = w.stateBytes == before
                #expect(same && out.isEmpty, "a conflict left the writer's state changed")
            }
            return outcomes
        }
        var conflicts = 0

        /// Time passes on both nodes: pins expire, and the hubs' clocks run.
        func tick() {
            var wOut = ReplicaNode.Out()
            let expired = w.map.expire(now: now, out: &wOut.pins)
            var removed: [StreamID] = []
            let decided = w.panic.tick(now: now, out: &wOut.panic, removed: &removed)
            let wIdle = w.checkin.tick(now: now, out: &wOut.checkin)
            let records = decided.map { (JournalRecord.panicEvent($0.stream, $0.event), UInt64?.none, WatcherID?.none) }
                + removed.map { (JournalRecord.panicRemove($0), UInt64?.none, WatcherID?.none) }
            let now = self.now
            replicate(records, wOut: wOut, ordered: false) { r, rOut in
                #expect(r.map.expire(now: now, out: &rOut.pins).map(\.id) == expired.map(\.id))
                var rRemoved: [StreamID] = []
                #expect(r.panic.tick(now: now, out: &rOut.panic, removed: &rRemoved).isEmpty)   // decided by W, applied above
                #expect(rRemoved.isEmpty)
                #expect(r.checkin.tick(now: now, out: &rOut.checkin) == wIdle)
            }
            replicationNodeTicks(wOut: wOut, decided: decided, removed: removed, expired: expired, idle: wIdle)
            for id in removed { streams[id] = nil }
            for id in wIdle { circles[id] = nil }
        }

        /// A local operation (connections come and go) on both nodes alike.
        func both(_ body: (inout ReplicaNode, inout ReplicaNode.Out) -> Void) {
            var wOut = ReplicaNode.Out(), rOut = ReplicaNode.Out()
            var cOut = ReplicaNode.Out()
            body(&w, &wOut)
            body(&r, &rOut)
            body(&replication, &cOut)
            DeliveryText.expectSame(wOut, rOut, ordered: true, "local operation")
            DeliveryText.expectSame(wOut, cOut, ordered: true, "local operation on the cluster node")
        }

        func step() {
            now += 1 + Int64(roll(4_000))
            tick()
            var out = ReplicaNode.Out()
            let stateBefore = w.stateBytes
            var records: [(JournalRecord, UInt64?, WatcherID?)] = []
            // How the writer's node takes the change back (V1Application's undo), before it
            // applies the change's record like every node.
            var undo: (inout ReplicaNode) -> Void = { _ in }
            let c = connection()
            switch roll(43) {
            case 0, 1, 2:   // subscribe, on both nodes
                let south = unit() * 0.8, west = unit() * 0.8
                let area = GeoArea.box(GeoBox(south: south, west: west, north: south + 0.1 + unit() * 0.5, east: west + 0.1 + unit() * 0.5))
                let mask: UInt64? = roll(3) == 0 ? UInt64(1 + roll(31)) : nil
                let viewer: GeoPoint? = roll(3) == 0 ? point() : nil
                both { n, _ in _ = n.map.subscribe(Int32(c), area: area, categories: mask, viewer: viewer) }
            case 3:
                both { n, _ in n.map.unsubscribe(Int32(c)) }
            case 4, 5, 6:
                let draft = PinDraft(point: point(), title: "pin \(roll(100))", description: roll(2) == 0 ? "" : "d",
                                     category: ReplicaNode.pinSettings.categories[roll(5)], ttlSeconds: 60 + roll(300),
                                     rangeMeters: roll(4) == 0 ? 1_000 + roll(80_000) : nil)
                let id = PinID(random: secrets.randomBytes(16))
                if case .success(let pin) = w.map.create(draft, id: id, editDigest: secrets.digest(ofToken: "edit-\(id)"), now: now, out: &out.pins) {
                    records.append((.pinPut(pin), nil, nil))
                    undo = { $0.map.revertPin(id, to: nil) }
                }
            case 7, 8, 9:
                guard let id = anyPin(), let before = w.map.store[id] else { break }
                var changes = PinChanges()
                if roll(2) == 0 { changes.lat = unit() }
                if roll(3) == 0 { changes.lon = unit() }
                if roll(3) == 0 { changes.title = "edited \(roll(100))" }
                if roll(3) == 0 { changes.category = ReplicaNode.pinSettings.categories[roll(5)] }
                if roll(4) == 0 { changes.ttlSeconds = 60 + roll(300) }
                if roll(4) == 0 { changes.range = roll(2) == 0 ? .remove : .set(1_000 + roll(80_000)) }
                if case .success(let pin) = w.map.update(id, digest: secrets.digest(ofToken: "edit-\(id)"), changes: changes, now: now, out: &out.pins) {
                    records.append((.pinPut(pin), UInt64(bitPattern: before.updatedAt), nil))
                    undo = { $0.map.revertPin(id, to: before) }
                }
            case 10:
                guard let id = anyPin(), let before = w.map.store[id] else { break }
                if case .success = w.map.delete(id, digest: secrets.digest(ofToken: "edit-\(id)"), out: &out.pins) {
                    records.append((.pinRemove(id), nil, nil))
                    undo = { $0.map.revertPin(id, to: before) }
                }
            case 11, 12, 13, 36, 37, 38, 39:
                guard let id = anyPin() else { break }
                let voter = UInt64(1 + roll(6)), value: Int8 = roll(4) == 0 ? 1 : -1
                let previous = w.map.store[id]?.votes[voter]
                // A vote that flags the pin is published as the vote (the lead's glue), not a removal.
                if case .success(let vote) = w.map.vote(id, voter: voter, value: value, out: &out.pins), vote.change != .unchanged {
                    records.append((.pinVote(id, voter: voter, value: value), nil, nil))
                    let flagged = vote.change == .flagged ? vote.pin : nil
                    undo = { $0.map.revertVote(id, voter: voter, previous: previous, flagged: flagged) }
                }
            case 14, 15:
                let timer: PanicTimer? = roll(3) == 0 ? .inSeconds(Int64(5 + roll(60))) : nil
                if case .success(let started) = w.panic.start(owner: c, status: timer == nil && roll(2) == 0 ? .red : .amber, location: location(),
                                                              note: roll(2) == 0 ? nil : "note", watchers: 1 + roll(2), timer: timer,
                                                              secrets: secrets, now: now, out: &out.panic) {
                    streams[started.stream.id] = StreamTokens(owner: started.ownerToken, live: started.watchTokens)
                    records.append((.panicStart(started.stream), nil, c))
                    undo = { $0.panic.revertStart(started.stream.id) }
                }
            case 16, 17, 30, 31, 32:
                guard let id = anyStream(), let t = streams[id], let checkpoint = w.panic.checkpoint(id) else { break }
                undo = { $0.panic.revert(to: checkpoint, connected: { _ in true }) }
                let by = w.panic.stream(id)?.owner ?? c
                let token: String? = roll(4) == 0 ? nil : t.owner
                var event: PanicEvent?
                switch roll(6) {
                case 0, 1:
                    if case .success = w.panic.update(id, by: by, ownerToken: token, location: location(), secrets: secrets, now: now, out: &out.panic) {
                        event = w.panic.stream(id)?.latestEvent
                    }
                case 2:
                    let status: PanicStatus = roll(2) == 0 ? .red : .amber
                    if case .success(let change) = w.panic.setStatus(id, by: by, ownerToken: token, status: status, secrets: secrets, now: now, out: &out.panic) {
                        event = change.event
                    }
                case 3, 4:
                    let timer: PanicTimer = roll(3) == 0 ? .cancel : .inSeconds(Int64(5 + roll(60)))
                    if case .success(let change) = w.panic.setTimer(id, by: by, ownerToken: token, timer: timer, secrets: secrets, now: now, out: &out.panic) {
                        event = change.event
                    }
                default:
                    if roll(3) == 0, case .success = w.panic.end(id, by: by, ownerToken: token, reason: roll(2) == 0 ? .safe : .cancelled,
                                                                  secrets: secrets, now: now, out: &out.panic) {
                        event = w.panic.stream(id)?.latestEvent
                    }
                }
                if let event { records.append((.panicEvent(id, event), nil, nil)) }
            case 18:
                guard let id = anyStream(), let t = streams[id], let checkpoint = w.panic.checkpoint(id) else { break }
                undo = { $0.panic.revert(to: checkpoint, connected: { _ in true }) }
                if case .success(let token) = w.panic.invite(id, by: c, ownerToken: t.owner, secrets: secrets) {
                    streams[id]?.live.append(token)
                    records.append((.panicInvite(id, secrets.digest(ofToken: token)), nil, nil))
                }
            case 19:
                guard let id = anyStream(), let t = streams[id], !t.live.isEmpty,
                      let checkpoint = w.panic.checkpoint(id, keepingWatchers: true) else { break }
                undo = { $0.panic.revert(to: checkpoint, connected: { _ in true }) }
                let token = t.live[roll(t.live.count)]
                if case .success(.revoked) = w.panic.revoke(id, by: c, ownerToken: t.owner, watchToken: token, secrets: secrets, out: &out.panic) {
                    streams[id]?.live.removeAll { $0 == token }
                    streams[id]?.dead.append(token)
                    records.append((.panicRevoke(id, secrets.digest(ofToken: token)), nil, nil))
                }
            case 20, 21, 33, 34, 35:   // watchers come and go, on both nodes
                guard let id = anyStream(), let t = streams[id] else { break }
                let tokens = roll(4) == 0 ? t.live + t.dead : t.live
                guard let token = pick(tokens) else { break }
                let secrets = self.secrets
                switch roll(6) {
                case 0: both { n, o in n.panic.unwatch(id, watcher: c, out: &o.panic) }
                case 1: both { n, o in n.panic.disconnected(c, out: &o.panic); n.checkin.disconnected(c) }
                case 2: both { n, _ in _ = n.panic.resume(id, by: c, ownerToken: t.owner, secrets: secrets) }
                default: both { n, o in _ = n.panic.watch(id, watcher: c, watchToken: token, since: nil, secrets: secrets, out: &o.panic) }
                }
            case 22:
                let labels: [String?] = (0..<roll(3)).map { $0 == 0 ? nil : "member \($0)" }
                if case .success(let created) = w.checkin.create(owner: c, labels: labels, secrets: secrets, now: now) {
                    let members = Dictionary(uniqueKeysWithValues: created.circle.members.map(\.id).enumerated().map { ($1, created.memberTokens[$0]) })
                    circles[created.circle.id] = CircleTokens(owner: created.ownerToken, members: members)
                    records.append((.circlePut(created.circle), nil, c))
                    undo = { $0.checkin.revert(to: .created(created.circle.id), connected: { _ in true }) }
                }
            case 23, 24, 25, 26:
                guard let id = anyCircle(), let t = circles[id], let before = w.checkin.circle(id) else { break }
                let base = before.revision
                let checkpoint = w.checkin.checkpoint(id)
                undo = { $0.checkin.revert(to: checkpoint, connected: { _ in true }) }
                var changed: CheckinCircle?
                switch roll(6) {
                case 0:
                    if case .success(let invited) = w.checkin.invite(id, ownerToken: t.owner, label: roll(2) == 0 ? nil : "new", secrets: secrets, now: now) {
                        circles[id]?.members[invited.member.id] = invited.token
                        changed = invited.circle
                    }
                case 1:
                    guard let member = pick(t.members.keys.sorted()) else { break }
                    if case .success(let c?) = w.checkin.revoke(id, ownerToken: t.owner, member: member, secrets: secrets, now: now, out: &out.checkin) {
                        circles[id]?.revoked.append(t.members[member]!)
                        circles[id]?.members[member] = nil
                        changed = c
                    }
                case 2, 3:
                    guard let token = pick(t.members.values.sorted()) else { break }
                    if case .success(let asked) = w.checkin.request(id, memberToken: token, secrets: secrets, now: now, out: &out.checkin) {
                        changed = asked.circle
                    }
                case 4:
                    if case .success(let c) = w.checkin.answer(id, ownerToken: t.owner, note: roll(2) == 0 ? nil : "fine", secrets: secrets, now: now, out: &out.checkin) {
                        changed = c
                    }
                default:
                    let change: CheckinHomeChange = roll(3) == 0 ? .clear : .forSeconds(Int64(5 + roll(50)))
                    if case .success(let c?) = w.checkin.setHome(id, ownerToken: t.owner, change: change, secrets: secrets, now: now, out: &out.checkin) {
                        changed = c
                    }
                }
                if let changed { records.append((.circlePut(changed), base, nil)) }
            case 27:
                guard let id = anyCircle(), let t = circles[id] else { break }
                let checkpoint = w.checkin.checkpoint(id)
                undo = { $0.checkin.revert(to: checkpoint, connected: { _ in true }) }
                if case .success = w.checkin.close(id, ownerToken: t.owner, secrets: secrets, out: &out.checkin) {
                    circles[id] = nil
                    records.append((.circleRemove(id), nil, nil))
                }
            default:   // listeners come and go, on both nodes
                guard let id = anyCircle(), let t = circles[id] else { break }
                let secrets = self.secrets
                let tokens = Array(t.members.values.sorted()) + t.revoked
                switch roll(4) {
                case 0: both { n, _ in _ = n.checkin.open(id, by: c, ownerToken: t.owner, secrets: secrets) }
                case 1: both { n, _ in n.checkin.leave(id, by: c) }
                default:
                    guard !tokens.isEmpty else { break }
                    let token = tokens[roll(tokens.count)]
                    both { n, _ in _ = n.checkin.join(id, by: c, memberToken: token, secrets: secrets) }
                }
            }
            if !records.isEmpty {
                let outcomes = writerTakesBackAndApplies(records, undo: undo, validated: out, before: stateBefore)
                let delivered = outcomes.allSatisfy { $0 == .applied } ? out : ReplicaNode.Out()
                replicate(records, wOut: delivered, expected: outcomes)
                replicateToNode(records, wOut: delivered, expected: outcomes)
            } else {
                #expect(out.isEmpty)
            }
            let wState = w.stateBytes
            let same = wState == r.stateBytes, sameOnEveryNode = wState == replication.stateBytes   // not in the #expect: it would print both snapshots
            #expect(same, "the replica's state differs from the writer's")
            #expect(sameOnEveryNode, "the cluster node's state differs from the writer's")
        }

        func location() -> PanicLocation { PanicLocation(lat: unit(), lon: unit(), accuracyM: roll(2) == 0 ? nil : 10) }
    }

    /// Six seeds of 1,500 steps each; together they must have made every kind of record and
    /// every kind of delivery, or the comparison proved less than it claims.
    @Test func aReplicaApplyingTheRecordsIsTheWriter() {
        var applied: [String: Int] = [:], delivered: [String: Int] = [:]
        var decisions = 0, conflicts = 0
        for seed in 1...6 as ClosedRange<UInt64> {
            let run = Run(seed: seed)
            for _ in 0..<1_500 { run.step() }
            applied.merge(run.applied, uniquingKeysWith: +)
            delivered.merge(run.delivered, uniquingKeysWith: +)
            decisions += run.decisionsTaken
            conflicts += run.conflicts
        }
        #expect(decisions > 20, "the cluster node took \(decisions) decisions through the log")
        #expect(conflicts > 0, "no record was a conflict (an edit racing an expiry)")
        for kind in ["pinPut", "pinRemove", "pinVote", "panicStart", "panicEvent", "panicInvite", "panicRevoke", "panicRemove", "circlePut",
                     "circleRemove"] {
            #expect(applied[kind, default: 0] > 0, "no \(kind) record: \(applied)")
        }
        for kind in ["pin.added", "pin.updated", "pin.moved", "pin.flagged", "pin.removed", "panic.event.location", "panic.event.status",
                     "panic.event.ended", "panic.event.timer", "panic.event.missedCheckIn", "panic.revoked", "panic.watchers",
                     "checkin.requested", "checkin.answered", "checkin.home", "checkin.revoked", "checkin.closed"] {
            #expect(delivered[kind, default: 0] > 0, "no \(kind) delivered from a record: \(delivered)")
        }
    }
}
