import Testing
import VigilGeo
@testable import VigilCore
import VigilTestSupport

/// Cluster counts kept incrementally must equal a recount after every change, and a cluster
/// subscriber that applies its reply and then each `clusters.changed` must see the counts a fresh
/// subscribe would show.
@Suite struct ClusterCountsTests {
    static func expectExact(_ hub: MapHub, _ step: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let kept = hub.store.clusterCountsByName()
        #expect(!kept.isEmpty || hub.store.count == 0)
        #expect(kept == hub.store.clusterCountsByName(recount: true), "counts differ from a recount after \(step)", sourceLocation: sourceLocation)
    }

    /// What a subscriber believes: its reply's cells, then each update applied (count 0 removes).
    struct View {
        var cells: [UInt64: ClusterCell] = [:]
        mutating func apply(_ update: [ClusterCell]) {
            for c in update { cells[c.cell.key] = c.count == 0 ? nil : c }
        }
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func countsEqualARecountAfterEveryChangeAndSubscribersConverge(seed: UInt64) {
        var settings = PinSettings()
        settings.voteFlagThreshold = 2
        settings.maxPins = 300
        settings.clusterIntervalMs = 1_000
        var hub = MapHub(settings: settings)
        let secrets = TestSecrets(seed: seed)
        let dice = TestSecrets(seed: seed &* 31 &+ 7)
        // A small region, so pins share cells at every precision, and a few far away.
        func point() -> GeoPoint {
            dice.roll(10) == 0 ? GeoPoint(lat: dice.unit() * 160 - 80, lon: dice.unit() * 360 - 180)
                               : GeoPoint(lat: 52 + dice.unit() * 0.5, lon: 13 + dice.unit() * 0.5)
        }
        let categories = settings.categories
        var now: Int64 = 1_700_000_000_000
        var monotonic: Int64 = 0
        var tokens: [PinID: String] = [:]
        var out: [PinDelivery] = []
        let country = GeoArea.box(GeoBox(south: 47, west: 5, north: 55, east: 15))
        let city = GeoArea.box(GeoBox(south: 52.1, west: 13.1, north: 52.4, east: 13.4))
        let hazardOnly: UInt64 = 1 << UInt64(settings.categoryIndex("hazard")!)
        var views = [View(), View(), View()]
        let subs: [(MapHub.SubscriberID, GeoArea, UInt64?)] = [(1, country, nil), (2, city, nil), (3, country, hazardOnly)]
        for (i, s) in subs.enumerated() {
            views[i].apply(hub.subscribeClusters(s.0, area: s.1, categories: s.2, now: monotonic).cells)
        }
        var reverts = 0, expiries = 0, flags = 0
        for step in 0..<1_500 {
            now += Int64(dice.roll(20_000))
            monotonic += Int64(dice.roll(400))
            let ids = Array(tokens.keys)
            let pick = ids.isEmpty ? nil : ids[dice.roll(ids.count)]
            let op = dice.roll(100)
            var label = ""
            if op < 30 || pick == nil {
                let token = "t\(step)"
                let d = PinDraft(point: point(), title: "p", description: "", category: categories[dice.roll(categories.count)],
                                 ttlSeconds: 60 + dice.roll(600))
                if case .success(let pin) = hub.create(d, id: PinID(random: secrets.randomBytes(16)), editDigest: secrets.digest(ofToken: token), now: now, out: &out) {
                    tokens[pin.id] = token
                    label = "create"
                    if dice.roll(10) == 0 {            // the journal failed: taken back
                        hub.revertPin(pin.id, to: nil)
                        tokens[pin.id] = nil
                        reverts += 1
                        label = "create reverted"
                    }
                }
            } else if let id = pick, op < 65 {
                let before = hub.store[id]
                var changes = PinChanges()
                switch dice.roll(4) {
                case 0: let p = point(); changes.lat = p.lat; changes.lon = p.lon
                case 1: changes.lat = (before?.point.lat ?? 0) + 0.000_001        // within its full-precision cell
                case 2: changes.category = categories[dice.roll(categories.count)]
                default: changes.title = "renamed"
                }
                _ = hub.update(id, digest: secrets.digest(ofToken: tokens[id]!), changes: changes, now: now, out: &out)
                label = "update"
                if dice.roll(8) == 0 { hub.revertPin(id, to: before); reverts += 1; label = "update reverted" }
            } else if let id = pick, op < 75 {
                let before = hub.store[id]
                _ = hub.delete(id, digest: secrets.digest(ofToken: tokens[id]!), out: &out)
                tokens[id] = nil
                label = "delete"
                if dice.roll(6) == 0 { hub.revertPin(id, to: before); tokens[id] = "restored"; reverts += 1; label = "delete reverted" }
                if label == "delete reverted" { tokens[id] = nil; hub.revertPin(id, to: nil) }   // keep the token table simple
            } else if let id = pick, op < 90 {
                let voter = UInt64(dice.roll(4))
                let previous = hub.store[id]?.votes[voter]
                if case .success(let outcome) = hub.vote(id, voter: voter, value: -1, out: &out) {
                    label = "vote"
                    if outcome.change == .flagged { tokens[id] = nil; flags += 1 }
                    if dice.roll(8) == 0 {
                        hub.revertVote(id, voter: voter, previous: previous, flagged: outcome.change == .flagged ? outcome.pin : nil)
                        if outcome.change == .flagged { hub.revertPin(id, to: nil) }      // its token was dropped
                        reverts += 1
                        label = "vote reverted"
                    }
                }
            } else {
                now += 300_000
                let gone = hub.expire(now: now, out: &out)
                for pin in gone { tokens[pin.id] = nil }
                expiries += gone.count
                label = "expiry"
            }
            out.removeAll()
            Self.expectExact(hub, "step \(step) (\(label))")
            for update in hub.takeClusterUpdates(now: monotonic) {
                views[Int(update.subscriber) - 1].apply(update.cells)
            }
            #expect(hub.clusterSubscriptions.inconsistency() == nil, "step \(step)")
        }
        #expect(reverts > 20 && expiries > 20 && flags > 0, "the run exercised reverts, expiries and flags")
        // A few live hazard pins in the city, so that no view ends empty.
        for i in 0..<5 {
            let d = PinDraft(point: GeoPoint(lat: 52.2 + Double(i) * 0.01, lon: 13.2), title: "p", description: "", category: "hazard", ttlSeconds: 600)
            _ = hub.create(d, id: PinID(random: secrets.randomBytes(16)), editDigest: secrets.digest(ofToken: "end"), now: now, out: &out)
        }
        Self.expectExact(hub, "the last creates")
        // Every subscriber's slot comes; then each view equals a fresh subscribe's.
        monotonic += Int64(settings.clusterIntervalMs)
        for update in hub.takeClusterUpdates(now: monotonic) { views[Int(update.subscriber) - 1].apply(update.cells) }
        for (i, s) in subs.enumerated() {
            let fresh = hub.subscribeClusters(100 + s.0, area: s.1, categories: s.2, now: monotonic)
            #expect(views[i].cells == Dictionary(uniqueKeysWithValues: fresh.cells.map { ($0.cell.key, $0) }), "subscriber \(s.0) converged")
            #expect(!fresh.cells.isEmpty)
        }
    }

    /// A pin created at `now` 1,000 with the edit token "x".
    @discardableResult
    static func create(_ hub: inout MapHub, _ lat: Double, _ lon: Double, category: String = "general", secrets: TestSecrets) -> Pin {
        var out: [PinDelivery] = []
        return try! hub.create(PinDraft(point: GeoPoint(lat: lat, lon: lon), title: "t", description: "", category: category, ttlSeconds: 600),
                               id: PinID(random: secrets.randomBytes(16)), editDigest: secrets.digest(ofToken: "x"), now: 1_000, out: &out).get()
    }

    @Test func changesAreBatchedAtMostOncePerIntervalPerSubscriber() {
        var settings = PinSettings()
        settings.clusterIntervalMs = 1_000
        var hub = MapHub(settings: settings)
        let secrets = TestSecrets()
        var out: [PinDelivery] = []
        let area = GeoArea.box(GeoBox(south: 47, west: 5, north: 55, east: 15))
        let reply = hub.subscribeClusters(1, area: area, categories: nil, now: 0)
        #expect(reply.cells.isEmpty && reply.precision >= 1)
        func create(_ lat: Double, _ lon: Double, category: String = "general") -> Pin {
            Self.create(&hub, lat, lon, category: category, secrets: secrets)
        }
        _ = create(52.5, 13.4)
        #expect(hub.takeClusterUpdates(now: 500).isEmpty, "not before the subscriber's slot (a second after its reply)")
        _ = create(52.5001, 13.4001, category: "hazard")
        let first = hub.takeClusterUpdates(now: 1_000)
        #expect(first.count == 1 && first[0].cells.count == 1)
        let cell = first[0].cells[0]
        #expect(cell.count == 2 && cell.byCategory == [CategoryCount(category: "general", count: 1), CategoryCount(category: "hazard", count: 1)])
        #expect(abs(cell.lat - 52.50005) < 1e-9 && abs(cell.lon - 13.40005) < 1e-9)
        #expect(cell.cell == Geohash.cell(GeoPoint(lat: 52.5, lon: 13.4), precision: first[0].precision))
        // The next change waits for the next slot, a full interval after the last message.
        let third = create(52.5002, 13.4002)
        #expect(hub.takeClusterUpdates(now: 1_999).isEmpty)
        #expect(hub.takeClusterUpdates(now: 2_000).map { $0.cells.map(\.count) } == [[3]])
        // A cell that empties is sent with count 0; nothing changed, nothing sent.
        _ = hub.delete(third.id, digest: secrets.digest(ofToken: "x"), out: &out)
        #expect(hub.takeClusterUpdates(now: 3_000).map { $0.cells.map(\.count) } == [[2]])
        #expect(hub.takeClusterUpdates(now: 10_000).isEmpty)
        // Switching to pins ends the counts; switching back starts them afresh.
        _ = hub.subscribe(1, area: area, categories: nil)
        _ = create(50, 10)
        #expect(hub.takeClusterUpdates(now: 20_000).isEmpty && hub.clusterSubscriptions.isEmpty)
        #expect(hub.subscribeClusters(1, area: area, categories: nil, now: 20_000).cells.map(\.count).sorted() == [1, 2])
        #expect(hub.subscriptions.count == 0)
    }

    /// A pin with a reach is seen only by viewers within its range: it never counts in a cluster
    /// (a count and a cell's mean position would show it to anyone). Setting a range takes it out
    /// of the counts, and the subscriber is told; removing the range puts it back.
    @Test func pinsWithARangeAreNeverCounted() throws {
        var hub = MapHub(settings: PinSettings())
        let secrets = TestSecrets()
        var out: [PinDelivery] = []
        let area = GeoArea.box(GeoBox(south: 47, west: 5, north: 55, east: 15))
        _ = hub.subscribeClusters(1, area: area, categories: nil, now: 0)
        let ranged = try hub.create(PinDraft(point: GeoPoint(lat: 52.5, lon: 13.4), title: "r", description: "", category: "general",
                                             ttlSeconds: 600, rangeMeters: 500),
                                    id: PinID(random: secrets.randomBytes(16)), editDigest: secrets.digest(ofToken: "x"), now: 1_000, out: &out).get()
        let plain = Self.create(&hub, 50, 10, secrets: secrets)
        Self.expectExact(hub, "a ranged and a plain pin")
        #expect(hub.takeClusterUpdates(now: 1_000).map { $0.cells.map(\.count) } == [[1]])
        #expect(hub.subscribeClusters(2, area: area, categories: nil, now: 1_000).cells.map(\.count) == [1])
        hub.unsubscribeClusters(2)
        // The range taken away: the pin counts from now on.
        _ = try hub.update(ranged.id, digest: secrets.digest(ofToken: "x"), changes: PinChanges(range: .remove), now: 2_000, out: &out).get()
        Self.expectExact(hub, "range removed")
        #expect(hub.takeClusterUpdates(now: 2_000).map { $0.cells.map(\.count) } == [[1]])
        #expect(hub.subscribeClusters(3, area: area, categories: nil, now: 2_000).cells.map(\.count).sorted() == [1, 1])
        hub.unsubscribeClusters(3)
        // And set again: out of the counts, the subscriber sees its cell empty.
        _ = try hub.update(ranged.id, digest: secrets.digest(ofToken: "x"), changes: PinChanges(range: .set(800)), now: 3_000, out: &out).get()
        Self.expectExact(hub, "range set again")
        #expect(hub.takeClusterUpdates(now: 3_000).map { $0.cells.map(\.count) } == [[0]])
        #expect(hub.subscribeClusters(4, area: area, categories: nil, now: 3_000).cells.map(\.count) == [1])
        hub.unsubscribeClusters(4)
        _ = hub.delete(plain.id, digest: secrets.digest(ofToken: "x"), out: &out)
        #expect(hub.subscribeClusters(5, area: area, categories: nil, now: 3_000).cells.isEmpty)
    }

    /// The interval counts from when a message was handed to its connection, not from the start
    /// of the flush that took it: a subscriber written late in a long flush is not told again
    /// less than an interval later (seen at 10,000 subscribers: gaps of 745 ms at a 1 s interval).
    @Test func theNextSlotCountsFromTheMessageNotFromTheFlush() {
        var hub = MapHub(settings: PinSettings())
        let secrets = TestSecrets()
        let area = GeoArea.box(GeoBox(south: 47, west: 5, north: 55, east: 15))
        _ = hub.subscribeClusters(1, area: area, categories: nil, now: 0)
        Self.create(&hub, 52.5, 13.4, secrets: secrets)
        #expect(hub.takeClusterUpdates(now: 1_000).count == 1)
        hub.clustersSent(1, at: 1_300)                       // the flush reached it 300 ms in
        Self.create(&hub, 50, 10, secrets: secrets)
        #expect(hub.takeClusterUpdates(now: 2_000).isEmpty)
        #expect(hub.takeClusterUpdates(now: 2_299).isEmpty)
        #expect(hub.takeClusterUpdates(now: 2_300).count == 1)
        hub.clustersSent(1, at: 2_000)                       // an earlier time never moves it back
        Self.create(&hub, 51, 11, secrets: secrets)
        #expect(hub.takeClusterUpdates(now: 3_299).isEmpty && hub.takeClusterUpdates(now: 3_300).count == 1)
    }

    @Test func cellsNotSentComeBackATickLaterOrAtTheNextSlot() {
        var settings = PinSettings()
        settings.clusterIntervalMs = 1_000
        var hub = MapHub(settings: settings)
        let secrets = TestSecrets()
        _ = hub.subscribeClusters(1, area: .box(GeoBox(south: 47, west: 5, north: 55, east: 15)), categories: nil, now: 0)
        _ = Self.create(&hub, 52.5, 13.4, secrets: secrets)
        let first = hub.takeClusterUpdates(now: 1_000)
        #expect(first.count == 1)
        // Nothing went out (the reader is behind): tried again 50 ms later, same cells.
        hub.postponeClusters(1, cells: first[0].cells.map(\.cell), now: 1_000, sent: false)
        #expect(hub.takeClusterUpdates(now: 1_049).isEmpty)
        let retried = hub.takeClusterUpdates(now: 1_050)
        #expect(retried.map { $0.cells.map(\.count) } == [[1]])
        // A message went out, cut: the rest waits a whole interval.
        hub.postponeClusters(1, cells: retried[0].cells.map(\.cell), now: 1_050, sent: true)
        #expect(hub.takeClusterUpdates(now: 2_049).isEmpty)
        #expect(hub.takeClusterUpdates(now: 2_050).count == 1)
        #expect(hub.clusterSubscriptions.inconsistency() == nil)
    }

    @Test func aSubscriberNotCountingTheCategoryIsNotTold() {
        var hub = MapHub(settings: PinSettings())
        let secrets = TestSecrets()
        let area = GeoArea.box(GeoBox(south: 47, west: 5, north: 55, east: 15))
        _ = hub.subscribeClusters(1, area: area, categories: 1 << 2, now: 0)     // hazard only
        _ = Self.create(&hub, 52.5, 13.4, secrets: secrets)
        #expect(hub.takeClusterUpdates(now: 5_000).isEmpty)
    }

    @Test func precisionFollowsTheAreaWithinTheBudget() {
        var settings = PinSettings()
        settings.clusterCellBudget = 512
        var hub = MapHub(settings: settings)
        let world = hub.subscribeClusters(1, area: .box(GeoBox(south: -90, west: -180, north: 90, east: 180)), categories: nil, now: 0)
        let country = hub.subscribeClusters(1, area: .box(GeoBox(south: 47, west: 5, north: 55, east: 15)), categories: nil, now: 0)
        let city = hub.subscribeClusters(1, area: .box(GeoBox(south: 52.3, west: 13.1, north: 52.7, east: 13.7)), categories: nil, now: 0)
        #expect(world.precision == 1 && country.precision == 3 && city.precision == 5)
        #expect(hub.clusterSubscriptions.count == 1)
    }
}
