import XCTest
@testable import VigilLoad

final class PayloadStampTests: XCTestCase {
    func testFormatAndParseRoundTrip() {
        let text = PayloadStamp.format(moves: 3, votes: 2, sendNs: 123_456_789_012)
        XCTAssertEqual(text, "m3 v2 t123456789012")
        XCTAssertEqual(PayloadStamp(description: text), PayloadStamp(moves: 3, votes: 2, sendNs: 123_456_789_012))
        XCTAssertEqual(PayloadStamp(moves: 0, votes: 0, sendNs: 0).text, "m0 v0 t0")
    }

    func testFindsTheStampInsideEventJSON() {
        let json = #"{"type":"pin.updated","pin":{"id":"9b2f0c1e-4a7d-4f43-9a51-0d6f7c3e8b12","lat":1.0,"lon":2.0,"title":"t","description":"m12 v4 t998877","category":"general","up":3,"down":1}}"#
        XCTAssertEqual(PayloadStamp.parse(Array(json.utf8)), PayloadStamp(moves: 12, votes: 4, sendNs: 998_877))
        XCTAssertEqual(PayloadStamp.parse(json.utf8), PayloadStamp(moves: 12, votes: 4, sendNs: 998_877), "non-contiguous collections too")
        let viaRaw = Array(json.utf8).withUnsafeBytes { PayloadStamp.parse($0) }
        XCTAssertEqual(viaRaw?.sendNs, 998_877)
    }

    func testTheNodeTheOpWentToRoundTrips() {
        let text = PayloadStamp.format(moves: 1, votes: 0, sendNs: 55, node: 3)
        XCTAssertEqual(text, "m1 v0 t55 n3")
        XCTAssertEqual(PayloadStamp(description: text), PayloadStamp(moves: 1, votes: 0, sendNs: 55, node: 3))
        XCTAssertEqual(PayloadStamp.parse(Array(#"{"description":"m1 v0 t55 n3 padding"}"#.utf8))?.node, 3)
        XCTAssertNil(PayloadStamp.parse(Array(#"{"description":"m1 v0 t55"}"#.utf8))?.node, "no node: nil")
        XCTAssertNil(PayloadStamp.parse(Array(#"{"description":"m1 v0 t55 n99999"}"#.utf8))?.node, "past 65535: padding, not a node")
        XCTAssertNil(PayloadStamp.parse(Array(#"{"description":"m1 v0 t55 n3x"}"#.utf8)), "a node must end like the time")
    }

    func testPaddingAfterTheStampIsAllowed() {
        let json = #"{"description":"m1 v0 t55 xxxxxxxxxxxxxxxx"}"#
        XCTAssertEqual(PayloadStamp.parse(Array(json.utf8)), PayloadStamp(moves: 1, votes: 0, sendNs: 55))
    }

    func testAStampLookalikeInAnotherStringIsIgnored() {
        // The title quotes the description key; inside a JSON string its quotes are escaped, so
        // the scan cannot mistake it for the real key.
        let json = #"{"title":"x \"description\":\"m9 v9 t9","description":"m1 v2 t3"}"#
        XCTAssertEqual(PayloadStamp.parse(Array(json.utf8)), PayloadStamp(moves: 1, votes: 2, sendNs: 3))
    }

    func testMalformedStampsAreNil() {
        for description in ["", "hello", "m", "m1", "m1 v2", "m1 v2 t", "mx v2 t3", "m1 v2 t3x", "m1  v2 t3",
                            "m1 v2 t99999999999999999999", "m99999999999 v1 t1"] {
            let json = "{\"description\":\"\(description)\"}"
            XCTAssertNil(PayloadStamp.parse(Array(json.utf8)), description)
        }
        XCTAssertNil(PayloadStamp.parse(Array(#"{"title":"m1 v2 t3"}"#.utf8)), "no description key")
        XCTAssertNil(PayloadStamp(description: "note m1 v2 t3"), "the stamp must come first")
    }

    func testTruncatedInputNeverTraps() {
        let json = Array(#"{"description":"m12 v4 t998877"}"#.utf8)
        for end in 0..<json.count {
            let stamp = PayloadStamp.parse(json[0..<end])
            if let stamp {
                // A cut inside the final number still parses, as a shorter number: fine for a
                // fuzz check, never a crash.
                XCTAssertEqual(stamp.moves, 12)
            }
        }
    }

    func testVersionIndexIsMovesPlusVotes() {
        XCTAssertEqual(PayloadStamp.versionIndex(moves: 0, upPlusDown: 0), 0)
        XCTAssertEqual(PayloadStamp.versionIndex(moves: 3, upPlusDown: 2), 5)
    }
}
