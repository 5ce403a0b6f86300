import Testing
@testable import VigilCore

@Suite struct NoticeBoardTests {
    static let circle = CircleID(high: 1, low: 2)
    static let stream = StreamID(high: 3, low: 4)

    static func notice(_ kind: NoticeKind = .panicStarted, at: Int64 = 1_000, audience: NoticeAudience = .members(except: nil),
                       ttl: Int64 = 60_000) -> Notice {
        let id = kind.isAboutStream ? NoticeID(kind: kind, stream: stream, at: at) : NoticeID(kind: kind, circle: circle, at: at)
        return Notice(id: id, circle: circle, stream: kind.isAboutStream ? stream : nil, status: kind.isAboutStream ? .red : nil,
                      audience: audience, expiresAt: at + ttl)
    }

    static let everyone: [(target: String, role: CheckinRole)] = [("owner-phone", .owner), ("mum-phone", .member(1)),
                                                                  ("mum-tablet", .member(1)), ("sam-phone", .member(2))]

    func board(_ tweak: (inout NoticeSettings) -> Void = { _ in }) -> NoticeBoard<String> {
        var s = NoticeSettings()
        tweak(&s)
        return NoticeBoard(settings: s)
    }

    @Test func noticeIDRoundTripsItsBytesAndIsDerivedFromItsCause() {
        let id = NoticeID(kind: .checkinRequested, circle: Self.circle, at: 1_700_000_000_123, member: 7)
        #expect(id.bytes.count == NoticeID.byteCount)
        #expect(NoticeID(bytes: id.bytes) == id)
        #expect(id.description.utf8.count == 40)
        #expect(NoticeID(id.description) == id && NoticeID(String(id.description.dropLast())) == nil)
        #expect(id.atStep(2) != id && id.atStep(2).base == id && NoticeID(id.atStep(2).description)?.step == 2)
        // The same cause gives the same id (a restart rebuilds it); another member or time does not.
        #expect(NoticeID(kind: .checkinRequested, circle: Self.circle, at: 1_700_000_000_123, member: 7) == id)
        #expect(NoticeID(kind: .checkinRequested, circle: Self.circle, at: 1_700_000_000_123, member: 8) != id)
        #expect(NoticeID(kind: .checkinRequested, circle: Self.circle, at: 1_700_000_000_124, member: 7) != id)
        var bad = id.bytes
        bad[16] = 99
        #expect(NoticeID(bytes: bad) == nil)
        #expect(NoticeID(bytes: id.bytes.dropLast()) == nil)
    }

    @Test func aNoticeGoesToItsAudienceOnly() {
        var b = board()
        let toMembers = b.post(Self.notice(), to: Self.everyone, now: 1_000)
        #expect(toMembers.queued == 3)
        let taken = b.takeDue(now: 1_000, limit: 10).map(\.key.target).sorted()
        #expect(taken == ["mum-phone", "mum-tablet", "sam-phone"])

        var c = board()
        c.post(Self.notice(.checkinRequested, audience: .owner), to: Self.everyone, now: 1_000)
        #expect(c.takeDue(now: 1_000, limit: 10).map(\.key.target) == ["owner-phone"])

        var d = board()
        d.post(Self.notice(.checkinAnswered, audience: .members(except: 1)), to: Self.everyone, now: 1_000)
        #expect(d.takeDue(now: 1_000, limit: 10).map(\.key.target) == ["sam-phone"])
    }

    @Test func postingTheSameNoticeAgainAddsOnlyWhatIsMissing() {
        var b = board()
        let n = Self.notice()
        b.post(n, to: Self.everyone, now: 1_000)
        let first = b.takeDue(now: 1_000, limit: 1)
        #expect(b.finished(first[0].key, .accepted, now: 1_010, random: 0) == .settled(.delivered))
        // A restart posts the notice again: the settled delivery is not repeated, the pending ones are not doubled.
        #expect(b.post(n, to: Self.everyone, now: 1_020).queued == 0)
        #expect(b.pendingCount == 2)
        var restarted = board()
        restarted.settle(first[0].key, as: .delivered)
        #expect(restarted.post(n, to: Self.everyone, now: 1_020).queued == 2)
    }

    @Test func aNoticePastItsTimeToLiveIsNotQueued() {
        var b = board()
        #expect(b.post(Self.notice(ttl: 10), to: Self.everyone, now: 1_010).queued == 0)
        #expect(b.pendingCount == 0)
    }

    @Test func failuresBackOffWithJitterWithinTheirBounds() {
        var b = board()
        b.post(Self.notice(ttl: 10_000_000), to: [("mum-phone", .member(1))], now: 0)
        var now: Int64 = 0
        var delays: [Int64] = []
        for _ in 0..<12 {
            let a = b.takeDue(now: now, limit: 1)
            #expect(a.count == 1)
            guard case .retry(let at)? = b.finished(a[0].key, .failed, now: now, random: UInt64(delays.count) &* 0x9E37_79B9_7F4A_7C15) else {
                Issue.record("expected a retry"); return
            }
            delays.append(at - now)
            #expect(b.takeDue(now: at - 1, limit: 1).isEmpty)  // not before its time
            now = at
        }
        for (i, d) in delays.enumerated() {
            let cap = min(Int64(1_000) << i, 300_000)
            #expect(d >= cap / 2 && d <= cap, "attempt \(i + 1): \(d) ms, cap \(cap)")
        }
        #expect(delays.last! >= 150_000)
    }

    @Test func backoffJitterSpreadsRetries() {
        let b = board()
        let spread = Set((0..<64).map { b.backoff(after: 5, random: UInt64($0) &* 0x2545_F491_4F6C_DD1D) })
        #expect(spread.count > 32)
        #expect(spread.allSatisfy { $0 >= 8_000 && $0 <= 16_000 })
    }

    @Test func retryAfterIsHonouredAndCapped() {
        var b = board { $0.maxRetryAfterMs = 30_000 }
        b.post(Self.notice(ttl: 10_000_000), to: [("mum-phone", .member(1))], now: 0)
        var a = b.takeDue(now: 0, limit: 1)
        #expect(b.finished(a[0].key, .throttled(retryAfterMs: 7_000), now: 100, random: 12345) == .retry(at: 7_100))
        a = b.takeDue(now: 7_100, limit: 1)
        #expect(b.finished(a[0].key, .throttled(retryAfterMs: 3_600_000), now: 7_200, random: 1) == .retry(at: 37_200))
        a = b.takeDue(now: 37_200, limit: 1)
        #expect(a.first?.number == 3)
    }

    @Test func goneAndRefusedSettleAtOnce() {
        var b = board()
        b.post(Self.notice(), to: Self.everyone, now: 1_000)
        let a = b.takeDue(now: 1_000, limit: 3)
        #expect(b.finished(a[0].key, .gone, now: 1_001, random: 0) == .settled(.gone))
        #expect(b.finished(a[1].key, .refused(status: 400), now: 1_001, random: 0) == .settled(.refused))
        #expect(b.settlement(of: a[0].key) == .gone)
        #expect(b.pendingCount == 1)
        // What is in flight is counted once, and leaves the count once, however it ends.
        #expect(b.inFlightCount == 1)
        #expect(b.finished(a[2].key, .accepted, now: 1_001, random: 0) == .settled(.delivered))
        #expect(b.inFlightCount == 0 && b.pendingCount == 0)
        // An answer for something no longer pending is ignored.
        #expect(b.finished(a[0].key, .accepted, now: 1_002, random: 0) == nil)
    }

    @Test func aRetryPastTheTimeToLiveExpires() {
        var b = board()
        b.post(Self.notice(at: 0, ttl: 5_000), to: [("mum-phone", .member(1))], now: 0)
        let a = b.takeDue(now: 0, limit: 1)
        #expect(b.finished(a[0].key, .throttled(retryAfterMs: 6_000), now: 10, random: 0) == .settled(.expired))
        #expect(b.pendingCount == 0 && b.inFlightCount == 0)
    }

    @Test func anAckCancelsTheHoldersOtherDevicesOnly() {
        var b = board()
        let n = Self.notice()
        b.post(n, to: Self.everyone, now: 1_000)
        let inFlight = b.takeDue(now: 1_000, limit: 1)   // Mum's phone is in flight when her ack comes
        #expect(inFlight.map(\.key.target) == ["mum-phone"])
        let cancelled = b.cancel(n.id, for: .member(1))
        #expect(cancelled.map(\.target) == ["mum-tablet"])
        #expect(b.pendingCount == 2 && b.inFlightCount == 1)
        // What is in flight cannot be called back: the service's answer settles it as usual.
        #expect(b.finished(inFlight[0].key, .accepted, now: 1_100, random: 0) == .settled(.delivered))
        #expect(b.takeDue(now: 1_000, limit: 10).map(\.key.target) == ["sam-phone"])
    }

    @Test func anAcknowledgedDeliveryThatFailsInFlightIsNotRetried() {
        for failure in [DeliveryResult.failed, .throttled(retryAfterMs: 10), .throttled(retryAfterMs: nil)] {
            var b = board()
            let n = Self.notice()
            b.post(n, to: [("mum-phone", .member(1))], now: 1_000)
            let a = b.takeDue(now: 1_000, limit: 1)
            #expect(b.cancel(n.id, for: .member(1)).isEmpty)
            #expect(b.finished(a[0].key, failure, now: 1_100, random: 0) == .settled(.cancelled))
            #expect(b.pendingCount == 0 && b.inFlightCount == 0)
            #expect(b.settlement(of: a[0].key) == .cancelled)
        }
        // Without the ack, the same failure is retried.
        var b = board()
        b.post(Self.notice(), to: [("mum-phone", .member(1))], now: 1_000)
        let a = b.takeDue(now: 1_000, limit: 1)
        guard case .retry? = b.finished(a[0].key, .failed, now: 1_100, random: 0) else {
            Issue.record("a failure without an ack is retried")
            return
        }
    }

    @Test func droppingATargetCancelsItsDeliveries() {
        var b = board()
        b.post(Self.notice(), to: Self.everyone, now: 1_000)
        b.post(Self.notice(.panicEnded, at: 1_500), to: Self.everyone, now: 1_500)
        #expect(b.dropTarget("mum-phone") == 2)
        #expect(b.pendingCount == 4)
        #expect(!b.takeDue(now: 2_000, limit: 10).contains { $0.key.target == "mum-phone" })
    }

    @Test func theBoundRefusesWhatDoesNotFit() {
        var b = board { $0.maxPending = 2 }
        let posted = b.post(Self.notice(), to: Self.everyone, now: 1_000)
        #expect(posted == NoticeBoard<String>.Posted(queued: 2, refused: 1))
        #expect(b.pendingCount == 2)
    }

    @Test func pruneExpiresWaitingDeliveriesAndForgetsOldNotices() {
        var b = board { $0.ttlMs = 10_000 }
        b.post(Self.notice(at: 0, ttl: 10_000), to: Self.everyone, now: 0)
        let a = b.takeDue(now: 0, limit: 1)
        _ = b.finished(a[0].key, .accepted, now: 5, random: 0)
        #expect(b.prune(now: 9_999).isEmpty)
        let expired = b.prune(now: 10_000)
        #expect(expired.count == 2)
        #expect(b.pendingCount == 0)
        #expect(b.notices.isEmpty)
        #expect(b.exportSettled().count == 0)
    }

    @Test func theHeapStaysBoundedUnderChurn() {
        var b = board()
        var now: Int64 = 0
        for i in 0..<2_000 {
            let n = Self.notice(at: Int64(i), ttl: 100_000_000)
            b.post(n, to: [("t\(i % 7)", .member(1))], now: now)
            for a in b.takeDue(now: now, limit: 100) { _ = b.finished(a.key, .accepted, now: now, random: 0) }
            now += 1
        }
        #expect(b.pendingCount == 0)
        #expect(b.heap.count <= 2 * b.pendingCount + 64)
    }
}
