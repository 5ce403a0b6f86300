import XCTest
import VigilCore
import VigilGeo
@testable import VigilLoad

/// Hand-built histories and event logs: each error kind the checker must find, and the racy
/// boundaries (an op in flight while a subscribe is) that it must not call errors.
///
/// Timeline used throughout unless a test says otherwise: the subscribe is sent at 100 and
/// answered at 110; ops before 100 are settled before it, ops sent after 110 fall in the epoch.
final class MapCheckerTests: XCTestCase {
    let area = GeoArea.box(GeoBox(south: 0, west: 0, north: 10, east: 10))
    let inside = GeoPoint(lat: 5, lon: 5)
    let inside2 = GeoPoint(lat: 6, lon: 6)
    let outside = GeoPoint(lat: 20, lon: 20)
    let p = PinID(high: 0xAAAA, low: 1)
    let q = PinID(high: 0xBBBB, low: 2)

    enum End {
        case open
        case unsubscribe(sentNs: UInt64)
        case lost
    }

    /// One subscriber, one epoch (subscribe sent at `sent`, reply at `reply`).
    func check(_ history: PinHistory, sent: UInt64 = 100, reply: UInt64 = 110,
               snapshot: [(PinID, Int)] = [], truncated: Bool = false,
               events: [(PinEventKind, PinID, Int)] = [], end: End = .open,
               area: GeoArea? = nil, scope: MapChecker.AckScope = .oneNode) -> MapCheckResult {
        var log = SubscriberLog(subscriber: 17)
        log.subscribeSent(area: area ?? self.area, atNs: sent)
        log.replyReceived(atNs: reply, snapshot: snapshot.map { ObservedPin(pin: $0.0, observedVersion: $0.1) },
                          truncated: truncated)
        for (kind, pin, version) in events {
            log.event(kind, pin: pin, observedVersion: version)
        }
        switch end {
        case .open: break
        case .unsubscribe(let at):
            log.unsubscribeSent(atNs: at)
            log.replyReceived(atNs: at + 5)
        case .lost:
            log.connectionLost()
        }
        var checker = MapChecker(history: history, maxErrors: 50, scope: scope)
        checker.check(log)
        return checker.result
    }

    func assertClean(_ r: MapCheckResult, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(r.errors.count, 0, "\(r.errors.first)", file: file, line: line)
        XCTAssertEqual(r.lost + r.wrong + r.snapshotErrors, 0, file: file, line: line)
    }

    /// p: created inside (v0) and updated inside (v1) before the subscribe; in the epoch an
    /// update inside (v2), a move out (v3), a move back in (v4), a vote (v5), a delete (v6).
    func fullHistory() -> PinHistory {
        var h = PinHistory()
        h.recordCreate(p, at: inside, sendNs: 10, ackNs: 20)
        h.recordUpdate(p, to: inside2, sendNs: 30, ackNs: 40)
        h.recordUpdate(p, to: inside, sendNs: 200, ackNs: 210)
        h.recordUpdate(p, to: outside, sendNs: 300, ackNs: 310)
        h.recordUpdate(p, to: inside2, sendNs: 400, ackNs: 410)
        h.recordVote(p, up: 1, down: 0, sendNs: 420, ackNs: 430)
        h.recordDelete(p, sendNs: 440, ackNs: 450)
        return h
    }

    /// What a correct server sends for `fullHistory` (the delete's object shows v5).
    let fullEvents: [(PinEventKind, Int)] = [
        (.updated, 2), (.removed(.moved), 3), (.added, 4), (.updated, 5), (.removed(.deleted), 5),
    ]

    func events(_ list: [(PinEventKind, Int)], _ pin: PinID? = nil) -> [(PinEventKind, PinID, Int)] {
        list.map { ($0.0, pin ?? p, $0.1) }
    }

    // MARK: - A correct run

    func testAnExactRunIsClean() {
        let r = check(fullHistory(), snapshot: [(p, 1)], events: events(fullEvents))
        assertClean(r)
        XCTAssertEqual(r.subscribers, 1)
        XCTAssertEqual(r.epochs, 1)
        XCTAssertEqual(r.eventsChecked, 5)
        XCTAssertEqual(r.snapshotPins, 1)
        XCTAssertEqual(r.certainChanges, 5)
    }

    // MARK: - Lost events

    func testALostEventInTheMiddleIsNamed() {
        var list = fullEvents
        list.remove(at: 1)  // removed(moved) v3
        let r = check(fullHistory(), snapshot: [(p, 1)], events: events(list))
        XCTAssertEqual(r.lost, 1)
        XCTAssertEqual(r.wrong, 0)
        XCTAssertEqual(r.errors.first, ["subscriber 17 epoch 1: pin \(p): lost removed(moved) v3 (update out of the area)"])
    }

    func testALostEventRightAfterTheSnapshotIsFound() {
        let r = check(fullHistory(), snapshot: [(p, 1)], events: events(Array(fullEvents.dropFirst())))
        XCTAssertEqual(r.lost, 1)
        XCTAssertTrue(r.errors.first.first?.hasSuffix("lost updated v2 (update inside the area)") ?? false, "\(r.errors.first)")
    }

    func testLostEventsAtTheEndAreFoundWhenCertain() {
        let r = check(fullHistory(), snapshot: [(p, 1)], events: events(Array(fullEvents.dropLast(2))))
        XCTAssertEqual(r.lost, 2)
        XCTAssertEqual(r.errors.first.count, 2)
        XCTAssertTrue(r.errors.first[0].hasSuffix("lost updated v5 (vote inside the area)"), r.errors.first[0])
        XCTAssertTrue(r.errors.first[1].hasSuffix("lost removed(deleted) v6 (delete inside the area)"), r.errors.first[1])
    }

    func testNothingReceivedAtAllLosesEveryCertainChange() {
        let r = check(fullHistory(), snapshot: [(p, 1)], events: [])
        XCTAssertEqual(r.lost, 5)
    }

    func testAChangeCertainInTheEpochButNeverSentIsLostEvenForAPinNeverSeen() {
        var h = PinHistory()
        h.recordCreate(q, at: inside, sendNs: 200, ackNs: 210)
        let r = check(h, events: [])
        XCTAssertEqual(r.lost, 1)
        XCTAssertTrue(r.errors.first.first?.contains("lost added v0 (create into the area)") ?? false, "\(r.errors.first)")
    }

    func testFirstEventUpdatedWithoutSnapshotOrAddedIsALoss() {
        var h = PinHistory()
        // The create is in flight during the subscribe: either in the snapshot or an added event.
        h.recordCreate(q, at: inside, sendNs: 105, ackNs: 115)
        h.recordUpdate(q, to: inside2, sendNs: 200, ackNs: 210)
        let r = check(h, events: [(.updated, q, 1)])
        XCTAssertEqual(r.lost, 1)
        XCTAssertTrue(r.errors.first.first?.contains("its added was lost") ?? false, "\(r.errors.first)")
    }

    // MARK: - Wrong deliveries

    func testADuplicateIsWrong() {
        var list = fullEvents
        list.insert((.updated, 2), at: 1)
        let r = check(fullHistory(), snapshot: [(p, 1)], events: events(list))
        XCTAssertEqual(r.wrong, 1)
        XCTAssertEqual(r.lost, 0)
        XCTAssertTrue(r.errors.first.first?.contains("duplicate or out of order") ?? false)
    }

    func testOutOfOrderEventsAreWrongAndLost() {
        var list = fullEvents
        list.swapAt(0, 1)
        let r = check(fullHistory(), snapshot: [(p, 1)], events: events(list))
        // removed(moved) v3 first skips updated v2 (lost); then v2 comes after v3 (wrong).
        XCTAssertEqual(r.lost, 1)
        XCTAssertEqual(r.wrong, 1)
    }

    func testTheWrongKindIsWrong() {
        var list = fullEvents
        list[0] = (.added, 2)
        let r = check(fullHistory(), snapshot: [(p, 1)], events: events(list))
        XCTAssertEqual(r.wrong, 1)
        XCTAssertTrue(r.errors.first.first?.contains("got added v2, expected updated") ?? false, "\(r.errors.first)")
    }

    func testAnEventForAChangeOutsideTheAreaIsWrong() {
        var h = PinHistory()
        h.recordCreate(q, at: outside, sendNs: 10, ackNs: 20)
        h.recordUpdate(q, to: GeoPoint(lat: 30, lon: 30), sendNs: 200, ackNs: 210)
        let r = check(h, events: [(.updated, q, 1)])
        XCTAssertEqual(r.wrong, 1)
        XCTAssertTrue(r.errors.first.first?.contains("does not touch the area") ?? false, "\(r.errors.first)")
    }

    func testAnUnknownVersionOrNoStampIsWrong() {
        let r = check(fullHistory(), snapshot: [(p, 1)], events: events(fullEvents) + [(.updated, p, 42), (.updated, p, -1)])
        XCTAssertEqual(r.wrong, 2)
        XCTAssertEqual(r.lost, 0)
    }

    func testAnEventAlreadyInTheSnapshotIsWrong() {
        // The update was in flight during the subscribe and the snapshot already shows it, so
        // its event must not follow.
        var h = PinHistory()
        h.recordCreate(q, at: inside, sendNs: 10, ackNs: 20)
        h.recordUpdate(q, to: inside2, sendNs: 105, ackNs: 115)
        let r = check(h, snapshot: [(q, 1)], events: [(.updated, q, 1)])
        XCTAssertEqual(r.wrong, 1)
        XCTAssertEqual(r.lost, 0)
        XCTAssertTrue(r.errors.first.first?.contains("not newer than the snapshot's v1") ?? false, "\(r.errors.first)")
    }

    func testAStaleEventIsWrong() {
        // v1 was acknowledged before the subscribe was sent: its event belongs to an older
        // subscription, never to this epoch (and the pin must be in the snapshot instead).
        var h = PinHistory()
        h.recordCreate(q, at: outside, sendNs: 10, ackNs: 20)
        h.recordUpdate(q, to: inside, sendNs: 30, ackNs: 40)
        let r = check(h, snapshot: [(q, 1)], events: [(.added, q, 1)])
        XCTAssertEqual(r.wrong, 1)
        let absent = check(h, truncated: true, events: [(.added, q, 1)])
        XCTAssertEqual(absent.wrong, 1)
        XCTAssertTrue(absent.errors.first.first?.contains("stale added v1") ?? false, "\(absent.errors.first)")
    }

    func testAnUnexpectedExpiryIsWrong() {
        let r = check(fullHistory(), snapshot: [(p, 1)], events: events(fullEvents + [(.expired, 6)]))
        XCTAssertEqual(r.wrong, 1)
    }

    func testEventsWithNoSubscriptionAreWrong() {
        var log = SubscriberLog(subscriber: 3)
        log.event(.added, pin: p, observedVersion: 0)
        var checker = MapChecker(history: fullHistory())
        checker.check(log)
        XCTAssertEqual(checker.result.wrong, 1)
        XCTAssertEqual(checker.result.errors.first, ["subscriber 3: 1 pin events arrived with no current subscription"])
    }

    func testAFlaggingVoteMustBeRemovedFlagged() {
        var h = PinHistory(voteFlagThreshold: 1)
        h.recordCreate(q, at: inside, sendNs: 10, ackNs: 20)
        h.recordVote(q, up: 0, down: 1, sendNs: 200, ackNs: 210)
        // The flagged event's object has the new counts: moves 0 + votes 1 = change 1.
        assertClean(check(h, snapshot: [(q, 0)], events: [(.removed(.flagged), q, 1)]))
        let wrongReason = check(h, snapshot: [(q, 0)], events: [(.removed(.deleted), q, 0)])
        XCTAssertEqual(wrongReason.wrong, 1)
        XCTAssertEqual(wrongReason.lost, 1)
    }

    // MARK: - Snapshots

    func testAPinInsideThroughoutMustBeInTheSnapshot() {
        let r = check(fullHistory(), snapshot: [], events: events(fullEvents))
        XCTAssertEqual(r.snapshotErrors, 1)
        XCTAssertTrue(r.errors.first.first?.contains("missing from the snapshot") ?? false, "\(r.errors.first)")
    }

    func testATruncatedSnapshotMayLeavePinsOut() {
        assertClean(check(fullHistory(), snapshot: [], truncated: true, events: events(fullEvents)))
    }

    func testSnapshotEntriesAreValidated() {
        var h = PinHistory()
        h.recordCreate(q, at: outside, sendNs: 10, ackNs: 20)
        h.recordUpdate(q, to: inside, sendNs: 30, ackNs: 40)
        h.recordUpdate(q, to: inside2, sendNs: 200, ackNs: 210)
        h.recordDelete(q, sendNs: 300, ackNs: 310)
        let wholeRun: [(PinEventKind, PinID, Int)] = [(.updated, q, 2), (.removed(.deleted), q, 2)]
        assertClean(check(h, snapshot: [(q, 1)], events: wholeRun))

        let outsideVersion = check(h, snapshot: [(q, 0)], truncated: true, events: wholeRun)
        XCTAssertEqual(outsideVersion.snapshotErrors, 1)
        XCTAssertTrue(outsideVersion.errors.first.first?.contains("outside the area") ?? false)

        let tooNew = check(h, snapshot: [(q, 2)], events: [(.removed(.deleted), q, 2)])
        XCTAssertEqual(tooNew.snapshotErrors, 1)
        XCTAssertTrue(tooNew.errors.first.first?.contains("sent after the reply") ?? false, "\(tooNew.errors.first)")

        let deleted = check(h, snapshot: [(q, 3)], events: [])
        XCTAssertGreaterThanOrEqual(deleted.snapshotErrors, 1)
        XCTAssertTrue(deleted.errors.first.first?.contains("a removed pin") ?? false, "\(deleted.errors.first)")

        let unknown = check(h, snapshot: [(q, 9)], events: wholeRun)
        XCTAssertEqual(unknown.snapshotErrors, 1)

        let twice = check(h, snapshot: [(q, 1), (q, 1)], events: wholeRun)
        XCTAssertEqual(twice.snapshotErrors, 1)
        XCTAssertTrue(twice.errors.first.first?.contains("listed twice") ?? false)
    }

    func testAStaleSnapshotVersionIsAnError() {
        var h = PinHistory()
        h.recordCreate(q, at: inside, sendNs: 10, ackNs: 20)
        h.recordUpdate(q, to: inside2, sendNs: 30, ackNs: 40)
        let r = check(h, snapshot: [(q, 0)], events: [])
        XCTAssertEqual(r.snapshotErrors, 1)
        XCTAssertTrue(r.errors.first.first?.contains("stale v0") ?? false, "\(r.errors.first)")
    }

    // MARK: - Racy boundaries that are not errors

    func testAnOpInFlightDuringTheSubscribeMayLandEitherSide() {
        var h = PinHistory()
        h.recordCreate(q, at: inside, sendNs: 10, ackNs: 20)
        h.recordUpdate(q, to: inside2, sendNs: 105, ackNs: 115)
        // Applied after the subscribe: old version in the snapshot, then the event.
        assertClean(check(h, snapshot: [(q, 0)], events: [(.updated, q, 1)]))
        // Applied before: the new version in the snapshot, no event.
        assertClean(check(h, snapshot: [(q, 1)], events: []))
    }

    func testAPinMovingOutDuringTheSubscribeMayBeAbsent() {
        var h = PinHistory()
        h.recordCreate(q, at: inside, sendNs: 10, ackNs: 20)
        h.recordUpdate(q, to: outside, sendNs: 95, ackNs: 115)
        assertClean(check(h, snapshot: [], events: []))
        assertClean(check(h, snapshot: [(q, 0)], events: [(.removed(.moved), q, 1)]))
        // Present in the snapshot but the move out never came: it was sent after the subscribe
        // was sent, but it may have been applied before (then the pin must not be listed) or
        // after (then removed must follow). Listed and no removal is a loss only when certain.
        let r = check(h, snapshot: [(q, 0)], events: [])
        XCTAssertEqual(r.errors.count, 0, "not certain: the move was acknowledged after the subscribe was sent")
    }

    func testAPinCreatedDuringTheSubscribeMayBeAddedOrListed() {
        var h = PinHistory()
        h.recordCreate(q, at: inside, sendNs: 105, ackNs: 115)
        assertClean(check(h, snapshot: [], events: [(.added, q, 0)]))
        assertClean(check(h, snapshot: [(q, 0)], events: []))
        assertClean(check(h, snapshot: [], events: []))
    }

    func testAnOpInFlightAtTheEpochEndMayOrMayNotArrive() {
        var h = PinHistory()
        h.recordCreate(q, at: inside, sendNs: 10, ackNs: 20)
        h.recordUpdate(q, to: inside2, sendNs: 200, ackNs: 210)
        h.recordUpdate(q, to: inside, sendNs: 490, ackNs: 510)
        let arrived: [(PinEventKind, PinID, Int)] = [(.updated, q, 1), (.updated, q, 2)]
        assertClean(check(h, snapshot: [(q, 0)], events: arrived, end: .unsubscribe(sentNs: 500)))
        assertClean(check(h, snapshot: [(q, 0)], events: Array(arrived.prefix(1)), end: .unsubscribe(sentNs: 500)))
        // But an op acknowledged before the unsubscribe was sent is certain.
        let r = check(h, snapshot: [(q, 0)], events: [], end: .unsubscribe(sentNs: 500))
        XCTAssertEqual(r.lost, 1)
        XCTAssertEqual(r.certainChanges, 1)
    }

    func testALostConnectionMakesNothingCertainButStillChecksWhatArrived() {
        assertClean(check(fullHistory(), snapshot: [(p, 1)], events: events(Array(fullEvents.prefix(2))), end: .lost))
        assertClean(check(fullHistory(), snapshot: [(p, 1)], events: [], end: .lost))
        let gap = check(fullHistory(), snapshot: [(p, 1)], events: events([(.updated, 2), (.added, 4)]), end: .lost)
        XCTAssertEqual(gap.lost, 1, "a hole inside what did arrive is still a loss")
    }

    // MARK: - Pins that are not checked

    func testForeignPinsAreCountedAndIgnored() {
        let stranger = PinID(high: 0xCCCC, low: 3)
        let r = check(fullHistory(), snapshot: [(p, 1), (stranger, -1)],
                      events: events(fullEvents) + [(.added, stranger, -1), (.updated, stranger, 7)])
        assertClean(r)
        XCTAssertEqual(r.foreign, 3)
    }

    func testAbandonedPinsAreNotChecked() {
        var h = fullHistory()
        h.abandon(p)
        let r = check(h, snapshot: [(p, 0)], events: events([(.updated, 9), (.added, 2)]))
        assertClean(r)
        XCTAssertEqual(r.unchecked, 3)
    }

    // MARK: - Several epochs

    func testPanningSplitsEventsByReplyAndChecksEachArea() {
        let areaB = GeoArea.box(GeoBox(south: 15, west: 15, north: 25, east: 25))
        var h = PinHistory()
        h.recordCreate(p, at: inside, sendNs: 10, ackNs: 20)     // in A
        h.recordCreate(q, at: outside, sendNs: 10, ackNs: 20)    // in B
        h.recordUpdate(p, to: inside2, sendNs: 200, ackNs: 210)  // epoch 1: updated p v1
        h.recordUpdate(q, to: outside, sendNs: 305, ackNs: 320)  // racy with the second subscribe
        h.recordUpdate(q, to: outside, sendNs: 400, ackNs: 410)  // epoch 2: updated q v2
        h.recordUpdate(p, to: inside, sendNs: 420, ackNs: 430)   // not in B: no event

        var log = SubscriberLog(subscriber: 5)
        log.subscribeSent(area: area, atNs: 100)
        log.replyReceived(atNs: 110, snapshot: [ObservedPin(pin: p, observedVersion: 0)])
        log.event(.updated, pin: p, observedVersion: 1)
        log.subscribeSent(area: areaB, atNs: 300)
        log.replyReceived(atNs: 330, snapshot: [ObservedPin(pin: q, observedVersion: 0)])
        log.event(.updated, pin: q, observedVersion: 1)
        log.event(.updated, pin: q, observedVersion: 2)
        log.unsubscribeSent(atNs: 500)
        log.replyReceived(atNs: 505)
        var checker = MapChecker(history: h)
        checker.check(log)
        assertClean(checker.result)
        XCTAssertEqual(checker.result.epochs, 2)

        // The same, but the server leaks p's last change into the new area.
        log = SubscriberLog(subscriber: 5)
        log.subscribeSent(area: area, atNs: 100)
        log.replyReceived(atNs: 110, snapshot: [ObservedPin(pin: p, observedVersion: 0)])
        log.event(.updated, pin: p, observedVersion: 1)
        log.subscribeSent(area: areaB, atNs: 300)
        log.replyReceived(atNs: 330, snapshot: [ObservedPin(pin: q, observedVersion: 1)])
        log.event(.updated, pin: q, observedVersion: 2)
        log.event(.updated, pin: p, observedVersion: 2)
        log.unsubscribeSent(atNs: 500)
        log.replyReceived(atNs: 505)
        checker = MapChecker(history: h)
        checker.check(log)
        XCTAssertEqual(checker.result.wrong, 1)
        XCTAssertTrue(checker.result.errors.first.first?.hasPrefix("subscriber 5 epoch 2: pin \(p): updated v2") ?? false,
                      "\(checker.result.errors.first)")
    }
}
