import Testing
import VigilGeo
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// Writers racing, as in a cluster: each step, two writer nodes validate random operations against
/// the state they have applied (not each other's records of the step, nor their own: those are
/// still in flight), the records are merged into one stream in a random order, and every node
/// (the two writers and an observer) applies the whole stream. Every node must reach the same
/// outcome for every record, deliver the same to the same (identical) subscribers, watchers and
/// listeners, and hold the same state, byte for byte. Time is the cluster's: every node ticks at
/// the same `now` without deciding, and one node (or both: copies are duplicates) publishes what
/// `dueDecisions` reports.
@Suite struct ReplicatedConvergenceTests {
    final class Cluster {
        var nodes = [ReplicaNode(), ReplicaNode(), ReplicaNode()]     // writers 0 and 1, observer 2
        let secrets: TestSecrets
        let dice: TestSecrets
        var now: Int64 = 1_700_000_000_000
        var pinTokens: [PinID: String] = [:]
        var streamTokens: [StreamID: (owner: String, watch: [String])] = [:]
        var circleTokens: [CircleID: (owner: String, members: [UInt32: String])] = [:]
        var outcomes: [String: Int] = [:]

        init(seed: UInt64) {
            secrets = TestSecrets(seed: seed)
            dice = TestSecrets(seed: seed &* 104_729 &+ 7)
        }

        func roll(_ n: Int) -> Int { dice.roll(n) }
        func unit() -> Double { dice.unit() }
        func pick<T>(_ xs: [T]) -> T? { xs.isEmpty ? nil : xs[roll(xs.count)] }

        /// Runs `body` on every node, expecting the same deliveries from each.
        func everywhere(_ what: String, _ body: (inout ReplicaNode, inout ReplicaNode.Out) -> Void) {
            var outs: [ReplicaNode.Out] = []
            for i in nodes.indices {
                var out = ReplicaNode.Out()
                body(&nodes[i], &out)
                outs.append(out)
            }
            for out in outs.dropFirst() { DeliveryText.expectSame(outs[0], out, ordered: true, what) }
        }

        /// One operation validated on a copy of writer `w`'s state: its record and `base`, if it changed anything.
        func validate(on w: Int) -> (JournalRecord, UInt64?)? {
            var node = nodes[w]           // the change is made on a copy: the writer's own state waits for the record
            var out = ReplicaNode.Out()
            let pinIDs = node.map.pinIDs.sorted(), streams = streamTokens.keys.sorted(), circles = circleTokens.keys.sorted()
            switch roll(12) {
            case 0:
                let id = PinID(random: secrets.randomBytes(16)), token = "edit-\(id)"
                let draft = PinDraft(point: GeoPoint(lat: unit(), lon: unit()), title: "p", description: "", category: "general",
                                     ttlSeconds: 60 + roll(240))
                guard case .success(let pin) = node.map.create(draft, id: id, editDigest: secrets.digest(ofToken: token), now: now, out: &out.pins) else { return nil }
                pinTokens[id] = token
                return (.pinPut(pin), nil)
            case 1, 2:
                guard let id = pick(pinIDs), let before = node.map.store[id] else { return nil }
                let changes = roll(2) == 0 ? PinChanges(lat: unit()) : PinChanges(title: "t\(roll(9))", ttlSeconds: 60 + roll(240))
                guard case .success(let pin) = node.map.update(id, digest: secrets.digest(ofToken: pinTokens[id]!), changes: changes, now: now,
                                                              out: &out.pins) else { return nil }
                return (.pinPut(pin), UInt64(bitPattern: before.updatedAt))
            case 3:
                guard let id = pick(pinIDs) else { return nil }
                if roll(3) == 0 {
                    guard case .success = node.map.delete(id, digest: secrets.digest(ofToken: pinTokens[id]!), out: &out.pins) else { return nil }
                    return (.pinRemove(id), nil)
                }
                let voter = UInt64(1 + roll(5)), value: Int8 = roll(3) == 0 ? 1 : -1
                guard case .success(let vote) = node.map.vote(id, voter: voter, value: value, out: &out.pins), vote.change != .unchanged else { return nil }
                return (.pinVote(id, voter: voter, value: value), nil)
            case 4:
                let timer: PanicTimer? = roll(2) == 0 ? .inSeconds(Int64(5 + roll(40))) : nil
                guard case .success(let s) = node.panic.start(owner: 99, status: .amber, location: PanicLocation(lat: unit(), lon: unit()), note: nil,
                                                              watchers: 1, timer: timer, secrets: secrets, now: now, out: &out.panic) else { return nil }
                streamTokens[s.stream.id] = (s.ownerToken, s.watchTokens)
                return (.panicStart(s.stream), nil)
            case 5, 6:
                guard let id = pick(streams), let t = streamTokens[id] else { return nil }
                switch roll(5) {
                case 0:
                    guard case .success(let token) = node.panic.invite(id, by: 99, ownerToken: t.owner, secrets: secrets) else { return nil }
                    streamTokens[id]?.watch.append(token)
                    return (.panicInvite(id, secrets.digest(ofToken: token)), nil)
                case 1:
                    guard let token = pick(t.watch),
                          case .success(.revoked) = node.panic.revoke(id, by: 99, ownerToken: t.owner, watchToken: token, secrets: secrets, out: &out.panic)
                    else { return nil }
                    return (.panicRevoke(id, secrets.digest(ofToken: token)), nil)
                case 2:
                    guard case .success(let c) = node.panic.setTimer(id, by: 99, ownerToken: t.owner, timer: .inSeconds(Int64(5 + roll(40))),
                                                                    secrets: secrets, now: now, out: &out.panic), let e = c.event else { return nil }
                    return (.panicEvent(id, e), nil)
                case 3:
                    guard case .success = node.panic.end(id, by: 99, ownerToken: t.owner, reason: .safe, secrets: secrets, now: now, out: &out.panic),
                          let e = node.panic.stream(id)?.latestEvent else { return nil }
                    return (.panicEvent(id, e), nil)
                default:
                    guard case .success = node.panic.update(id, by: 99, ownerToken: t.owner, location: PanicLocation(lat: unit(), lon: unit()),
                                                            secrets: secrets, now: now, out: &out.panic),
                          let e = node.panic.stream(id)?.latestEvent else { return nil }
                    return (.panicEvent(id, e), nil)
                }
            case 7:
                guard case .success(let c) = node.checkin.create(owner: 99, labels: [nil, "b"], secrets: secrets, now: now) else { return nil }
                circleTokens[c.circle.id] = (c.ownerToken, [1: c.memberTokens[0], 2: c.memberTokens[1]])
                return (.circlePut(c.circle), nil)
            default:
                guard let id = pick(circles), let t = circleTokens[id], let before = node.checkin.circle(id) else { return nil }
                var changed: CheckinCircle?
                switch roll(5) {
                case 0:
                    if case .success(let i) = node.checkin.invite(id, ownerToken: t.owner, label: nil, secrets: secrets, now: now) {
                        circleTokens[id]?.members[i.member.id] = i.token
                        changed = i.circle
                    }
                case 1:
                    if let m = pick(t.members.keys.sorted()),
                       case .success(let c?) = node.checkin.revoke(id, ownerToken: t.owner, member: m, secrets: secrets, now: now, out: &out.checkin) {
                        changed = c
                    }
                case 2:
                    if case .success(let c) = node.checkin.answer(id, ownerToken: t.owner, note: nil, secrets: secrets, now: now, out: &out.checkin) { changed = c }
                case 3:
                    if case .success(let c?) = node.checkin.setHome(id, ownerToken: t.owner, change: .forSeconds(Int64(5 + roll(30))), secrets: secrets,
                                                                   now: now, out: &out.checkin) { changed = c }
                default:
                    if let token = pick(t.members.values.sorted()),
                       case .success(let a) = node.checkin.request(id, memberToken: token, secrets: secrets, now: now, out: &out.checkin) { changed = a.circle }
                }
                return changed.map { (.circlePut($0), before.revision) }
            }
        }

        func step() {
            now += 1 + Int64(roll(3_000))
            var decisions: [[StreamEvent]] = []
            everywhere("local tick") { node, out in
                node.map.expire(now: now, out: &out.pins)
                var removed: [StreamID] = []
                _ = node.panic.tick(now: now, out: &out.panic, removed: &removed, deciding: false)
                _ = node.checkin.tick(now: now, out: &out.checkin)
                decisions.append(node.panic.dueDecisions(now: now))
            }
            #expect(decisions.allSatisfy { $0 == decisions[0] }, "nodes disagree on what is due")
            // One node publishes the decisions, or both writers do.
            var stream: [(JournalRecord, UInt64?)] = decisions[0].map { (.panicEvent($0.stream, $0.event), nil) }
            if roll(2) == 0 { stream += stream }
            var inFlight: [[(JournalRecord, UInt64?)]] = [[], []]
            for w in 0..<2 {
                for _ in 0..<roll(3) { if let change = validate(on: w) { inFlight[w].append(change) } }
            }
            // The stream interleaves the writers' records in any order that keeps each writer's own.
            while !inFlight[0].isEmpty || !inFlight[1].isEmpty {
                let w = inFlight[0].isEmpty ? 1 : inFlight[1].isEmpty ? 0 : roll(2)
                stream.append(inFlight[w].removeFirst())
            }
            for (record, base) in stream {
                var results: [ReplicatedOutcome] = []
                everywhere("\(record)") { node, out in results.append(node.apply(record, base: base, owner: nil, out: &out)) }
                #expect(results.allSatisfy { $0 == results[0] }, "nodes disagree on \(record): \(results)")
                let name: String
                switch results[0] {
                case .applied: name = "applied"
                case .duplicate: name = "duplicate"
                case .conflict: name = "conflict"
                }
                outcomes[name, default: 0] += 1
            }
            // Connections come and go, on every node alike.
            let c = WatcherID(1 + roll(4))
            if let id = pick(streamTokens.keys.sorted()), let token = pick(streamTokens[id]!.watch), roll(2) == 0 {
                let secrets = self.secrets
                everywhere("watch") { node, out in _ = node.panic.watch(id, watcher: c, watchToken: token, since: nil, secrets: secrets, out: &out.panic) }
            }
            if let id = pick(circleTokens.keys.sorted()), let token = pick(circleTokens[id]!.members.values.sorted()), roll(2) == 0 {
                let secrets = self.secrets
                everywhere("join") { node, _ in _ = node.checkin.join(id, by: c, memberToken: token, secrets: secrets) }
            }
            if roll(4) == 0 {
                let south = unit() * 0.7, west = unit() * 0.7
                everywhere("subscribe") { node, _ in _ = node.map.subscribe(Int32(c), area: .box(GeoBox(south: south, west: west, north: south + 0.3, east: west + 0.3)), categories: nil) }
            }
            let states = nodes.map(\.stateBytes)
            let same = states.allSatisfy { $0 == states[0] }
            #expect(same, "the nodes' states differ")
        }
    }

    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func racingWritersConverge(seed: UInt64) {
        let replication = Cluster(seed: seed)
        for _ in 0..<800 { replication.step() }
        // Races happened and were settled: some records lost theirs, some came twice.
        #expect(replication.outcomes["applied", default: 0] > 200, "\(replication.outcomes)")
        #expect(replication.outcomes["conflict", default: 0] > 5, "\(replication.outcomes)")
        #expect(replication.outcomes["duplicate", default: 0] > 5, "\(replication.outcomes)")
    }
}
