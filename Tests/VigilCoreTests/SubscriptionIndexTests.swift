import Testing
import VigilGeo
@testable import VigilCore
import VigilTestSupport

@Suite struct SubscriptionIndexTests {
    func subscription(_ cells: [GeohashCell], area: GeoArea = .box(GeoBox(south: -90, west: -180, north: 90, east: 180))) -> SubscriptionIndex.Subscription {
        .init(area: area, categories: ~0, precision: cells[0].precision, cells: cells)
    }

    func subscribers(_ index: SubscriptionIndex, at point: GeoPoint) -> Set<SubscriptionIndex.SubscriberID> {
        var found = Set<SubscriptionIndex.SubscriberID>()
        index.forEachSubscriber(at: point, cell: Geohash.cell(point, precision: Geohash.maxPrecision), categoryBit: 0) {
            #expect(found.insert($0).inserted, "offered twice")
        }
        return found
    }

    @Test func removingLeavesTheOtherMembersOfEachChannelAndDropsEmptyChannels() {
        let here = GeoPoint(lat: 52.52, lon: 13.40), there = GeoPoint(lat: -33.87, lon: 151.21)
        let cellHere = Geohash.cell(here, precision: 3), cellThere = Geohash.cell(there, precision: 3)
        var index = SubscriptionIndex()
        for id: Int32 in 1...6 { index.set(id, subscription([cellHere, cellThere])) }
        index.set(7, subscription([cellThere]))
        #expect(index.channels.count == 2)
        // Removing from the middle, the front and the back of a channel.
        for id: Int32 in [3, 1, 6] { index.remove(id) }
        #expect(subscribers(index, at: here) == [2, 4, 5])
        #expect(subscribers(index, at: there) == [2, 4, 5, 7])
        index.remove(1)                                   // not subscribed any more: nothing changes
        #expect(subscribers(index, at: there) == [2, 4, 5, 7])
        for id: Int32 in [2, 4, 5] { index.remove(id) }
        #expect(index.channels.count == 1, "the emptied channel is gone, not kept as an empty array")
        #expect(subscribers(index, at: here).isEmpty)
        index.remove(7)
        #expect(index.channels.isEmpty && index.count == 0)
    }

    /// Panning maps: subscribers join and leave overlapping channels of a city over and over, in
    /// random order. After every change each channel entry is where the index's positions say
    /// (so the next O(1) removal takes out the right one), and a pin anywhere is offered to
    /// exactly the subscribers whose area holds it, each once.
    @Test func churnKeepsPositionsAndDeliveryExact() {
        var rng = SplitMix64(state: 7)
        var index = SubscriptionIndex()
        let city = (south: 52.40, west: 13.20, north: 52.60, east: 13.60)
        func randomPoint() -> GeoPoint { GeoPoint(lat: rng.double(city.south, city.north), lon: rng.double(city.west, city.east)) }
        for step in 0..<4_000 {
            let subscriber = Int32(rng.next() % 120)
            if rng.next() % 4 == 0 {
                index.remove(subscriber)
            } else {
                let c = randomPoint(), half = rng.double(0.002, 0.06)
                let area = GeoArea.box(GeoBox(south: c.lat - half, west: c.lon - half, north: c.lat + half, east: c.lon + half))
                // Budgets and finest precisions vary, so subscriptions sit in channels of several precisions.
                let (precision, cells) = GeohashCover.choose(covering: area, budget: 4 + Int(rng.next() % 40), minPrecision: 1,
                                                             maxPrecision: 4 + Int(rng.next() % 4))
                index.set(subscriber, .init(area: area, categories: ~0, precision: precision, cells: cells))
            }
            if let problem = index.inconsistency() {
                Issue.record("step \(step): \(problem)")
                return
            }
            if step % 50 == 0 {
                for _ in 0..<20 {
                    let p = randomPoint()
                    let expected = Set(index.subscriptions.filter { $0.value.area.contains(p) }.keys)
                    #expect(subscribers(index, at: p) == expected, "step \(step)")
                }
            }
        }
        #expect(index.count > 50 && index.channelCount > 20, "the walk built up overlapping channels")
        for subscriber: Int32 in 0..<120 { index.remove(subscriber) }
        #expect(index.channels.isEmpty && index.positions.isEmpty && index.inconsistency() == nil)
    }

    /// A cover that lists a cell twice puts the subscriber in that channel twice; removing it
    /// still takes out both entries and leaves the others where their positions say.
    @Test func aCellListedTwiceIsRemovedTwice() {
        let here = GeoPoint(lat: 52.52, lon: 13.40)
        let cell = Geohash.cell(here, precision: 3)
        var index = SubscriptionIndex()
        index.set(1, subscription([cell]))
        index.set(2, subscription([cell, cell]))
        index.set(3, subscription([cell]))
        #expect(index.inconsistency() == nil)
        index.remove(2)
        #expect(index.inconsistency() == nil)
        #expect(subscribers(index, at: here) == [1, 3])
    }
}
