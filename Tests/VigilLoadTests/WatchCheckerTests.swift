import XCTest
@testable import VigilLoad

final class WatchCheckerTests: XCTestCase {
    func testPlainWatchExpectsTheNextSeq() {
        var w = WatchChecker(label: "watcher 1")
        XCTAssertNil(w.lastSeq)
        w.watchAccepted(stateSeq: 44, since: nil, gap: false)
        XCTAssertEqual(w.lastSeq, 44)
        w.event(seq: 45, ended: false)
        w.event(seq: 46, ended: false)
        XCTAssertEqual(w.events, 2)
        XCTAssertEqual(w.lastSeq, 46)
        XCTAssertTrue(w.errors.isEmpty)
    }

    func testSinceReplaysFromSincePlusOne() {
        var w = WatchChecker(label: "w")
        w.watchAccepted(stateSeq: 44, since: 41, gap: false)
        XCTAssertEqual(w.nextExpected, 42)
        XCTAssertEqual(w.lastSeq, 41)
        for seq in 42...47 { w.event(seq: UInt64(seq), ended: false) }
        XCTAssertTrue(w.errors.isEmpty, "\(w.errors.first)")
        XCTAssertEqual(w.lastSeq, 47)
    }

    func testSinceEqualToTheCurrentSeqReplaysNothing() {
        var w = WatchChecker(label: "w")
        w.watchAccepted(stateSeq: 10, since: 10, gap: false)
        w.event(seq: 11, ended: false)
        XCTAssertTrue(w.errors.isEmpty)
    }

    func testAnAnnouncedGapIsCountedNotAnError() {
        var w = WatchChecker(label: "w")
        w.watchAccepted(stateSeq: 5000, since: 100, gap: true)
        XCTAssertEqual(w.announcedGaps, 1)
        XCTAssertEqual(w.skippedByGaps, 4900)
        XCTAssertEqual(w.lastSeq, 5000)
        w.event(seq: 5001, ended: false)
        XCTAssertTrue(w.errors.isEmpty)
        XCTAssertEqual(w.lost, 0)
    }

    func testAMissingReplayIsLoss() {
        var w = WatchChecker(label: "watcher 3 stream S")
        w.watchAccepted(stateSeq: 44, since: 41, gap: false)
        // The server forgot to replay 42...44 and went straight to live events.
        w.event(seq: 45, ended: false)
        XCTAssertEqual(w.lost, 3)
        XCTAssertEqual(w.errors.count, 1)
        XCTAssertEqual(w.errors.first, ["watcher 3 stream S: lost seqs 42...44 (got seq 45)"])
        w.event(seq: 46, ended: false)
        XCTAssertEqual(w.errors.count, 1, "resynchronised after the loss")
    }

    func testASingleLostSeqIsNamed() {
        var w = WatchChecker(label: "w")
        w.watchAccepted(stateSeq: 1, since: nil, gap: false)
        w.event(seq: 3, ended: false)
        XCTAssertEqual(w.lost, 1)
        XCTAssertEqual(w.errors.first, ["w: lost seq 2 (got seq 3)"])
    }

    func testDuplicatesAreErrors() {
        var w = WatchChecker(label: "w")
        w.watchAccepted(stateSeq: 1, since: nil, gap: false)
        w.event(seq: 2, ended: false)
        w.event(seq: 2, ended: false)
        w.event(seq: 1, ended: false)
        w.event(seq: 3, ended: false)
        XCTAssertEqual(w.duplicates, 2)
        XCTAssertEqual(w.lost, 0)
        XCTAssertEqual(w.errors.count, 2)
        XCTAssertEqual(w.lastSeq, 3)
    }

    func testNothingWithASeqAfterTheEnd() {
        var w = WatchChecker(label: "w")
        w.watchAccepted(stateSeq: 1, since: nil, gap: false)
        w.event(seq: 2, ended: false)
        w.event(seq: 3, ended: true)
        XCTAssertEqual(w.endedAt, 3)
        XCTAssertTrue(w.errors.isEmpty)
        w.event(seq: 4, ended: false)
        XCTAssertEqual(w.afterEnd, 1)
        XCTAssertEqual(w.errors.count, 1)
    }

    func testWatchingAnEndedStreamReplaysUpToTheEnd() {
        var w = WatchChecker(label: "w")
        w.watchAccepted(stateSeq: 9, since: 7, gap: false, stateEnded: true)
        w.event(seq: 8, ended: false)
        w.event(seq: 9, ended: true)
        XCTAssertTrue(w.errors.isEmpty, "\(w.errors.first)")
        w.event(seq: 10, ended: false)
        XCTAssertEqual(w.afterEnd, 1)
    }

    func testReconnectWithLastSeqContinuesSeamlessly() {
        var w = WatchChecker(label: "w")
        w.watchAccepted(stateSeq: 3, since: nil, gap: false)
        w.event(seq: 4, ended: false)
        w.watchEnded()
        // An event on the dead connection after it ended is an error.
        w.event(seq: 5, ended: false)
        XCTAssertEqual(w.errors.count, 1)
        XCTAssertEqual(w.lastSeq, 4)
        w.watchAccepted(stateSeq: 8, since: w.lastSeq, gap: false)
        for seq in 5...9 { w.event(seq: UInt64(seq), ended: false) }
        XCTAssertEqual(w.errors.count, 1)
        XCTAssertEqual(w.lost + w.duplicates, 0)
    }

    func testSeqGoingBackwardsAcrossWatchesIsAnError() {
        var w = WatchChecker(label: "w")
        w.watchAccepted(stateSeq: 10, since: nil, gap: false)
        w.event(seq: 11, ended: false)
        w.watchEnded()
        w.watchAccepted(stateSeq: 5, since: nil, gap: false)
        XCTAssertEqual(w.errors.count, 1)
        XCTAssertTrue(w.errors.first.first?.contains("backwards") ?? false)
    }

    func testAReplyBelowSinceIsAnError() {
        var w = WatchChecker(label: "w")
        w.watchAccepted(stateSeq: 3, since: 7, gap: false)
        XCTAssertEqual(w.errors.count, 1)
        w.event(seq: 4, ended: false)
        XCTAssertEqual(w.errors.count, 1, "the state is taken as the truth afterwards")
    }

    func testEventsBeforeTheFirstWatchAreErrors() {
        var w = WatchChecker(label: "w")
        w.event(seq: 1, ended: false)
        XCTAssertEqual(w.errors.count, 1)
        XCTAssertEqual(w.events, 1)
    }

    func testTotalsSumCheckers() {
        var a = WatchChecker(label: "a")
        a.watchAccepted(stateSeq: 1, since: nil, gap: false)
        a.event(seq: 2, ended: false)
        a.event(seq: 4, ended: false)
        var b = WatchChecker(label: "b")
        b.watchAccepted(stateSeq: 50, since: 10, gap: true)
        b.event(seq: 51, ended: true)
        var totals = WatchTotals(maxErrors: 5)
        totals.add(a)
        totals.add(b)
        XCTAssertEqual(totals.watchers, 2)
        XCTAssertEqual(totals.events, 3)
        XCTAssertEqual(totals.lost, 1)
        XCTAssertEqual(totals.announcedGaps, 1)
        XCTAssertEqual(totals.skippedByGaps, 40)
        let summary = totals.summary()
        XCTAssertEqual(summary.checked, 2)
        XCTAssertEqual(summary.errors.count, 1)
        XCTAssertEqual(summary.counters.first { $0.name == "lost" }?.value, 1)
    }
}

final class WatchCheckerConflationTests: XCTestCase {
    func testASkipIsConflationForAStalledWatcher() {
        var w = WatchChecker(label: "stalled", toleratesConflation: true)
        w.watchAccepted(stateSeq: 1, since: nil, gap: false)
        w.event(seq: 2, ended: false)
        w.event(seq: 9, ended: false)   // 3...8 replaced by 9
        w.event(seq: 10, ended: false)
        w.event(seq: 20, ended: false)  // 11...19
        w.event(seq: 21, ended: true)
        XCTAssertTrue(w.errors.isEmpty, "\(w.errors.first)")
        XCTAssertEqual(w.conflations, 2)
        XCTAssertEqual(w.conflatedSeqs, 6 + 9)
        XCTAssertEqual(w.lost, 0)
        XCTAssertEqual(w.endedAt, 21)
        var totals = WatchTotals()
        totals.add(w)
        let counters = Dictionary(uniqueKeysWithValues: totals.summary().counters.map { ($0.name, $0.value) })
        XCTAssertEqual(counters["conflations"], 2)
        XCTAssertEqual(counters["conflated seqs"], 15)
    }

    func testAStalledWatcherStillFailsOnADuplicateOrALostEnd() {
        var w = WatchChecker(label: "stalled", toleratesConflation: true)
        w.watchAccepted(stateSeq: 1, since: nil, gap: false)
        w.event(seq: 5, ended: false)
        w.event(seq: 5, ended: false)
        XCTAssertEqual(w.duplicates, 1)
        w.event(seq: 8, ended: true)  // the newest location (6 or 7) is never replaced: 6...7 were lost
        XCTAssertEqual(w.lost, 2)
        XCTAssertEqual(w.errors.count, 2)
    }

    func testAReadingWatcherNeverToleratesASkip() {
        var w = WatchChecker(label: "normal")
        w.watchAccepted(stateSeq: 1, since: nil, gap: false)
        w.event(seq: 4, ended: false)
        XCTAssertEqual(w.lost, 2)
        XCTAssertEqual(w.conflations, 0)
        XCTAssertEqual(w.errors.count, 1)
    }

    // MARK: - Several nodes

    // The checker only compares a watcher's own replies and events, which come from one node in
    // that node's order: where the owner's acknowledgements stand (its node may be ahead or
    // behind) never enters. These cases are what a cluster does.

    func testAWatcherOnANodeBehindTheOwnersAcksSeesEverySeqLater() {
        // The owner has its ok for seq 7; the watcher's node had applied up to 5 when the watch came.
        var w = WatchChecker(label: "w")
        w.watchAccepted(stateSeq: 5, since: nil, gap: false)
        for seq in 6...9 { w.event(seq: UInt64(seq), ended: false) }
        XCTAssertTrue(w.errors.isEmpty, "\(w.errors.first)")
    }

    func testAWatcherOnANodeAheadOfTheOwnersAcksIsRightToo() {
        // The watcher's node applied seq 8 before the owner's node sent the owner its ok for 8.
        var w = WatchChecker(label: "w")
        w.watchAccepted(stateSeq: 8, since: nil, gap: false)
        w.event(seq: 9, ended: false)
        XCTAssertTrue(w.errors.isEmpty, "\(w.errors.first)")
    }

    func testMovingToANodeThatHasAllTheWatcherSawReplaysExactlyTheRest() {
        var w = WatchChecker(label: "w")
        w.watchAccepted(stateSeq: 3, since: nil, gap: false)
        for seq in 4...6 { w.event(seq: UInt64(seq), ended: false) }
        w.watchEnded()
        // Node C has applied up to 9: 7...9 replayed, then live.
        w.watchAccepted(stateSeq: 9, since: w.lastSeq, gap: false)
        for seq in 7...11 { w.event(seq: UInt64(seq), ended: false) }
        XCTAssertTrue(w.errors.isEmpty, "\(w.errors.first)")
        // A node behind what the watcher saw must refuse the since (invalid_since, retried):
        // answering it is an error, and so is a replay that skips or repeats.
        var behind = w
        behind.watchEnded()
        behind.watchAccepted(stateSeq: 10, since: 11, gap: false)
        XCTAssertEqual(behind.errors.count, 2, "\(behind.errors.first)")  // below since, and seq went backwards
        var skipping = w
        skipping.watchEnded()
        skipping.watchAccepted(stateSeq: 14, since: 11, gap: false)
        skipping.event(seq: 13, ended: false)
        XCTAssertEqual(skipping.lost, 1)
        var repeating = w
        repeating.watchEnded()
        repeating.watchAccepted(stateSeq: 14, since: 11, gap: false)
        repeating.event(seq: 11, ended: false)
        XCTAssertEqual(repeating.duplicates, 1)
    }
}
