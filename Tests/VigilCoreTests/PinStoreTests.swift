import Testing
import VigilGeo
@testable import VigilCore
import VigilTestSupport

@Suite struct PinStoreTests {
    let secrets = TestSecrets(seed: 17)

    func pin(_ lat: Double, _ lon: Double, expiresAt: Int64 = 10_000) -> Pin {
        Pin(id: PinID(random: secrets.randomBytes(16)), point: GeoPoint(lat: lat, lon: lon), title: "t", description: "",
            category: "general", createdAt: 0, expiresAt: expiresAt, editDigest: secrets.digest(ofToken: "tok"))
    }

    @Test func insertReturnsThePinAsStoredWithTheNextSequence() {
        var store = PinStore()
        let inserted = (0..<5).map { i in store.insert(pin(Double(i), Double(i))) }
        #expect(inserted.map(\.sequence) == [1, 2, 3, 4, 5])
        for returned in inserted {
            let stored = store[returned.id]
            #expect(stored == returned && stored?.sequence == returned.sequence && stored?.cell == returned.cell)
        }
        // Numbering goes on after a removal: sequences are never reused.
        store.remove(inserted[4].id)
        #expect(store.insert(pin(1, 1)).sequence == 6)
    }
}

/// The subscribe query (PinStore+Query.swift) against brute force, and what it costs.
@Suite struct PinStoreQueryTests {
    let secrets = TestSecrets(seed: 23)
    let settings = PinSettings()

    /// The complete answer: every pin inside, of a wanted category, newest first.
    func bruteForce(_ store: PinStore, _ area: GeoArea, _ categories: UInt64) -> [Pin] {
        store.pins.values.filter { pin in
            guard area.contains(pin.point), let bit = settings.categoryIndex(pin.category) else { return false }
            return categories & (1 << UInt64(bit)) != 0
        }.sorted { ($0.createdAt, $0.sequence) > ($1.createdAt, $1.sequence) }
    }

    func query(_ store: PinStore, _ area: GeoArea, _ categories: UInt64, limit: Int, budget: Int) -> PinStore.QueryReport {
        let (precision, cells) = GeohashCover.choose(covering: area, budget: settings.coverCellBudget,
                                                     minPrecision: settings.cellPrecisionMin, maxPrecision: settings.cellPrecisionMax)
        return store.query(area: area, cells: cells, precision: precision, categories: categories, settings: settings,
                           limit: limit, budget: budget)
    }

    /// Every index entry is where its pin is, once per level, the cells in order, no cell empty.
    func indexProblem(_ store: PinStore) -> String? {
        for (key, cell) in store.spatial {
            if cell.isEmpty { return "cell \(key) is kept empty" }
            let entries = cell.entries
            for (a, b) in zip(entries, entries.dropFirst()) where b.precedes(a) { return "cell \(key) out of order" }
            if entries.filter(\.isDead).count != cell.deadCount { return "cell \(key) miscounts its dead entries" }
            for entry in entries where !entry.isDead {
                guard let pin = store[entry.id] else { return "cell \(key) lists a pin the store does not hold" }
                guard PinStore.indexLevels.contains(where: { pin.cell.ancestor(precision: $0).key == key }),
                      pin.createdAt == entry.createdAt, pin.sequence == entry.sequence else {
                    return "cell \(key) holds a stale entry for \(pin.id)"
                }
                guard store.categoryTags.names.indices.contains(Int(entry.tag)), store.categoryTags.names[Int(entry.tag)] == pin.category else {
                    return "cell \(key) tags \(pin.id) with the wrong category"
                }
            }
        }
        for level in PinStore.indexLevels {
            let live = store.spatial.filter { Int($0.key & 0xF) == level }.values.reduce(0) { $0 + $1.liveCount }
            if live != store.count { return "level \(level) lists \(live) pins for \(store.count)" }
        }
        return nil
    }

    func randomArea(_ rng: inout SplitMix64) -> GeoArea {
        switch rng.next() % 6 {
        case 0: return .box(GeoBox(south: -90, west: -180, north: 90, east: 180))
        case 1: return .circle(center: GeoPoint(lat: rng.double(-85, 85), lon: rng.double(-180, 180)), radiusMeters: rng.double(1_000, 8_000_000))
        case 2:                                                  // across the antimeridian
            let s = rng.double(-80, 70)
            return .box(GeoBox(south: s, west: rng.double(100, 179), north: s + rng.double(1, 20), east: rng.double(-179, -100)))
        default:
            let s = rng.double(-90, 80), w = rng.double(-180, 170)
            return .box(GeoBox(south: s, west: w, north: min(90, s + rng.double(0.5, 50)), east: min(180, w + rng.double(0.5, 80))))
        }
    }

    /// Random pins (some created in the same millisecond, some by a clock that stepped back),
    /// moved, deleted and expired between queries; random areas, categories and limits. Each
    /// reply is the newest matches in order, a prefix of the complete answer; when the walk ended
    /// within its budget it is exactly today's reply (the newest `limit`, truncated iff more
    /// matched); with no budget it always is. The index stays exact throughout.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func repliesMatchBruteForce(seed: UInt64) {
        var rng = SplitMix64(state: seed)
        var store = PinStore()
        var now: Int64 = 1_000_000
        var budgetStops = 0
        for step in 0..<1_500 {
            switch rng.next() % 10 {
            case 0...4:
                now += rng.next() % 4 == 0 ? 0 : Int64(rng.next() % 50)
                if rng.next() % 40 == 0 { now -= 5_000 }            // the wall clock stepped back
                let point = GeoPoint(lat: rng.double(-89, 89), lon: rng.double(-180, 180))
                store.insert(Pin(id: PinID(random: secrets.randomBytes(16)), point: point, title: "t", description: "",
                                 category: settings.categories[Int(rng.next() % 5)], createdAt: now,
                                 expiresAt: now + Int64(rng.next() % 100_000), editDigest: secrets.digest(ofToken: "t")))
            case 5:
                let ids = store.pins.keys.sorted()      // not the dictionary's order, which varies from run to run
                guard !ids.isEmpty, var pin = store[ids[Int(rng.next() % UInt64(ids.count))]] else { continue }
                pin.point = rng.next() % 2 == 0 ? GeoPoint(lat: rng.double(-89, 89), lon: rng.double(-180, 180))
                                               : GeoPoint(lat: pin.point.lat + rng.double(-0.01, 0.01), lon: pin.point.lon)
                pin.point.lat = min(90, max(-90, pin.point.lat))
                pin.cell = Geohash.cell(pin.point, precision: Geohash.maxPrecision)
                if rng.next() % 3 == 0 { pin.category = settings.categories[Int(rng.next() % 5)] }
                store.replace(pin)
            case 6:
                let ids = store.pins.keys.sorted()
                guard !ids.isEmpty else { continue }
                store.remove(ids[Int(rng.next() % UInt64(ids.count))])
            case 7:
                _ = store.removeExpired(now: now + Int64(rng.next() % 30_000))
            default:
                let area = randomArea(&rng)
                let categories = rng.next() % 3 == 0 ? UInt64(1 + rng.next() % 31) : settings.allCategories
                let limit = 1 + Int(rng.next() % 150)
                let budget = limit + Int(rng.next() % UInt64(3 * limit))
                let all = bruteForce(store, area, categories)
                let report = query(store, area, categories, limit: limit, budget: budget)
                #expect(report.pins.map(\.id) == all.prefix(report.pins.count).map(\.id), "step \(step): not a prefix of the answer")
                #expect(report.visited <= budget)
                if report.stoppedByBudget {
                    budgetStops += 1
                    #expect(report.truncated, "step \(step): a budget stop is reported as truncated")
                } else {
                    #expect(report.pins.map(\.id) == all.prefix(limit).map(\.id), "step \(step)")
                    #expect(report.truncated == (all.count > limit), "step \(step)")
                }
                let unbounded = query(store, area, categories, limit: limit, budget: .max)
                #expect(!unbounded.stoppedByBudget && unbounded.pins.map(\.id) == all.prefix(limit).map(\.id), "step \(step)")
                #expect(unbounded.truncated == (all.count > limit))
            }
            if step % 100 == 0 { #expect(indexProblem(store) == nil, "step \(step)") }
        }
        #expect(indexProblem(store) == nil)
        #expect(store.count > 100 && budgetStops > 0, "the walk reached some state and some budget stops: \(store.count), \(budgetStops)")
    }

    /// A world-sized area over many pins touches only the newest `limit + 1` of them (the one more
    /// tells it whether the reply is cut), whatever the store holds; a filter that matches nothing
    /// stops at the budget instead of walking everything.
    @Test func aWorldSizedSubscribeTouchesLimitPinsNotTheStore() {
        var rng = SplitMix64(state: 5)
        var store = PinStore()
        for i in 0..<20_000 {
            store.insert(Pin(id: PinID(random: secrets.randomBytes(16)), point: GeoPoint(lat: rng.double(-89, 89), lon: rng.double(-180, 180)),
                             title: "t", description: "", category: "general", createdAt: Int64(i), expiresAt: 1 << 40,
                             editDigest: secrets.digest(ofToken: "t")))
        }
        let world = GeoArea.box(GeoBox(south: -90, west: -180, north: 90, east: 180))
        let report = query(store, world, settings.allCategories, limit: 100, budget: 400)
        #expect(report.pins.count == 100 && report.truncated && !report.stoppedByBudget)
        #expect(report.visited == 101)
        #expect(report.pins.map(\.createdAt) == (0..<100).map { Int64(19_999 - $0) })
        let hazard: UInt64 = 1 << UInt64(settings.categoryIndex("hazard")!)
        let none = query(store, world, hazard, limit: 100, budget: 400)
        #expect(none.pins.isEmpty && none.truncated && none.stoppedByBudget && none.visited == 400)
        // Through the public entry point the budget follows the settings: 4 × max(limit, 1,024).
        let (pins, truncated) = store.pins(in: world, cells: GeohashCover.choose(covering: world, budget: 32, minPrecision: 1, maxPrecision: 7).cells,
                                           precision: 1, categories: hazard, settings: settings, limit: 10)
        #expect(pins.isEmpty && truncated)
        #expect(PinStore.scanBudget(limit: 10, settings: settings) == 4_096)
        #expect(PinStore.scanBudget(limit: 10_000, settings: settings) == 40_000)
    }

    /// Removals mark entries dead in O(log n) and compaction keeps the dead from piling up; a
    /// cell whose pins are all gone is dropped.
    @Test func removalsAreCompactedAndEmptyCellsDropped() {
        var store = PinStore()
        let ids = (0..<500).map { i in
            store.insert(Pin(id: PinID(random: secrets.randomBytes(16)), point: GeoPoint(lat: 10, lon: 10), title: "t", description: "",
                             category: "help", createdAt: Int64(i), expiresAt: 1 << 40, editDigest: secrets.digest(ofToken: "t"))).id
        }
        #expect(store.spatial.count == 3, "one cell per level")
        for id in ids.prefix(400) { store.remove(id) }
        #expect(indexProblem(store) == nil)
        #expect(store.spatial.values.allSatisfy { $0.liveCount == 100 && $0.deadCount <= $0.liveCount && $0.entries.count < 500 })
        for id in ids.suffix(100) { store.remove(id) }
        #expect(store.spatial.isEmpty)
    }

    /// A store restored in bulk from pins whose creation times are out of order (a clock that
    /// stepped back, or a snapshot from several nodes) is indexed in order all the same, and a
    /// duplicate id in the input (a damaged file) leaves one entry, not two.
    @Test func bulkRestoreOrdersCellsAndSurvivesDuplicates() {
        var rng = SplitMix64(state: 8)
        var pins: [Pin] = []
        for i in 0..<2_000 {
            var pin = Pin(id: PinID(random: secrets.randomBytes(16)), point: GeoPoint(lat: rng.double(40, 41), lon: rng.double(10, 11)),
                          title: "t", description: "", category: settings.categories[i % 5], createdAt: Int64(rng.next() % 10_000),
                          expiresAt: 1 << 40, editDigest: secrets.digest(ofToken: "t"))
            pin.sequence = UInt64(i + 1)
            pins.append(pin)
        }
        var moved = pins[10]
        moved.point = GeoPoint(lat: -20, lon: -20)
        moved.cell = Geohash.cell(moved.point, precision: Geohash.maxPrecision)
        var store = PinStore()
        store.restore(pins + [moved])
        #expect(store.count == 2_000 && indexProblem(store) == nil)
        let area = GeoArea.box(GeoBox(south: -90, west: -180, north: 90, east: 180))
        let report = query(store, area, settings.allCategories, limit: 3_000, budget: .max)
        #expect(report.pins.map(\.id) == bruteForce(store, area, settings.allCategories).map(\.id))
    }
}
