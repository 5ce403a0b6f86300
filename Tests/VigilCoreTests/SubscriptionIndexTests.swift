import Testing
import VigilGeo
@testable import VigilCore

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
}
