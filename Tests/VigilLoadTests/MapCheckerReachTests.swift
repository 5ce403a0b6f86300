import XCTest
import VigilCore
import VigilGeo
@testable import VigilLoad

/// The map checker's oracle with pins that have a reach (`vigil-load map --range`): a subscriber
/// with a viewer is owed events only for ranged pins that reach it, one without a viewer none.
final class MapCheckerReachTests: XCTestCase {
    let area = GeoArea.box(GeoBox(south: 0, west: 0, north: 10, east: 10))
    let pinAt = GeoPoint(lat: 5, lon: 5)
    /// ~1,112 m and ~5,560 m north of the pin.
    let near = GeoPoint(lat: 5.01, lon: 5)
    let far = GeoPoint(lat: 5.05, lon: 5)
    let p = PinID(high: 0xCCCC, low: 3)

    func check(_ history: PinHistory, viewer: GeoPoint?, snapshot: [(PinID, Int)] = [],
               events: [(PinEventKind, Int)]) -> MapCheckResult {
        var log = SubscriberLog(subscriber: 3)
        log.subscribeSent(area: area, viewer: viewer, atNs: 100)
        log.replyReceived(atNs: 110, snapshot: snapshot.map { ObservedPin(pin: $0.0, observedVersion: $0.1) })
        for (kind, version) in events { log.event(kind, pin: p, observedVersion: version) }
        var checker = MapChecker(history: history, maxErrors: 50)
        checker.check(log)
        return checker.result
    }

    /// Created with a 2 km reach before the subscribe; in the epoch its reach drops to 500 m
    /// (v1), grows to 10 km (v2), goes away (v3).
    func history() -> PinHistory {
        var h = PinHistory()
        h.recordCreate(p, at: pinAt, rangeMeters: 2_000, sendNs: 10, ackNs: 20)
        h.recordUpdate(p, to: pinAt, rangeMeters: 500, sendNs: 200, ackNs: 210)
        h.recordUpdate(p, to: pinAt, rangeMeters: 10_000, sendNs: 300, ackNs: 310)
        h.recordUpdate(p, to: pinAt, rangeMeters: nil, sendNs: 400, ackNs: 410)
        return h
    }

    func errors(_ r: MapCheckResult) -> UInt64 { r.lost + r.wrong + r.snapshotErrors }

    func testAViewerInReachIsOwedExactlyTheReachEvents() {
        let right: [(PinEventKind, Int)] = [(.removed(.moved), 1), (.added, 2), (.updated, 3)]
        XCTAssertEqual(errors(check(history(), viewer: near, snapshot: [(p, 0)], events: right)), 0)
        // A missing snapshot entry, a lost added and an event owed to nobody are all errors.
        XCTAssertGreaterThan(check(history(), viewer: near, snapshot: [], events: right).snapshotErrors, 0)
        XCTAssertGreaterThan(check(history(), viewer: near, snapshot: [(p, 0)], events: [(.removed(.moved), 1), (.updated, 3)]).lost, 0)
        XCTAssertGreaterThan(check(history(), viewer: near, snapshot: [(p, 0)], events: right + [(.updated, 1)]).wrong, 0)
    }

    func testAFarViewerAndNoViewerSeeTheRangedPinOnlyOnceItReachesThem() {
        // 5.6 km away: out of reach at 2 km and 500 m, in reach at 10 km, and with no range.
        XCTAssertEqual(errors(check(history(), viewer: far, events: [(.added, 2), (.updated, 3)])), 0)
        XCTAssertGreaterThan(check(history(), viewer: far, snapshot: [(p, 0)], events: [(.added, 2), (.updated, 3)]).snapshotErrors, 0,
                             "a ranged pin out of reach must not be in the reply")
        // No viewer: only the removal of the range makes the pin visible.
        XCTAssertEqual(errors(check(history(), viewer: nil, events: [(.added, 3)])), 0)
        XCTAssertGreaterThan(check(history(), viewer: nil, events: [(.added, 2), (.updated, 3)]).wrong, 0)
    }
}
