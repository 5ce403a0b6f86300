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
        #expect(MemoryLayout<ConnectionLifecycle>.size <= 24)
    }
}
