import Testing
import VigilWire
@testable import VigilServer

/// The connection's life driven as a value: no socket, no loop, every transition's actions asserted.
@Suite struct ConnectionLifecycleTests {
    typealias Lifecycle = ConnectionLifecycle
    let t = Lifecycle.Timeouts(handshakeMs: 500, pingIntervalMs: 300, pongTimeoutMs: 200, closeTimeoutMs: 100)

    /// A connection accepted at 1,000 and upgraded at 1,010.
    func open() -> Lifecycle {
        var (c, _) = Lifecycle.accepted(nowMs: 1_000, t)
        c.input(nowMs: 1_010)
        _ = c.upgraded(nowMs: 1_010, t)
        return c
    }

    @Test func anAcceptedConnectionWaitsForItsRequestHeadUntilTheHandshakeDeadline() {
        let (c, actions) = Lifecycle.accepted(nowMs: 1_000, t)
        #expect(c.phase == .http)
        #expect(Array(actions) == [.armTimer(atMs: 1_500)])
    }

    @Test func aRequestHeadNotFinishedInTimeGets408ThenTheWriteSideIsShut() {
        var (c, _) = Lifecycle.accepted(nowMs: 1_000, t)
        #expect(Array(c.timerFired(nowMs: 1_500, t)) == [.respondTimeout, .shutWrite, .armTimer(atMs: 1_600)])
        #expect(c.phase == .draining)
        // Draining: the close timeout drops the socket if the peer never closes.
        #expect(Array(c.timerFired(nowMs: 1_600, t)) == [.drop])
        #expect(c.phase == .closed)
    }

    @Test func aPlainHTTPResponseDrainsAndIsDroppedOnEOF() {
        var (c, _) = Lifecycle.accepted(nowMs: 1_000, t)
        #expect(Array(c.responded(nowMs: 1_001, t)) == [.shutWrite, .armTimer(atMs: 1_101)])
        #expect(c.phase == .draining)
        #expect(c.pingReceived([1]).isEmpty)
        #expect(Array(c.gone()) == [.drop])
    }

    @Test func aResponseWithABodyToDeliverHasTheHandshakeTimeoutMoreToGo() {
        var (c, _) = Lifecycle.accepted(nowMs: 1_000, t)
        #expect(Array(c.responded(nowMs: 1_001, t, withBody: true)) == [.shutWrite, .armTimer(atMs: 1_001 + t.closeTimeoutMs + t.handshakeMs)])
        #expect(Array(c.timerFired(nowMs: 1_001 + t.closeTimeoutMs + t.handshakeMs, t)) == [.drop])
    }

    @Test func theUpgradeOpensAndStartsTheKeepAliveClock() {
        var (c, _) = Lifecycle.accepted(nowMs: 1_000, t)
        #expect(Array(c.upgraded(nowMs: 1_010, t)) == [.armTimer(atMs: 1_310)])
        #expect(c.isOpen && c.readsFrames)
        // A second upgrade is not a transition.
        #expect(c.upgraded(nowMs: 1_020, t).isEmpty)
    }

    @Test func aPeerCloseIsEchoedWithItsCodeThenTheSessionEndsAndTheSocketDrains() {
        var c = open()
        #expect(Array(c.closeReceived(code: 1000, nowMs: 2_000, t))
                == [.sendClose(code: .normal, reason: ""), .endApplication, .shutWrite, .armTimer(atMs: 2_100)])
        #expect(c.phase == .draining && !c.readsFrames)
        // Further frames or closes change nothing.
        #expect(c.closeReceived(code: 1000, nowMs: 2_010, t).isEmpty)
        #expect(Array(c.gone()) == [.drop])
    }

    @Test func aCloseWithoutACodeIsEchoedEmpty() {
        var c = open()
        #expect(Array(c.closeReceived(code: nil, nowMs: 2_000, t)).first == .sendClose(code: nil, reason: ""))
    }

    @Test func aCloseAfterOursWasSentCompletesTheHandshakeWithoutAnotherCloseFrame() {
        var c = open()
        #expect(Array(c.closeRequested(.goingAway, reason: "bye", nowMs: 2_000, t))
                == [.sendClose(code: .goingAway, reason: "bye"), .armTimer(atMs: 2_100)])
        #expect(c.phase == .closeSent && c.readsFrames && !c.isOpen)
        #expect(Array(c.closeReceived(code: 1001, nowMs: 2_050, t)) == [.endApplication, .shutWrite, .armTimer(atMs: 2_150)])
        #expect(c.phase == .draining)
    }

    @Test func aPeerThatNeverAnswersOurCloseIsDroppedAtTheCloseTimeout() {
        var c = open()
        _ = c.closeRequested(.policyViolation, reason: "", nowMs: 2_000, t)
        #expect(Array(c.timerFired(nowMs: 2_100, t)) == [.endApplication, .drop])
        #expect(c.phase == .closed)
    }

    @Test func closingTwiceSendsOneCloseFrame() {
        var c = open()
        _ = c.closeRequested(.normal, reason: "", nowMs: 2_000, t)
        #expect(c.closeRequested(.goingAway, reason: "", nowMs: 2_001, t).isEmpty)
    }

    @Test(arguments: [
        (WireError.unmaskedFrame, CloseCode.protocolError),
        (WireError.reservedOpcode(3), CloseCode.protocolError),
        (WireError.invalidUTF8, CloseCode.invalidPayload),
        (WireError.messageTooBig, CloseCode.messageTooBig),
    ])
    func protocolFailuresCloseWithTheirCode(error: WireError, code: CloseCode) {
        var c = open()
        let actions = Array(c.protocolViolation(error, nowMs: 2_000, t))
        #expect(actions == [.sendClose(code: code, reason: error.reason), .endApplication, .shutWrite, .armTimer(atMs: 2_100)])
        #expect(c.phase == .draining)
    }

    @Test func aProtocolFailureAfterOurCloseSendsNoSecondClose() {
        var c = open()
        _ = c.closeRequested(.normal, reason: "", nowMs: 2_000, t)
        #expect(Array(c.protocolViolation(.invalidUTF8, nowMs: 2_010, t)) == [.endApplication, .shutWrite, .armTimer(atMs: 2_110)])
    }

    @Test func pingsAreAnsweredOnlyWhileOpen() {
        var c = open()
        #expect(Array(c.pingReceived([1, 2])) == [.sendPong([1, 2])])
        _ = c.closeRequested(.normal, reason: "", nowMs: 2_000, t)
        #expect(c.pingReceived([1, 2]).isEmpty)
    }

    @Test func anActiveClientIsNotPingedAndTheCheckMovesToItsLastInput() {
        var c = open()
        c.input(nowMs: 1_200)
        #expect(Array(c.timerFired(nowMs: 1_310, t)) == [.armTimer(atMs: 1_500)])
    }

    @Test func anIdleClientIsPingedAndDroppedIfItStaysSilent() {
        var c = open()
        #expect(Array(c.timerFired(nowMs: 1_310, t)) == [.sendPing, .armTimer(atMs: 1_510)])
        // A timer before the pong timeout (moved by nothing) just waits for it.
        #expect(Array(c.timerFired(nowMs: 1_400, t)) == [.armTimer(atMs: 1_510)])
        #expect(Array(c.timerFired(nowMs: 1_510, t)) == [.endApplication, .drop])
    }

    @Test func anyInputAnswersAPing() {
        var c = open()
        _ = c.timerFired(nowMs: 1_310, t)
        c.input(nowMs: 1_350)
        #expect(Array(c.timerFired(nowMs: 1_510, t)) == [.armTimer(atMs: 1_650)])
        #expect(c.isOpen)
    }

    @Test func aVanishedPeerEndsTheSessionOnlyIfOneWasOpen() {
        var c = open()
        #expect(Array(c.gone()) == [.endApplication, .drop])
        #expect(c.gone().isEmpty)
        var (h, _) = Lifecycle.accepted(nowMs: 0, t)
        #expect(Array(h.gone()) == [.drop])
    }

    @Test func theStateStaysSmall() {
        #expect(MemoryLayout<ConnectionLifecycle>.size <= 10)
    }

    /// The times are kept in 32 bits: the keep-alive rule holds where the clock's milliseconds
    /// pass a multiple of 2^32 (after 49.7 days of uptime, and every 49.7 days after), and a day
    /// into a run of any length.
    @Test(arguments: [Int64(1) << 32, Int64(5) << 32, Int64(86_400_000), Int64(1) << 45])
    func theKeepAliveRuleHoldsAcrossTheClocksWrap(_ wrap: Int64) {
        var (c, _) = Lifecycle.accepted(nowMs: wrap - 150, t)
        _ = c.upgraded(nowMs: wrap - 100, t)
        c.input(nowMs: wrap - 100)
        // Active: the check moves to the last input, on the far side of the wrap.
        c.input(nowMs: wrap + 50)
        #expect(Array(c.timerFired(nowMs: wrap + 200, t)) == [.armTimer(atMs: wrap + 350)])
        // Idle: pinged at its deadline, waited for, dropped after the pong timeout.
        #expect(Array(c.timerFired(nowMs: wrap + 350, t)) == [.sendPing, .armTimer(atMs: wrap + 550)])
        #expect(Array(c.timerFired(nowMs: wrap + 400, t)) == [.armTimer(atMs: wrap + 550)])
        #expect(Array(c.timerFired(nowMs: wrap + 550, t)) == [.endApplication, .drop])
        // A ping sent just before the wrap is timed from when it was sent.
        var d = open(at: wrap - 400)
        #expect(Array(d.timerFired(nowMs: wrap - 90, t)) == [.sendPing, .armTimer(atMs: wrap + 110)])
        #expect(Array(d.timerFired(nowMs: wrap + 20, t)) == [.armTimer(atMs: wrap + 110)])
        d.input(nowMs: wrap + 30)
        #expect(Array(d.timerFired(nowMs: wrap + 110, t)) == [.armTimer(atMs: wrap + 330)])
    }

    /// A connection accepted and upgraded at `ms`.
    func open(at ms: Int64) -> Lifecycle {
        var (c, _) = Lifecycle.accepted(nowMs: ms, t)
        c.input(nowMs: ms)
        _ = c.upgraded(nowMs: ms, t)
        return c
    }
}
