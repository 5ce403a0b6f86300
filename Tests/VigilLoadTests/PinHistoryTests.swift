import XCTest
import VigilCore
import VigilGeo
@testable import VigilLoad

final class PinHistoryTests: XCTestCase {
    let a = PinID(high: 0, low: 1)
    let b = PinID(high: 0, low: 2)
    let here = GeoPoint(lat: 1, lon: 1)
    let there = GeoPoint(lat: 2, lon: 2)

    func testOpsBecomeVersionsWhoseIndexIsMovesPlusVotes() {
        var h = PinHistory(voteFlagThreshold: 5)
        h.recordCreate(a, at: here, sendNs: 10, ackNs: 20)
        h.recordUpdate(a, to: there, sendNs: 30, ackNs: 40)
        h.recordVote(a, up: 1, down: 0, sendNs: 50, ackNs: 60)
        h.recordVote(a, up: 1, down: 1, sendNs: 70, ackNs: 80)
        h.recordUpdate(a, to: there, sendNs: 90, ackNs: 100)
        h.recordDelete(a, sendNs: 110, ackNs: 120)
        let versions = h.versions(of: a) ?? []
        XCTAssertEqual(versions.count, 6)
        for (index, v) in versions.enumerated().dropLast() {
            XCTAssertEqual(v.moves + v.votes, index, "version \(index)")
        }
        XCTAssertEqual(versions[1].position, there)
        XCTAssertEqual(versions[3].votes, 2)
        XCTAssertEqual(versions[4].moves, 2)
        XCTAssertFalse(versions[4].deleted)
        XCTAssertTrue(versions[5].deleted)
        XCTAssertEqual(versions[5].sendNs, 110)
        XCTAssertEqual(versions[5].ackNs, 120)
        XCTAssertFalse(h.isAbandoned(a))
        XCTAssertEqual(h.pinCount, 1)
        XCTAssertEqual(h.versionCount, 6)
        XCTAssertEqual(h.latest(a)?.deleted, true)
    }

    func testAVoteReachingTheThresholdRemovesThePin() {
        var h = PinHistory(voteFlagThreshold: 2)
        h.recordCreate(a, at: here, sendNs: 1, ackNs: 2)
        h.recordVote(a, up: 0, down: 1, sendNs: 3, ackNs: 4)
        XCTAssertEqual(h.latest(a)?.deleted, false)
        h.recordVote(a, up: 0, down: 2, sendNs: 5, ackNs: 6)
        XCTAssertEqual(h.latest(a)?.deleted, true)
        XCTAssertEqual(h.latest(a)?.votes, 2)
    }

    func testAVoteThatDidNotAddOneAbandonsThePin() {
        var h = PinHistory()
        h.recordCreate(a, at: here, sendNs: 1, ackNs: 2)
        h.recordVote(a, up: 1, down: 0, sendNs: 3, ackNs: 4)
        // The same session voting again replaces its vote: up + down stays 1.
        h.recordVote(a, up: 0, down: 1, sendNs: 5, ackNs: 6)
        XCTAssertTrue(h.isAbandoned(a))
        XCTAssertEqual(h.abandonedCount, 1)
    }

    func testOpsThatBreakTheRulesAbandonThePin() {
        var h = PinHistory()
        h.recordCreate(a, at: here, sendNs: 10, ackNs: 20)
        h.recordUpdate(a, to: there, sendNs: 15, ackNs: 30)  // sent before the create's ack
        XCTAssertTrue(h.isAbandoned(a))
        XCTAssertEqual(h.versions(of: a)?.count, 1, "nothing appended")

        h.recordCreate(b, at: here, sendNs: 1, ackNs: 2)
        h.recordDelete(b, sendNs: 3, ackNs: 4)
        h.recordUpdate(b, to: there, sendNs: 5, ackNs: 6)  // after the delete
        XCTAssertTrue(h.isAbandoned(b))

        let c = PinID(high: 0, low: 3)
        h.recordUpdate(c, to: there, sendNs: 5, ackNs: 6)  // never created
        XCTAssertTrue(h.isAbandoned(c))

        let d = PinID(high: 0, low: 4)
        h.recordCreate(d, at: here, sendNs: 1, ackNs: 2)
        h.recordCreate(d, at: here, sendNs: 3, ackNs: 4)  // the same id twice
        XCTAssertTrue(h.isAbandoned(d))
    }

    func testAnOpAtTheSameInstantAsThePreviousAckIsFine() {
        // A loop that reads its clock once per turn can stamp an ack and the next send alike.
        var h = PinHistory()
        h.recordCreate(a, at: here, sendNs: 10, ackNs: 20)
        h.recordUpdate(a, to: there, sendNs: 20, ackNs: 30)
        XCTAssertFalse(h.isAbandoned(a))
        XCTAssertEqual(h.versions(of: a)?.count, 2)
    }

    func testAbandonAndMerge() {
        var h1 = PinHistory()
        h1.recordCreate(a, at: here, sendNs: 1, ackNs: 2)
        var h2 = PinHistory()
        h2.recordCreate(b, at: there, sendNs: 1, ackNs: 2)
        h2.abandon(b)
        h1.merge(h2)
        XCTAssertEqual(h1.pinCount, 2)
        XCTAssertTrue(h1.isAbandoned(b))
        XCTAssertFalse(h1.isAbandoned(a))
        var h3 = PinHistory()
        h3.recordCreate(a, at: here, sendNs: 1, ackNs: 2)
        h1.merge(h3)
        XCTAssertTrue(h1.isAbandoned(a), "a pin in both histories cannot be trusted")
        XCTAssertNil(h1.versions(of: PinID(high: 9, low: 9)))
    }
}
