import XCTest
import VigilCore
import VigilGeo
@testable import VigilLoad

final class SubscriberLogTests: XCTestCase {
    let areaA = GeoArea.box(GeoBox(south: 0, west: 0, north: 10, east: 10))
    let areaB = GeoArea.box(GeoBox(south: 20, west: 20, north: 30, east: 30))
    let p = PinID(high: 0, low: 1)

    func testEventsBelongToTheEpochOfTheLastReply() {
        var log = SubscriberLog(subscriber: 4)
        log.subscribeSent(area: areaA, atNs: 100)
        log.replyReceived(atNs: 110, snapshot: [ObservedPin(pin: p, observedVersion: 0)], truncated: true)
        log.event(.updated, pin: p, observedVersion: 1)
        log.subscribeSent(area: areaB, atNs: 200)
        // Sent by the server before it processed the new subscribe: still the first epoch's.
        log.event(.updated, pin: p, observedVersion: 2)
        log.replyReceived(atNs: 220)
        log.event(.added, pin: p, observedVersion: 3)

        XCTAssertEqual(log.epochs.count, 2)
        let first = log.epochs[0]
        XCTAssertEqual(first.area, areaA)
        XCTAssertEqual(first.subscribeSentNs, 100)
        XCTAssertEqual(first.replyNs, 110)
        XCTAssertEqual(first.end, .request(sentNs: 200))
        XCTAssertTrue(first.truncated)
        XCTAssertEqual(first.snapshot, [ObservedPin(pin: p, observedVersion: 0)])
        XCTAssertEqual(first.events.map(\.observedVersion), [1, 2])
        let second = log.epochs[1]
        XCTAssertEqual(second.area, areaB)
        XCTAssertEqual(second.end, .open)
        XCTAssertEqual(second.events, [MapEvent(kind: .added, pin: p, observedVersion: 3)])
        XCTAssertEqual(log.strayEvents, 0)
    }

    func testEventsWithoutASubscriptionAreStray() {
        var log = SubscriberLog(subscriber: 1)
        log.event(.added, pin: p, observedVersion: 0)
        log.subscribeSent(area: areaA, atNs: 10)
        log.event(.added, pin: p, observedVersion: 0)
        XCTAssertEqual(log.strayEvents, 2, "before the first reply")
        log.replyReceived(atNs: 20)
        log.unsubscribeSent(atNs: 30)
        log.event(.updated, pin: p, observedVersion: 1)
        log.replyReceived(atNs: 40)
        log.event(.updated, pin: p, observedVersion: 2)
        XCTAssertEqual(log.strayEvents, 3)
        XCTAssertEqual(log.epochs.count, 1)
        XCTAssertEqual(log.epochs[0].end, .request(sentNs: 30))
        XCTAssertEqual(log.epochs[0].events.count, 1)
    }

    func testARefusedSubscribeKeepsTheCurrentEpoch() {
        var log = SubscriberLog(subscriber: 1)
        log.subscribeSent(area: areaA, atNs: 10)
        log.replyReceived(atNs: 20)
        log.subscribeSent(area: areaB, atNs: 30)
        log.requestRefused()
        log.event(.updated, pin: p, observedVersion: 1)
        XCTAssertEqual(log.epochs.count, 1)
        XCTAssertEqual(log.epochs[0].end, .open)
        XCTAssertEqual(log.epochs[0].events.count, 1)
    }

    func testALostConnectionEndsTheEpochWithoutCertainty() {
        var log = SubscriberLog(subscriber: 1)
        log.subscribeSent(area: areaA, atNs: 10)
        log.replyReceived(atNs: 20)
        log.subscribeSent(area: areaB, atNs: 30)
        log.connectionLost()
        log.event(.updated, pin: p, observedVersion: 1)
        XCTAssertEqual(log.strayEvents, 1)
        XCTAssertEqual(log.epochs[0].end, .connectionLost)
        XCTAssertNil(log.epochs[0].certainAckBefore)
        // The pending subscribe died with the connection: the next reply is the new one's.
        log.subscribeSent(area: areaB, atNs: 50)
        log.replyReceived(atNs: 60)
        XCTAssertEqual(log.epochs.count, 2)
        XCTAssertEqual(log.epochs[1].subscribeSentNs, 50)
        XCTAssertEqual(log.epochs[1].area, areaB)
    }

    func testScannedEventsWithoutAUUIDAreDropped() {
        var log = SubscriberLog(subscriber: 1)
        log.subscribeSent(area: areaA, atNs: 10)
        log.replyReceived(atNs: 20)
        log.event(ScannedPinEvent(kind: .added, pin: ScannedPin(id: nil, stamp: nil, up: 0, down: 0)))
        log.event(ScannedPinEvent(kind: .added, pin: ScannedPin(id: p, stamp: nil, up: 0, down: 0)))
        XCTAssertEqual(log.epochs[0].events, [MapEvent(kind: .added, pin: p, observedVersion: -1)])
    }

    func testAReplyWithNothingPendingIsIgnored() {
        var log = SubscriberLog(subscriber: 1)
        log.replyReceived(atNs: 5)
        XCTAssertTrue(log.epochs.isEmpty)
    }

    func testEventsAreCompact() {
        XCTAssertLessThanOrEqual(MemoryLayout<MapEvent>.stride, 24)
    }
}
