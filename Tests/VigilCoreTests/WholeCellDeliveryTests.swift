import Testing
import VigilGeo
@testable import VigilCore
import VigilTestSupport

/// A channel member whose cell lies wholly inside its area skips the per-pin area test
/// (`SubscriptionIndex.Member.whole`). These tests hold the fan-out to brute force where that
/// shortcut could go wrong: areas crossing the antimeridian, touching the poles, huge circles and
/// circles around a pole, and pins exactly on cell edges, box edges and corners.
@Suite struct WholeCellDeliveryTests {
    let secrets = TestSecrets()

    /// Thousands of subscriptions, then pins created and moved among them; every delivery is
    /// compared with `MapHubOracle` (each subscription tested against each pin with
    /// `GeoArea.contains`, its categories and the reach rule) by `CheckedMapHub`.
    @Test func recipientsEqualBruteForceOnEdgesPolesAndAntimeridian() {
        var rng = SplitMix64(state: 1_301)
        var checked = CheckedMapHub(settings: PinSettings())
        let digest = secrets.digest(ofToken: "tok")
        func lat() -> Double { rng.double(-90, 90) }
        func lon() -> Double { rng.double(-180, 180) }
        /// A value on a geohash grid line of precision 1...7 (cell edges, exact doubles).
        func gridLine(origin: Double, span: Double) -> Double {
            let bits = 2 + Int(rng.next() % 17)
            return origin + Double(rng.next() % UInt64((1 << bits) + 1)) * (span / Double(1 << bits))
        }
        func randomArea() -> GeoArea {
            switch rng.next() % 10 {
            case 0, 1: // city to region sized
                let s = rng.double(-89, 88), size = rng.double(0.005, 2)
                let w = lon(), e = w + size * 2
                return .box(GeoBox(south: s, west: w, north: min(90, s + size), east: e > 180 ? e - 360 : e))
            case 2: // crossing the antimeridian
                let s = rng.double(-90, 80)
                return .box(GeoBox(south: s, west: rng.double(150, 180), north: min(90, s + rng.double(0.1, 40)), east: rng.double(-180, -150)))
            case 3: // touching a pole, any longitudes (crossing or not)
                return rng.next() % 2 == 0 ? .box(GeoBox(south: rng.double(60, 90), west: lon(), north: 90, east: lon()))
                    : .box(GeoBox(south: -90, west: lon(), north: rng.double(-90, -60), east: lon()))
            case 4: // every edge on a grid line: whole cells right up to the edges
                let a = gridLine(origin: -90, span: 180), b = gridLine(origin: -90, span: 180)
                return .box(GeoBox(south: min(a, b), west: gridLine(origin: -180, span: 360), north: max(a, b), east: gridLine(origin: -180, span: 360)))
            case 5:
                return .box(.world)
            case 6: // around or near a pole
                let center = GeoPoint(lat: [90, -90, rng.double(85, 90), rng.double(-90, -85)][Int(rng.next() % 4)], lon: lon())
                return .circle(center: center, radiusMeters: rng.double(1_000, 3_000_000))
            case 7: // huge, up to the protocol's 20,000 km and beyond
                return .circle(center: GeoPoint(lat: lat(), lon: lon()), radiusMeters: rng.double(5_000_000, 21_000_000))
            case 8: // near the antimeridian
                return .circle(center: GeoPoint(lat: lat(), lon: rng.double(178, 180) * (rng.next() % 2 == 0 ? 1 : -1)), radiusMeters: rng.double(100, 500_000))
            default:
                return .circle(center: GeoPoint(lat: lat(), lon: lon()), radiusMeters: rng.double(50, 1_000_000))
            }
        }
        var areas: [GeoArea] = []
        for subscriber in Int32(0)..<2_000 {
            let area = randomArea()
            areas.append(area)
            let viewer: GeoPoint? = rng.next() % 3 == 0 ? nil : GeoPoint(lat: lat(), lon: lon())
            let mask: UInt64? = rng.next() % 3 == 0 ? UInt64(1 + rng.next() % 31) : nil
            if let problem = checked.subscribe(subscriber, area: area, categories: mask, viewer: viewer) {
                Issue.record("\(problem)")
                return
            }
        }
        /// A point on what the shortcut decides by: a cell edge or corner of some subscription's
        /// cover, its box's edge or corner, a pole, the antimeridian (either spelling), or anywhere.
        func randomPoint() -> GeoPoint {
            let subscription = checked.hub.subscriptions.subscriptions[Int32(rng.next() % 2_000)]!
            switch rng.next() % 6 {
            case 0, 1:
                let box = subscription.cells[Int(rng.next() % UInt64(subscription.cells.count))].box
                let inside = GeoPoint(lat: rng.double(box.south, box.north), lon: rng.double(box.west, box.east))
                switch rng.next() % 3 {
                case 0: return GeoPoint(lat: rng.next() % 2 == 0 ? box.south : box.north, lon: rng.next() % 2 == 0 ? box.west : box.east)
                case 1: return GeoPoint(lat: rng.next() % 2 == 0 ? box.south : box.north, lon: inside.lon)
                default: return GeoPoint(lat: inside.lat, lon: rng.next() % 2 == 0 ? box.west : box.east)
                }
            case 2:
                let box = subscription.area.boundingBox
                let part = box.parts[Int(rng.next() % UInt64(box.parts.count))]
                return GeoPoint(lat: rng.next() % 2 == 0 ? part.south : rng.double(part.south, part.north),
                                lon: rng.next() % 2 == 0 ? part.east : rng.double(part.west, part.east))
            case 3:
                return GeoPoint(lat: [90, -90, lat()][Int(rng.next() % 3)], lon: [180, -180, lon()][Int(rng.next() % 3)])
            default:
                return GeoPoint(lat: lat(), lon: lon())
            }
        }
        let categories = PinSettings().categories
        var created: [PinID] = []
        for step in 0..<2_000 {
            let problem: String?
            if step % 5 == 4, let id = created.randomElement(using: &rng) {
                let p = randomPoint()
                problem = checked.update(id, digest: digest, changes: PinChanges(lat: p.lat, lon: p.lon), now: 1_000)
            } else {
                let p = randomPoint()
                var draft = PinDraft(point: p, title: "t", description: "", category: categories[Int(rng.next() % 5)], ttlSeconds: 3_600)
                if rng.next() % 4 == 0 { draft.rangeMeters = 1 + Int(rng.next() % 2_000_000) }
                let id = PinID(random: secrets.randomBytes(16))
                created.append(id)
                problem = checked.create(draft, id: id, editDigest: digest, now: 1_000)
            }
            if let problem {
                Issue.record("step \(step): \(problem)")
                return
            }
        }
        // The shortcut was taken often enough for the comparison to mean something.
        let members = checked.hub.subscriptions.channels.values.joined()
        let whole = members.filter(\.whole).count
        #expect(whole > members.count / 10, "\(whole) of \(members.count) channel entries hold their whole cell")
    }

    /// The benchmark's and a typical map's view: Berlin at precision 4. The cells inside the
    /// view are flagged, those along its rim are not, and a pin on the rim's outside is not delivered.
    @Test func aCityViewFlagsItsInteriorCellsOnly() {
        var hub = MapHub(settings: PinSettings())
        let view = GeoBox(south: 52.3, west: 13.0, north: 52.7, east: 13.8)
        _ = hub.subscribe(1, area: .box(view), categories: nil)
        let cells = hub.subscriptions.subscriptions[1]!.cells
        #expect(cells.count > 1 && cells.allSatisfy { $0.precision == 4 })
        for cell in cells {
            let member = hub.subscriptions.channels[cell.key]!.first { $0.id == 1 }!
            let box = cell.box
            let inside = view.south <= box.south && box.north <= view.north && view.west <= box.west && box.east <= view.east
            #expect(member.whole == inside, "\(cell)")
        }
        #expect(cells.contains { hub.subscriptions.channels[$0.key]!.first!.whole }, "some interior cell")
        var out: [PinDelivery] = []
        for (lat, lon, seen) in [(52.45, 13.3, true), (52.7, 13.8, true), (52.70001, 13.5, false), (52.5, 12.99999, false)] {
            out.removeAll()
            let draft = PinDraft(point: GeoPoint(lat: lat, lon: lon), title: "t", description: "", category: "general", ttlSeconds: 60)
            _ = hub.create(draft, id: PinID(random: secrets.randomBytes(16)), editDigest: secrets.digest(ofToken: "t"), now: 0, out: &out)
            #expect(out.flatMap(\.recipients) == (seen ? [1] : []), "\(lat), \(lon)")
        }
    }
}
