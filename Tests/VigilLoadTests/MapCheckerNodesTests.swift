import XCTest
import VigilCore
import VigilGeo
@testable import VigilLoad

// The map check over several nodes (`MapChecker.AckScope.severalNodes`): a write's `ok` may
// reach its publisher before or after the subscriber's node applies it, and both orders are
// right; loss, duplicates and events outside the area are still errors. Same timeline and
// fixtures as `MapCheckerTests`: the subscribe is sent at 100 and answered at 110.
extension MapCheckerTests {
    /// One epoch as `check` builds it, ended by an unsubscribe at `unsubscribeAt` (or open).
    func check(_ history: PinHistory, _ scope: MapChecker.AckScope, snapshot: [(PinID, Int)] = [],
               events: [(PinEventKind, PinID, Int)] = [], unsubscribeAt: UInt64? = nil) -> MapCheckResult {
        check(history, snapshot: snapshot, events: events, end: unsubscribeAt.map { .unsubscribe(sentNs: $0) } ?? .open, scope: scope)
    }

    /// p created inside (v0, acknowledged at 20), moved inside (v1, sent 30, acknowledged 40).
    func movedBeforeTheSubscribe() -> PinHistory {
        var h = PinHistory()
        h.recordCreate(p, at: inside, sendNs: 10, ackNs: 20)
        h.recordUpdate(p, to: inside2, sendNs: 30, ackNs: 40)
        return h
    }

    // MARK: - Both orders are right

    func testNodesAChangeAppliedAfterItsOkAndAfterTheSubscribeIsRight() {
        // The subscriber's node had not applied v1 when the subscribe reached it (the writer's ok
        // came at 40, before the subscribe was sent): the snapshot shows v0, then v1 arrives.
        let events: [(PinEventKind, PinID, Int)] = [(.updated, p, 1)]
        assertClean(check(movedBeforeTheSubscribe(), .severalNodes, snapshot: [(p, 0)], events: events))
        // One node would have applied it before the subscribe: both are errors there.
        let oneNode = check(movedBeforeTheSubscribe(), .oneNode, snapshot: [(p, 0)], events: events)
        XCTAssertEqual(oneNode.snapshotErrors, 1)
        XCTAssertEqual(oneNode.wrong, 1)
    }

    func testNodesAChangeAppliedBeforeItsOkIsRightToo() {
        // The usual order: applied (and delivered) before the writer got its ok at 260.
        var h = movedBeforeTheSubscribe()
        h.recordUpdate(p, to: inside, sendNs: 200, ackNs: 260)
        for scope in [MapChecker.AckScope.oneNode, .severalNodes] {
            assertClean(check(h, scope, snapshot: [(p, 1)], events: [(.updated, p, 2)], unsubscribeAt: 300))
        }
    }

    func testNodesAnUnsubscribeThatOvertakesARemoteChangeLosesNothing() {
        // Acknowledged at 210, unsubscribed at 300: the subscriber's node may not have applied it.
        var h = movedBeforeTheSubscribe()
        h.recordUpdate(p, to: inside, sendNs: 200, ackNs: 210)
        assertClean(check(h, .severalNodes, snapshot: [(p, 1)], unsubscribeAt: 300))
        XCTAssertEqual(check(h, .oneNode, snapshot: [(p, 1)], unsubscribeAt: 300).lost, 1)
    }

    // MARK: - What the subscriber's node showed is its clock

    func testNodesAChangeSeenMakesEveryChangeAcknowledgedBeforeItsSendCertain() {
        // p's v2 acknowledged at 210; q created at 300 and its added received: the node applied
        // p's v2 before q's create (one log), so v2's event is owed, and missing.
        var h = movedBeforeTheSubscribe()
        h.recordUpdate(p, to: inside, sendNs: 200, ackNs: 210)
        h.recordCreate(q, at: inside, sendNs: 300, ackNs: 310)
        let r = check(h, .severalNodes, snapshot: [(p, 1)], events: [(.added, q, 0)], unsubscribeAt: 400)
        XCTAssertEqual(r.lost, 1)
        XCTAssertTrue(r.errors.first.first?.hasSuffix("pin \(p): lost updated v2 (update inside the area)") ?? false, "\(r.errors.first)")
        // Received before q's added: right.
        assertClean(check(h, .severalNodes, snapshot: [(p, 1)], events: [(.updated, p, 2), (.added, q, 0)], unsubscribeAt: 400))
    }

    func testNodesASnapshotEntryDatesTheWholeSnapshot() {
        // The snapshot shows q's create (sent at 90), so the node had applied p's v1 (acknowledged
        // at 40): showing p at v0 is stale, and v1 arriving as an event is wrong.
        var h = movedBeforeTheSubscribe()
        h.recordCreate(q, at: inside, sendNs: 90, ackNs: 95)
        let r = check(h, .severalNodes, snapshot: [(p, 0), (q, 0)], events: [(.updated, p, 1)])
        XCTAssertEqual(r.snapshotErrors, 1, "\(r.errors.first)")
        XCTAssertEqual(r.wrong, 1, "\(r.errors.first)")
        XCTAssertTrue(r.errors.first.contains { $0.contains("a change the subscriber's node had already shown it was sent") }, "\(r.errors.first)")
    }

    func testNodesAnEarlierEpochDatesTheNextOne() {
        // Epoch 1 (the whole area) received q's added (sent at 300). p's v2 (into the small area
        // of epoch 2, acknowledged at 210) was therefore applied before the second subscribe: it
        // belongs in epoch 2's snapshot, and arriving as an event it is stale.
        let small = GeoArea.box(GeoBox(south: 4, west: 4, north: 5.5, east: 5.5))  // holds `inside`, not `inside2`
        var h = movedBeforeTheSubscribe()
        h.recordUpdate(p, to: inside, sendNs: 200, ackNs: 210)
        h.recordCreate(q, at: inside2, sendNs: 300, ackNs: 310)
        func log(secondSnapshot: [ObservedPin], secondEvents: [(PinEventKind, PinID, Int)]) -> SubscriberLog {
            var log = SubscriberLog(subscriber: 17)
            log.subscribeSent(area: area, atNs: 100)
            log.replyReceived(atNs: 110, snapshot: [ObservedPin(pin: p, observedVersion: 1)])
            log.event(.updated, pin: p, observedVersion: 2)
            log.event(.added, pin: q, observedVersion: 0)
            log.subscribeSent(area: small, atNs: 400)
            log.replyReceived(atNs: 410, snapshot: secondSnapshot)
            for (kind, pin, version) in secondEvents { log.event(kind, pin: pin, observedVersion: version) }
            return log
        }
        var clean = MapChecker(history: h, scope: .severalNodes)
        clean.check(log(secondSnapshot: [ObservedPin(pin: p, observedVersion: 2)], secondEvents: []))
        assertClean(clean.result)
        var stale = MapChecker(history: h, scope: .severalNodes)
        stale.check(log(secondSnapshot: [], secondEvents: [(.added, p, 2)]))
        XCTAssertEqual(stale.result.snapshotErrors, 1, "\(stale.result.errors.first)")
        XCTAssertEqual(stale.result.wrong, 1, "\(stale.result.errors.first)")
    }

    // MARK: - Still errors

    func testNodesLossDuplicatesAndChangesOutsideTheAreaStillFail() {
        var h = movedBeforeTheSubscribe()
        h.recordUpdate(p, to: inside, sendNs: 200, ackNs: 210)   // v2
        h.recordUpdate(p, to: inside2, sendNs: 220, ackNs: 230)  // v3
        h.recordCreate(q, at: outside, sendNs: 240, ackNs: 250)  // outside: owes nothing
        let skipped = check(h, .severalNodes, snapshot: [(p, 1)], events: [(.updated, p, 3)])
        XCTAssertEqual(skipped.lost, 1, "v2 skipped")
        let twice = check(h, .severalNodes, snapshot: [(p, 1)], events: [(.updated, p, 2), (.updated, p, 2), (.updated, p, 3)])
        XCTAssertEqual(twice.wrong, 1, "v2 twice")
        let back = check(h, .severalNodes, snapshot: [(p, 1)], events: [(.updated, p, 3), (.updated, p, 2)])
        XCTAssertGreaterThanOrEqual(back.wrong, 1, "a step back")
        let foreignArea = check(h, .severalNodes, snapshot: [(p, 1)], events: [(.updated, p, 2), (.updated, p, 3), (.added, q, 0)])
        XCTAssertEqual(foreignArea.wrong, 1, "q is outside the area")
        let beforeSnapshot = check(h, .severalNodes, snapshot: [(p, 1)], events: [(.updated, p, 1), (.updated, p, 2), (.updated, p, 3)])
        XCTAssertEqual(beforeSnapshot.wrong, 1, "v1 is the snapshot's own")
    }
}
