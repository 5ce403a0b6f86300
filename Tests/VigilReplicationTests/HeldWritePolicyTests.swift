import Testing
import VigilReplication
import VigilNATS

@Suite struct HeldWritePolicyTests {
    @Test func ambiguousFailuresArePublishedAgainEveryAckTimeout() {
        for error in [JetStreamError.client(.timedOut), .client(.noResponders), .client(.connectionLost), .client(.notConnected)] {
            #expect(HeldWritePolicy.isAmbiguous(error))
        }
        // A timeout: A has passed since the attempt, so again at once.
        #expect(HeldWritePolicy.failed(.client(.timedOut), madeAtMs: 0, sentAtMs: 0, nowMs: 500, ackTimeoutMs: 500,
                                       deadlineMs: 10_000) == .republish(atMs: 500))
        // Not connected (fails at once): the rest of A first.
        #expect(HeldWritePolicy.failed(.client(.notConnected), madeAtMs: 0, sentAtMs: 1_000, nowMs: 1_010, ackTimeoutMs: 500,
                                       deadlineMs: 10_000) == .republish(atMs: 1_500))
    }

    @Test func noCopyIsSentAtOrAfterTheDeadline() {
        #expect(HeldWritePolicy.failed(.client(.timedOut), madeAtMs: 0, sentAtMs: 9_000, nowMs: 9_499, ackTimeoutMs: 500,
                                       deadlineMs: 10_000) == .republish(atMs: 9_500))
        #expect(HeldWritePolicy.failed(.client(.timedOut), madeAtMs: 0, sentAtMs: 9_500, nowMs: 10_000, ackTimeoutMs: 500,
                                       deadlineMs: 10_000) == .awaitDeadline)
    }

    @Test func definiteFailuresGiveUpAtOnce() {
        let api = JSAPIError(code: 400, errorCode: 10071, description: "wrong last sequence")
        for error in [JetStreamError.client(.closed), .client(.outboundFull(limit: 1)), .api(api), .mismatch("x")] {
            #expect(!HeldWritePolicy.isAmbiguous(error))
            #expect(HeldWritePolicy.failed(error, madeAtMs: 0, sentAtMs: 0, nowMs: 1, ackTimeoutMs: 500, deadlineMs: 10_000) == .giveUp)
        }
    }

    @Test func expiresStrictlyAfterTheDeadline() {
        #expect(!HeldWritePolicy.expired(madeAtMs: 1_000, nowMs: 11_000, deadlineMs: 10_000))
        #expect(HeldWritePolicy.expired(madeAtMs: 1_000, nowMs: 11_001, deadlineMs: 10_000))
    }
}
