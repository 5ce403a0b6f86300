import Testing
@testable import VigilServer

@Suite struct KeepAliveTests {
    @Test func waitsWhileTheClientIsActive() {
        #expect(KeepAlive.decide(now: 1_000, lastActivity: 900, pingSentAt: 0, interval: 300, timeout: 200) == .wait(until: 1_200))
    }

    @Test func pingsAnIdleClient() {
        #expect(KeepAlive.decide(now: 1_200, lastActivity: 900, pingSentAt: 0, interval: 300, timeout: 200) == .ping(timeoutAt: 1_400))
    }

    @Test func dropsAClientThatStaysSilentAfterThePing() {
        #expect(KeepAlive.decide(now: 1_400, lastActivity: 900, pingSentAt: 1_200, interval: 300, timeout: 200) == .drop)
        #expect(KeepAlive.decide(now: 1_300, lastActivity: 900, pingSentAt: 1_200, interval: 300, timeout: 200) == .wait(until: 1_400))
    }
}
