import Testing
import VigilGeo
@testable import VigilCore

/// `subscribe` with `view`, the cluster reply and `clusters.changed` on the wire.
@Suite struct ClusterMessagesTests {
    let decoder = RequestDecoder(settings: PinSettings())

    func decode(_ text: String) throws -> ClientOperation {
        try Array(text.utf8).withUnsafeBytes { decoder.decode($0) }.get().operation
    }

    func parse(_ w: JSONWriter) throws -> JSONObject {
        try #require(w.withUnsafeBytes { try JSONParser.parse($0, maxDepth: 16) }.object)
    }

    let box = GeoArea.box(GeoBox(south: 47, west: 5, north: 55, east: 15))

    @Test func theViewChoosesPinsOrClusters() throws {
        #expect(try decode(#"{"op":"subscribe","area":{"bbox":[47,5,55,15]},"view":"clusters","categories":["hazard"]}"#)
                == .subscribeClusters(area: box, categories: 1 << 2))
        #expect(try decode(#"{"op":"subscribe","area":{"bbox":[47,5,55,15]},"view":"pins"}"#) == .subscribe(area: box, categories: nil))
        #expect(try decode(#"{"op":"subscribe","area":{"bbox":[47,5,55,15]}}"#) == .subscribe(area: box, categories: nil))
        #expect(ClientOperation.subscribeClusters(area: box, categories: nil).name == "subscribe")
        #expect(ClientOperation.subscribeClusters(area: box, categories: nil).isSubscribe && !ClientOperation.unsubscribe.isSubscribe)
    }

    let cells = [
        ClusterCell(cell: GeohashCell("u33d")!, count: 3, byCategory: [CategoryCount(category: "general", count: 2), CategoryCount(category: "hazard", count: 1)],
                    lat: 52.51, lon: 13.39),
        ClusterCell(cell: GeohashCell("u281")!, count: 0, byCategory: [], lat: 0, lon: 0),
    ]

    @Test func theReplyListsEachCellWithItsSplitAndMean() throws {
        var w = JSONWriter(capacity: 256)
        ServerMessages.reply(.clusters(precision: 4, cells: [cells[0]]), ref: .number(1), into: &w)
        let o = try parse(w)
        #expect(o["type"]?.string == "ok" && o["precision"]?.int64 == 4 && o["truncated"] == nil)
        let cell = try #require(o["clusters"]?.array?.first?.object)
        #expect(cell["cell"]?.string == "u33d" && cell["count"]?.int64 == 3)
        #expect(cell["by_category"]?.object?["general"]?.int64 == 2 && cell["by_category"]?.object?["hazard"]?.int64 == 1)
        #expect(cell["lat"]?.double == 52.51 && cell["lon"]?.double == 13.39)
    }

    @Test func anEmptiedCellIsSentWithCountZeroAndABigMessageIsCut() throws {
        var w = JSONWriter(capacity: 256)
        #expect(ServerMessages.clustersChanged(precision: 4, cells.map(ServerMessages.clusterCellJSON), maxBytes: .max, into: &w) == 2)
        let o = try parse(w)
        #expect(o["type"]?.string == "clusters.changed" && o["precision"]?.int64 == 4)
        let gone = try #require(o["cells"]?.array?.last?.object)
        #expect(gone["cell"]?.string == "u281" && gone["count"]?.int64 == 0 && gone["by_category"] == nil)
        // Cut after the first cell: the caller keeps the rest for the next message.
        var small = JSONWriter(capacity: 256)
        #expect(ServerMessages.clustersChanged(precision: 4, cells.map(ServerMessages.clusterCellJSON), maxBytes: 150, into: &small) == 1)
        #expect(try parse(small)["cells"]?.array?.count == 1 && small.count <= 150)
        // A reply is cut too, and says so.
        var reply = JSONWriter(capacity: 256)
        ServerMessages.reply(.clusters(precision: 4, cells: cells), ref: nil, maxBytes: 160, into: &reply)
        let r = try parse(reply)
        #expect(r["clusters"]?.array?.count == 1 && r["truncated"]?.bool == true && reply.count <= 160)
    }
}
