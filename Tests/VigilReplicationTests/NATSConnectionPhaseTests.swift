import Testing
@testable import VigilReplication

/// A random source that always draws the top of the range: each backoff is its ceiling
/// (100, 200, 400, 400 ... here), so the tests can name it.
private struct TopRandom: RandomNumberGenerator {
    mutating func next() -> UInt64 { .max }
}

/// The NATS connection's life driven as a value: no server, no socket, no clock; every event's
/// action and the phase after it asserted.
@Suite struct NATSConnectionPhaseTests {
    typealias Life = NATSConnectionPhase

    /// The defaults but for these: 2 PINGs outstanding at the most, and a backoff from 100 ms.
    static let settings: NATSClientSettings = {
        var s = NATSClientSettings()
        (s.connectTimeoutMs, s.pingIntervalMs, s.reconnectMaxMs) = (1_000, 300, 400)
        return s
    }()

    /// A client of `servers` servers, started at 1,000.
    func started(servers: Int = 3) -> Life {
        var life = Life(serverCount: servers, settings: Self.settings)
        _ = life.start(nowMs: 1_000)
        return life
    }

    /// A client started at 1,000 whose first connection came up at `upAt`.
    func up(servers: Int = 3, at upAt: Int64 = 1_100) -> Life {
        var life = started(servers: servers)
        life.connectSent()
        _ = life.pongReceived(nowMs: upAt)
        return life
    }

    @Test func startTriesTheFirstServerWithTheHandshakeDeadline() {
        var life = Life(serverCount: 3, settings: Self.settings)
        #expect(life.phase == .waiting(untilMs: 0))
        #expect(life.start(nowMs: 1_000) == .connect(server: 0, address: nil))
        #expect(life.phase == .handshaking(deadlineMs: 2_000))
        // Started once: a second start is not an attempt.
        #expect(life.start(nowMs: 1_001) == .none)
    }

    @Test func aHandshakeNotDoneByItsDeadlineIsDroppedAndTheNextServerTriedAtOnce() {
        var random = TopRandom()
        var life = started()
        #expect(life.tick(nowMs: 1_999) == .none)
        #expect(life.tick(nowMs: 2_000) == .drop(.handshakeTimedOut))
        #expect(life.connectionLost(nowMs: 2_000, using: &random) == .retry(atMs: 2_000))
        #expect(life.phase == .waiting(untilMs: 2_000))
        #expect(life.server == 1)
        #expect(life.tick(nowMs: 2_050) == .connect(server: 1, address: nil))
        #expect(life.phase == .handshaking(deadlineMs: 3_050))
    }

    /// Each row: when the loss comes, and when the next attempt is due.
    @Test func aWholeFailedPassWaitsABackoffThatGrowsUpToItsMaximum() {
        var life = Life(serverCount: 2, settings: Self.settings)
        var now: Int64 = 1_000
        _ = life.start(nowMs: now)
        let rows: [(server: Int, retryAfter: Int64)] = [
            (0, 0), (1, 100),  // pass 1
            (0, 0), (1, 200),  // pass 2
            (0, 0), (1, 400),  // pass 3
            (0, 0), (1, 400),  // pass 4: the maximum
        ]
        var random = TopRandom()
        for (number, row) in rows.enumerated() {
            #expect(life.server == row.server, "row \(number)")
            #expect(life.connectionLost(nowMs: now, using: &random) == .retry(atMs: now + row.retryAfter), "row \(number)")
            if row.retryAfter > 0 { #expect(life.tick(nowMs: now + row.retryAfter - 1) == .none, "row \(number)") }
            #expect(life.tick(nowMs: now + row.retryAfter) == .connect(server: (row.server + 1) % 2, address: nil), "row \(number)")
            now += row.retryAfter + 10
        }
        #expect(life.backoff.failures == 4)
    }

    @Test func onlyThePongAfterCONNECTBringsTheConnectionUp() {
        var life = started()
        // A PONG before CONNECT went out (a server's stray one) ends nothing.
        #expect(life.pongReceived(nowMs: 1_050) == .none)
        #expect(life.phase == .handshaking(deadlineMs: 2_000))
        life.connectSent()
        #expect(life.pongReceived(nowMs: 1_100) == .becameUp)
        #expect(life.phase == .up)
        #expect(life.server == 0)
        // Up: the handshake deadline no longer applies, and another PONG is just a PONG.
        #expect(life.tick(nowMs: 2_000) == .sendPing)
        #expect(life.pongReceived(nowMs: 2_010) == .none)
    }

    /// Each row: the tick's time and the action it returns, with no PONG in between.
    @Test func aPingEveryIntervalAndTheConnectionDroppedWithMaxPingsUnanswered() {
        var random = TopRandom()
        var life = up(at: 1_100)
        let rows: [(nowMs: Int64, action: Life.Action, outstanding: Int)] = [
            (1_399, .none, 0),
            (1_400, .sendPing, 1),
            (1_699, .none, 1),
            (1_700, .sendPing, 2),
            (1_999, .none, 2),
            (2_000, .drop(.pingsUnanswered(2)), 2),
        ]
        for row in rows {
            #expect(life.tick(nowMs: row.nowMs) == row.action, "at \(row.nowMs)")
            #expect(life.pingsOutstanding == row.outstanding, "at \(row.nowMs)")
        }
        // The drop is the client's to carry out; the loss moves on to the next server.
        #expect(life.phase == .up)
        #expect(life.connectionLost(nowMs: 2_000, using: &random) == .retry(atMs: 2_000))
        #expect(life.pingsOutstanding == 0)
        #expect(life.tick(nowMs: 2_020) == .connect(server: 1, address: nil))
    }

    @Test func aPongAnswersEveryPingOutstanding() {
        var life = up(at: 1_100)
        #expect(life.tick(nowMs: 1_400) == .sendPing)
        #expect(life.tick(nowMs: 1_700) == .sendPing)
        #expect(life.pongReceived(nowMs: 1_750) == .none)
        #expect(life.pingsOutstanding == 0)
        #expect(life.tick(nowMs: 2_000) == .sendPing)
        #expect(life.pingsOutstanding == 1)
    }

    @Test func theAddressesOfAResolvedNameAreTriedInTurnBeforeTheNextServer() {
        var random = TopRandom()
        var life = started(servers: 2)
        #expect(life.resolved(["10.0.0.1", "10.0.0.2", "10.0.0.3"]) == .connect(server: 0, address: "10.0.0.1"))
        #expect(life.connectionLost(nowMs: 1_010, using: &random) == .retry(atMs: 1_010))
        #expect(life.tick(nowMs: 1_020) == .connect(server: 0, address: "10.0.0.2"))
        #expect(life.connectionLost(nowMs: 1_030, using: &random) == .retry(atMs: 1_030))
        #expect(life.tick(nowMs: 1_040) == .connect(server: 0, address: "10.0.0.3"))
        // The name's last address failed: one failure of the pass, the next server at once.
        #expect(life.connectionLost(nowMs: 1_050, using: &random) == .retry(atMs: 1_050))
        #expect(life.tick(nowMs: 1_060) == .connect(server: 1, address: nil))
        // The second server fails too: the pass is over, a backoff.
        #expect(life.connectionLost(nowMs: 1_070, using: &random) == .retry(atMs: 1_170))
    }

    @Test func aLostConnectionForgetsTheAddressesItDidNotNeed() {
        var random = TopRandom()
        var life = started(servers: 2)
        _ = life.resolved(["10.0.0.1", "10.0.0.2"])
        life.connectSent()
        #expect(life.pongReceived(nowMs: 1_100) == .becameUp)
        #expect(life.connectionLost(nowMs: 1_200, using: &random) == .retry(atMs: 1_200))
        #expect(life.tick(nowMs: 1_200) == .connect(server: 1, address: nil))
        _ = life.connectionLost(nowMs: 1_210, using: &random)
        // Back at the first server: its name is looked up again, not its old second address.
        #expect(life.tick(nowMs: 1_400) == .connect(server: 0, address: nil))
    }

    @Test func aLateAnswerOfTheResolverStartsNothing() {
        var random = TopRandom()
        var life = started()
        _ = life.connectionLost(nowMs: 1_010, using: &random)
        #expect(life.resolved(["10.0.0.1"]) == .none)
        #expect(life.phase == .waiting(untilMs: 1_010))
    }

    /// A connection that lived `stableAfterMs` was a success: its loss resets the backoff. One
    /// that died sooner leaves it growing (a server that accepts and drops makes no spin).
    @Test(arguments: zip([Int64(999), 1_000], [Int64(200), 100]))
    func onlyAConnectionThatLivedASecondResetsTheBackoff(lived: Int64, backoffAfterNextPass: Int64) {
        var life = Life(serverCount: 2, settings: Self.settings)
        var random = TopRandom()
        _ = life.start(nowMs: 1_000)
        _ = life.connectionLost(nowMs: 1_000, using: &random)  // server 0
        _ = life.tick(nowMs: 1_000)
        #expect(life.connectionLost(nowMs: 1_000, using: &random) == .retry(atMs: 1_100))  // server 1: pass failed
        #expect(life.tick(nowMs: 1_100) == .connect(server: 0, address: nil))
        life.connectSent()
        #expect(life.pongReceived(nowMs: 1_100) == .becameUp)
        // The loss of the connection goes on to the next server at once either way.
        #expect(life.connectionLost(nowMs: 1_100 + lived, using: &random) == .retry(atMs: 1_100 + lived))
        #expect(life.tick(nowMs: 1_100 + lived) == .connect(server: 1, address: nil))
        let now = 1_100 + lived
        #expect(life.connectionLost(nowMs: now, using: &random) == .retry(atMs: now + backoffAfterNextPass))
    }

    @Test(arguments: ["waiting", "handshaking", "up"])
    func closeIsTerminalAndNoLaterEventDoesAnything(from: String) {
        var random = TopRandom()
        var life: Life
        switch from {
        case "waiting": life = Life(serverCount: 2, settings: Self.settings)
        case "handshaking": life = started(servers: 2)
        default: life = up(servers: 2)
        }
        life.close()
        #expect(life.phase == .closed)
        #expect(life.isClosed && !life.isUp && !life.isHandshaking)
        #expect(life.start(nowMs: 5_000) == .none)
        #expect(life.tick(nowMs: 1_000_000) == .none)
        #expect(life.resolved(["10.0.0.1"]) == .none)
        life.connectSent()
        #expect(life.pongReceived(nowMs: 5_000) == .none)
        #expect(life.connectionLost(nowMs: 5_000, using: &random) == .none)
        #expect(life.tick(nowMs: 2_000_000) == .none)
        #expect(life.phase == .closed)
    }
}
