import Testing
@testable import VigilClient

/// The closing handshake's rules without a socket: every event, in every phase.
@Suite struct ClosingHandshakeTests {
    let timeout: UInt64 = 2000

    /// A close frame's payload: the code in network order, then the reason.
    func payload(_ code: UInt16, _ reason: String = "") -> [UInt8] {
        [UInt8(code >> 8), UInt8(code & 0xFF)] + Array(reason.utf8)
    }

    @Test func theAppClosesAndTheServerAnswers() {
        var h = ClosingHandshake(timeoutMs: timeout)
        #expect(h.closeRequested(code: 4000, reason: "bye", nowMs: 100) == [.sendClose(payload(4000, "bye"))])
        #expect(h.phase == .closing(deadlineMs: 2100) && !h.isOpen)
        // A second request changes nothing (close is idempotent).
        #expect(h.closeRequested(code: 1000, reason: "", nowMs: 200) == [])
        #expect(h.outputFlushed() == [])  // not shut yet: the server's close may still come
        #expect(h.closeReceived(code: 4000, reason: "", nowMs: 300) == [.report(.closed(code: 4000, reason: ""))])
        // The deadline stays the one the close started.
        #expect(h.phase == .lingering(deadlineMs: 2100))
        #expect(h.outputFlushed() == [.shutWrite])
        #expect(h.outputFlushed() == [])
        #expect(h.inputEnded() == [.end(.closed(code: 4000, reason: ""))])
        #expect(h.phase == .ended)
        #expect(h.inputEnded() == [] && h.tick(nowMs: 9999) == [] && h.aborted() == [])
    }

    @Test func theServerClosesFirst() {
        var h = ClosingHandshake(timeoutMs: timeout)
        #expect(h.closeReceived(code: 1001, reason: "going away", nowMs: 10) == [
            .sendClose(payload(1001)), .report(.closed(code: 1001, reason: "going away")),
        ])
        #expect(h.phase == .lingering(deadlineMs: 2010))
        // The app's close after it sends nothing more.
        #expect(h.closeRequested(code: 1000, reason: "", nowMs: 20) == [])
        #expect(h.outputFlushed() == [.shutWrite])
        #expect(h.tick(nowMs: 2009) == [])
        #expect(h.tick(nowMs: 2010) == [.end(.closed(code: 1001, reason: "going away"))])
    }

    @Test func aCloseWithoutACodeIsAnsweredEmptyAndReadsAs1005() {
        var h = ClosingHandshake(timeoutMs: timeout)
        #expect(h.closeReceived(code: nil, reason: "", nowMs: 0) == [.sendClose([]), .report(.closed(code: 1005, reason: ""))])
    }

    @Test func aViolationFailsTheConnectionWithItsCode() {
        var h = ClosingHandshake(timeoutMs: timeout)
        #expect(h.violated(code: .messageTooBig, reason: "message too big", nowMs: 5) == [
            .sendClose(payload(1009, "message too big")), .report(.protocolViolation("1009 message too big")),
        ])
        #expect(h.phase == .lingering(deadlineMs: 2005))
        // What comes after is not reported again, nor answered.
        #expect(h.closeReceived(code: 1000, reason: "", nowMs: 6) == [])
        #expect(h.violated(code: .protocolError, reason: "x", nowMs: 7) == [])
        #expect(h.inputEnded() == [.end(.protocolViolation("1009 message too big"))])
    }

    @Test func aViolationAfterOurCloseSendsNoSecondClose() {
        var h = ClosingHandshake(timeoutMs: timeout)
        _ = h.closeRequested(code: 1000, reason: "", nowMs: 0)
        #expect(h.violated(code: .invalidPayload, reason: "invalid UTF-8", nowMs: 1) == [.report(.protocolViolation("1007 invalid UTF-8"))])
        #expect(h.phase == .lingering(deadlineMs: 2000))
    }

    @Test func theServerGoesSilentAfterOurClose() {
        var h = ClosingHandshake(timeoutMs: timeout)
        _ = h.closeRequested(code: 1000, reason: "", nowMs: 0)
        #expect(h.tick(nowMs: 1999) == [])
        #expect(h.tick(nowMs: 2000) == [.end(.closed(code: nil, reason: "no close frame from the server within the close timeout"))])
    }

    @Test func theServerHangsUpWithoutAnswering() {
        var h = ClosingHandshake(timeoutMs: timeout)
        _ = h.closeRequested(code: 1000, reason: "", nowMs: 0)
        #expect(h.inputEnded() == [.end(.closed(code: nil, reason: "the server closed the connection without answering the close"))])
    }

    @Test func lostResetAndAborted() {
        var lost = ClosingHandshake(timeoutMs: timeout)
        #expect(lost.inputEnded() == [.end(.closed(code: nil, reason: "connection lost"))])
        var reset = ClosingHandshake(timeoutMs: timeout)
        #expect(reset.ioFailed("recv: Connection reset by peer") == [.end(.closed(code: nil, reason: "recv: Connection reset by peer"))])
        var aborted = ClosingHandshake(timeoutMs: timeout)
        #expect(aborted.aborted() == [.end(.closed(code: nil, reason: "aborted"))])
        // Open: no deadline, nothing to shut.
        var open = ClosingHandshake(timeoutMs: timeout)
        #expect(open.deadlineMs == nil && open.tick(nowMs: .max) == [] && open.outputFlushed() == [])
    }
}
