import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// Settled notice deliveries in the state formats (issue 24): journal kind 30, snapshot version 7,
/// replay, and the hub's ledger that a restart reads them back into.
@Suite struct NoticeSettlementStateTests {
    static func settlements(of circle: CheckinCircle) -> [NoticeSettlement] {
        circle.subscriptions.enumerated().map { i, sub in
            NoticeSettlement(circle: circle.id, notice: NoticeID(kind: .panicStarted, subjectHigh: 7, subjectLow: UInt64(i), at: 1_000 + Int64(i)),
                             subscription: sub.id, settlement: DeliverySettlement.allCases[i % DeliverySettlement.allCases.count])
        }
    }

    @Test func aSettlementRecordRoundTripsAndDamageIsRefused() throws {
        let circle = try CircleStateTests.circle(seed: 5, subscribed: true)
        for s in Self.settlements(of: circle) {
            let payload = Array(JournalCodec.encode(.noticeSettled(s)).dropFirst(JournalCodec.frameBytes))
            #expect(payload[0] == 30 && payload.count == 1 + 62)
            #expect(try JournalCodec.decodeRecord(payload: payload) == .noticeSettled(s))
            for cut in 0..<payload.count {
                #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: Array(payload.prefix(cut))) }
            }
            var badKind = payload
            badKind[1 + 16 + 16] = 0            // the notice's kind
            #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: badKind) }
            var badSettlement = payload
            badSettlement[payload.count - 1] = 6
            #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: badSettlement) }
        }
    }

    @Test func snapshotsKeepSettlementsAndReplayRestoresThemToTheirCircles() throws {
        let circle = try CircleStateTests.circle(seed: 6, subscribed: true)
        let settled = Self.settlements(of: circle)
        let snapshot = StateSnapshot(takenAt: 5, journalSegment: 6, pins: [], streams: [], circles: [circle], settlements: settled)
        let bytes = SnapshotCodec.encode(snapshot)
        let decoded = try SnapshotCodec.decode(bytes)
        #expect(decoded.settlements == settled)
        var writer = SnapshotWriter(takenAt: 5, journalSegment: 6)
        writer.append(circle)
        for s in settled { writer.append(s) }
        #expect(writer.finish() == bytes)

        // From the journal: applied once, a duplicate counted as one; a settlement of a circle
        // that is gone is not restored.
        let gone = try CircleStateTests.circle(seed: 7, subscribed: true)
        var image = StateImage()
        image.apply([.circlePut(circle)] + settled.map { .noticeSettled($0) } + [.noticeSettled(settled[0])])
        image.apply(Self.settlements(of: gone).map { .noticeSettled($0) })
        #expect(image.duplicateCount == 1)
        let hub = image.restoreCircles(settings: CheckinSettings(), now: circle.activeAt)
        #expect(hub.exportSettlements() == settled.sorted { ($0.notice, $0.subscription) < ($1.notice, $1.subscription) })
        #expect(image.snapshot(takenAt: 1, journalSegment: 1).settlements.count == settled.count)
    }

    @Test func theLedgerForgetsOldSettlementsAndThoseOfARemovedCircle() throws {
        let circle = try CircleStateTests.circle(seed: 8, subscribed: true)
        var hub = CheckinHub(settings: CheckinSettings())
        hub.restoreCircles([circle], now: circle.activeAt)
        let settled = Self.settlements(of: circle)
        for s in settled {
            let added = hub.recordSettlement(s)
            #expect(added)
        }
        let again = hub.recordSettlement(settled[0])         // held already
        #expect(!again)
        #expect(hub.settlementCount == settled.count)
        hub.forgetSettlements(before: 1_001)                 // notices at 1_000 and before are past their time to live
        #expect(hub.settlementCount == settled.count - 1)
        var out: [CheckinDelivery] = []
        hub.remove(circle.id, reason: .idle, out: &out)
        #expect(hub.settlementCount == 0)
        let orphan = hub.recordSettlement(settled[1])         // a circle not held keeps none
        #expect(!orphan)
    }
}
