import Testing
import VigilGeo
@testable import VigilCore
import VigilTestSupport

/// The reach rule (`PinReach`) and how the map hub applies it: pins with a `range_m` reach only
/// subscribers whose viewer position is within it, in replies and in every kind of event.
@Suite struct PinReachTests {
    let secrets = TestSecrets()
    /// Metres per degree of a great circle on the sphere `GeoDistance` uses.
    static let metresPerDegree = GeoDistance.earthRadiusMeters * Double.pi / 180

    // MARK: the rule

    @Test func theBoundaryIsIncludedAndACentimetreBeyondIsNot() {
        let pin = GeoPoint(lat: 10, lon: 20)
        for range in [1, 250, 1_000, 50_000] {
            // Along a meridian the great-circle distance is the latitude difference.
            let inside = GeoPoint(lat: 10 + (Double(range) - 0.01) / Self.metresPerDegree, lon: 20)
            let outside = GeoPoint(lat: 10 + (Double(range) + 0.01) / Self.metresPerDegree, lon: 20)
            #expect(PinReach.reaches(pin, rangeMeters: range, viewer: inside), "range \(range)")
            #expect(!PinReach.reaches(pin, rangeMeters: range, viewer: outside), "range \(range)")
        }
        #expect(PinReach.reaches(pin, rangeMeters: 1, viewer: pin), "a viewer on the pin is reached")
    }

    @Test func noViewerIsNeverReachedAndNoRangeAlwaysShows() {
        let pin = GeoPoint(lat: 0, lon: 0)
        #expect(!PinReach.reaches(pin, rangeMeters: 20_000_000, viewer: nil))
        #expect(!PinReach.shows(pin, rangeMeters: 5, to: nil))
        #expect(PinReach.shows(pin, rangeMeters: nil, to: nil))
        #expect(PinReach.shows(pin, rangeMeters: nil, to: GeoPoint(lat: -60, lon: 170)))
    }

    @Test func reachCrossesTheAntimeridian() {
        // 0.004° of longitude apart across 180° at 10° N: about 438 m, not 40,000 km.
        let pin = GeoPoint(lat: 10, lon: 179.998)
        let viewer = GeoPoint(lat: 10, lon: -179.998)
        let d = GeoDistance.meters(pin, viewer)
        #expect(d > 430 && d < 445)
        #expect(PinReach.reaches(pin, rangeMeters: 445, viewer: viewer))
        #expect(PinReach.reaches(viewer, rangeMeters: 445, viewer: pin))
        #expect(!PinReach.reaches(pin, rangeMeters: 430, viewer: viewer))
    }

    @Test(arguments: [90.0, -90.0])
    func atThePolesLongitudeDoesNotMatter(pole: Double) {
        let pin = GeoPoint(lat: pole, lon: 0)
        let away = pole > 0 ? pole - 0.01 : pole + 0.01          // 0.01° of latitude: ~1,112 m
        for lon in [-180.0, -90, 0, 45, 137, 180] {
            let viewer = GeoPoint(lat: away, lon: lon)
            #expect(PinReach.reaches(pin, rangeMeters: 1_120, viewer: viewer), "lon \(lon)")
            #expect(!PinReach.reaches(pin, rangeMeters: 1_100, viewer: viewer), "lon \(lon)")
        }
        // Two viewers near the pole on opposite meridians are close to each other.
        #expect(PinReach.reaches(GeoPoint(lat: away, lon: 0), rangeMeters: 2_240, viewer: GeoPoint(lat: away, lon: 180)))
    }

    // MARK: the hub

    func draft(_ lat: Double, _ lon: Double, range: Int? = nil, category: String = "general") -> PinDraft {
        PinDraft(point: GeoPoint(lat: lat, lon: lon), title: "t", description: "", category: category, ttlSeconds: 3600, rangeMeters: range)
    }

    func create(_ hub: inout MapHub, _ d: PinDraft, out: inout [PinDelivery]) -> Pin {
        try! hub.create(d, id: PinID(random: secrets.randomBytes(16)), editDigest: secrets.digest(ofToken: "tok"), now: 1_000, out: &out).get()
    }

    func update(_ hub: inout MapHub, _ pin: Pin, _ changes: PinChanges, out: inout [PinDelivery]) {
        _ = try! hub.update(pin.id, digest: secrets.digest(ofToken: "tok"), changes: changes, now: 2_000, out: &out).get()
    }

    /// Recipients per event kind, as sets (the order of recipients means nothing).
    func byKind(_ out: [PinDelivery]) -> [String: Set<Int32>] {
        var kinds: [String: Set<Int32>] = [:]
        for d in out {
            let name: String
            switch d.kind {
            case .added: name = "added"
            case .updated: name = "updated"
            case .removed(let reason): name = "removed(\(reason.rawValue))"
            case .expired: name = "expired"
            }
            kinds[name, default: []].formUnion(d.recipients)
        }
        return kinds
    }

    let city = GeoArea.box(GeoBox(south: 52, west: 13, north: 53, east: 14))
    /// A point `metres` north of (52.5, 13.5).
    func north(_ metres: Double) -> GeoPoint { GeoPoint(lat: 52.5 + metres / Self.metresPerDegree, lon: 13.5) }

    @Test func aRangedPinReachesOnlyViewersWithinItsRange() {
        var hub = MapHub(settings: PinSettings())
        _ = hub.subscribe(1, area: city, categories: nil, viewer: north(900))       // within 1 km
        _ = hub.subscribe(2, area: city, categories: nil, viewer: north(1_100))     // beyond
        _ = hub.subscribe(3, area: city, categories: nil)                           // no viewer
        _ = hub.subscribe(4, area: .box(GeoBox(south: 0, west: 0, north: 1, east: 1)), categories: nil, viewer: north(0))  // area elsewhere
        var out: [PinDelivery] = []
        let ranged = create(&hub, draft(52.5, 13.5, range: 1_000), out: &out)
        #expect(out.map { Set($0.recipients) } == [[1]])
        out.removeAll()
        _ = create(&hub, draft(52.5, 13.5), out: &out)
        #expect(out.map { Set($0.recipients) } == [[1, 2, 3]], "a pin without a range ignores viewers")

        // Replies follow the same rule.
        #expect(hub.subscribe(5, area: city, categories: nil, viewer: north(999)).pins.count == 2)
        #expect(hub.subscribe(6, area: city, categories: nil, viewer: north(1_001)).pins.count == 1)
        #expect(hub.subscribe(7, area: city, categories: nil).pins.count == 1)
        #expect(hub.subscribe(8, area: .box(GeoBox(south: 0, west: 0, north: 1, east: 1)), categories: nil, viewer: north(0)).pins.isEmpty,
                "in reach but outside the area")

        // Votes and deletes reach the same subscribers as the pin.
        out.removeAll()
        _ = hub.vote(ranged.id, voter: 1, value: 1, out: &out)
        #expect(byKind(out) == ["updated": [1, 5]])
        out.removeAll()
        _ = hub.delete(ranged.id, digest: secrets.digest(ofToken: "tok"), out: &out)
        #expect(byKind(out) == ["removed(deleted)": [1, 5]])
    }

    @Test func movesAndRangeChangesAreAddedAndRemovedForThoseWhoEnterOrLeaveTheReach() {
        var hub = MapHub(settings: PinSettings())
        _ = hub.subscribe(1, area: city, categories: nil, viewer: north(0))
        _ = hub.subscribe(2, area: city, categories: nil, viewer: north(2_000))
        _ = hub.subscribe(3, area: city, categories: nil)
        var out: [PinDelivery] = []
        let pin = create(&hub, draft(52.5, 13.5, range: 500), out: &out)
        #expect(byKind(out) == ["added": [1]])

        // Moved 1,800 m north: out of 1's reach, into 2's.
        out.removeAll()
        let there = north(1_800)
        update(&hub, pin, PinChanges(lat: there.lat, lon: there.lon), out: &out)
        #expect(byKind(out) == ["removed(moved)": [1], "added": [2]])

        // A wider range: 1 (1,800 m away) now reached too; 2 gets an update.
        out.removeAll()
        update(&hub, pin, PinChanges(range: .set(2_000)), out: &out)
        #expect(byKind(out) == ["added": [1], "updated": [2]])

        // No range at all: everyone in the area, the viewer-less 3 included.
        out.removeAll()
        update(&hub, pin, PinChanges(range: .remove), out: &out)
        #expect(byKind(out) == ["added": [3], "updated": [1, 2]])
        #expect(hub.store[pin.id]?.rangeMeters == nil)

        // A range again, a small one: only 2 (200 m away) keeps it.
        out.removeAll()
        update(&hub, pin, PinChanges(range: .set(300)), out: &out)
        #expect(byKind(out) == ["removed(moved)": [1, 3], "updated": [2]])
        #expect(hub.store[pin.id]?.rangeMeters == 300)
        #expect(ServerMessages.pinJSON(hub.store[pin.id]!).containsText(#""range_m":300}"#))
    }

    @Test func aSubscriberThatMovesGetsTheDifferenceInItsReplyAndEventsFromThere() {
        var hub = MapHub(settings: PinSettings())
        var out: [PinDelivery] = []
        let near = create(&hub, draft(52.5, 13.5, range: 1_000), out: &out)
        let far = create(&hub, draft(52.6, 13.5, range: 1_000), out: &out)         // ~11 km north
        #expect(hub.subscribe(1, area: city, categories: nil, viewer: north(0)).pins.map(\.id) == [near.id])
        #expect(hub.subscribe(1, area: city, categories: nil, viewer: GeoPoint(lat: 52.6, lon: 13.5)).pins.map(\.id) == [far.id])
        out.removeAll()
        _ = hub.vote(near.id, voter: 9, value: 1, out: &out)
        #expect(out.isEmpty, "the old position's pins no longer reach the subscriber")
        _ = hub.vote(far.id, voter: 9, value: 1, out: &out)
        #expect(out.map { Set($0.recipients) } == [[1]])
        hub.unsubscribe(1)
        #expect(hub.subscriptions.subscriptions[1] == nil)
    }
}

private extension Array where Element == UInt8 {
    func containsText(_ text: String) -> Bool {
        let needle = Array(text.utf8)
        guard needle.count <= count else { return false }
        return (0...(count - needle.count)).contains { Array(self[$0..<($0 + needle.count)]) == needle }
    }
}
