import Testing
import VigilGeo
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// `PinStore.exportPins/restore` and `MapHub.exportPins/restorePins`.
@Suite struct MapHubStateTests {
    let secrets = TestSecrets(seed: 21)
    let world = GeoArea.box(GeoBox(south: -90, west: -180, north: 90, east: 180))

    func draft(_ lat: Double, _ lon: Double, _ title: String, ttl: Int = 600) -> PinDraft {
        PinDraft(point: GeoPoint(lat: lat, lon: lon), title: title, description: "", category: "general", ttlSeconds: ttl)
    }

    /// A hub with pins made at the same millisecond (so only `sequence` orders them), some edited,
    /// voted on and deleted.
    func liveHub() throws -> MapHub {
        var hub = MapHub(settings: PinSettings())
        var out: [PinDelivery] = []
        var ids: [PinID] = []
        for i in 0..<30 {
            let pin = try hub.create(draft(Double(i % 10), Double(i), "pin \(i)", ttl: 60 + i * 10), id: PinID(random: secrets.randomBytes(16)),
                                     editDigest: secrets.digest(ofToken: "t\(i)"), now: 5_000, out: &out).get()
            ids.append(pin.id)
        }
        _ = hub.update(ids[3], digest: secrets.digest(ofToken: "t3"), changes: PinChanges(lat: 45, title: "moved"), now: 6_000, out: &out)
        _ = hub.vote(ids[4], voter: 7, value: 1, out: &out)
        _ = hub.vote(ids[4], voter: 8, value: -1, out: &out)
        _ = hub.delete(ids[5], digest: secrets.digest(ofToken: "t5"), out: &out)
        return hub
    }

    @Test func exportIsInCreationOrder() throws {
        let hub = try liveHub()
        let pins = hub.exportPins()
        #expect(pins.count == 29)
        #expect(pins.map(\.sequence) == pins.map(\.sequence).sorted())
        #expect(pins.first?.title == "pin 0" && pins.last?.title == "pin 29")
    }

    @Test func restoredHubAnswersLikeTheLiveOne() throws {
        var live = try liveHub()
        var restored = MapHub(settings: PinSettings())
        restored.restorePins(live.exportPins().reversed())       // any input order: sequence decides
        expectSamePins(restored.exportPins(), live.exportPins())
        // Same subscribe reply, in the same order (equal createdAt: sequence breaks the tie).
        let a = live.subscribe(1, area: world, categories: nil)
        let b = restored.subscribe(1, area: world, categories: nil)
        expectSamePins(b.pins, a.pins)
        let area = GeoArea.box(GeoBox(south: 2, west: 0, north: 6, east: 30))
        expectSamePins(restored.subscribe(2, area: area, categories: nil).pins, live.subscribe(2, area: area, categories: nil).pins)
        // The spatial index follows the restored cells: the moved pin is found where it went.
        #expect(restored.subscribe(3, area: .box(GeoBox(south: 44, west: 0, north: 46, east: 10)), categories: nil).pins.map(\.title) == ["moved"])
    }

    @Test func restoredHubExpiresOnSchedule() throws {
        var live = try liveHub()
        var restored = MapHub(settings: PinSettings())
        restored.restorePins(live.exportPins())
        #expect(restored.store.nextExpiry == Int64(5_000 + 60_000))
        var outLive: [PinDelivery] = [], outRestored: [PinDelivery] = []
        _ = live.subscribe(1, area: world, categories: nil)
        _ = restored.subscribe(1, area: world, categories: nil)
        for now in stride(from: Int64(60_000), through: 400_000, by: 17_000) {
            live.expire(now: now, out: &outLive)
            restored.expire(now: now, out: &outRestored)
            expectSamePins(restored.exportPins(), live.exportPins())
        }
        #expect(outLive.map(\.pin.id) == outRestored.map(\.pin.id))
        #expect(restored.store.count == 0)
    }

    @Test func newPinsNumberOnFromTheHighestRestoredSequence() throws {
        let live = try liveHub()
        var restored = MapHub(settings: PinSettings())
        restored.restorePins(live.exportPins())
        var out: [PinDelivery] = []
        let pin = try restored.create(draft(1, 1, "after restart"), id: PinID(high: 1, low: 1), editDigest: secrets.digest(ofToken: "n"), now: 5_000, out: &out).get()
        #expect(pin.sequence == 31)
        #expect(restored.subscribe(1, area: world, categories: nil).pins.first?.title == "after restart")
    }

    @Test func restoringADuplicateReplacesItAndSequenceZeroIsNumbered() {
        var store = PinStore()
        var a = Fixtures.pin(secrets, sequence: 4)
        let b = Fixtures.pin(secrets, sequence: 0)
        store.restore([a, b])
        #expect(store[b.id]?.sequence == 5)
        a.title = "second version"
        a.point = GeoPoint(lat: 10, lon: 10)
        a.cell = Geohash.cell(a.point, precision: Geohash.maxPrecision)
        store.restore([a])
        #expect(store.count == 2 && store[a.id]?.title == "second version")
        let near = GeoArea.box(GeoBox(south: 9, west: 9, north: 11, east: 11))
        let cover = GeohashCover.choose(covering: near, budget: 32, minPrecision: 1, maxPrecision: 7)
        let found = store.pins(in: near, cells: cover.cells, precision: cover.precision, categories: ~0, settings: PinSettings(), limit: 10).pins
        #expect(found.map(\.id) == [a.id])
    }
}
