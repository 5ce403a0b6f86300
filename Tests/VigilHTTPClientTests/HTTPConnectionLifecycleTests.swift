import Testing
@testable import VigilHTTPClient

/// A connection's life driven as a value, event by event, with the actions each returns.
@Suite struct HTTPConnectionLifecycleTests {
    static let t = HTTPConnectionLifecycle.Timeouts(connectMs: 1_000, keepAliveIdleMs: 30_000)

    @Test func aNameIsResolvedAndEachAddressTriedInTurn() {
        var (c, actions) = HTTPConnectionLifecycle.opening(host: "push.example", isAddress: false, nowMs: 100, Self.t)
        #expect(actions == [.armTimer(atMs: 1_100), .resolve] && c.phase == .resolving)
        #expect(c.resolved(["::1", "127.0.0.1"]) == [.connect(address: "::1")])
        #expect(c.lost(.connect("Connection refused")) == [.closeSocket, .connect(address: "127.0.0.1")])
        #expect(c.lost(.connect("Connection refused")) == [.closeSocket, .release(attemptFailure: .connect("Connection refused"))])
        #expect(c.phase == .closed && c.lost(.closedEarly) == [])
    }

    @Test func anAddressIsConnectedToDirectly() {
        let (c, actions) = HTTPConnectionLifecycle.opening(host: "127.0.0.1", isAddress: true, nowMs: 0, Self.t)
        #expect(actions == [.armTimer(atMs: 1_000), .connect(address: "127.0.0.1")] && c.phase == .connecting)
    }

    @Test func resolutionFailures() {
        var (c, _) = HTTPConnectionLifecycle.opening(host: "nowhere.invalid", isAddress: false, nowMs: 0, Self.t)
        #expect(c.resolveFailed("Name or service not known") == [.closeSocket, .release(attemptFailure: .dns("Name or service not known"))])
        var (empty, _) = HTTPConnectionLifecycle.opening(host: "x.example", isAddress: false, nowMs: 0, Self.t)
        #expect(empty.resolved([]) == [.closeSocket, .release(attemptFailure: .dns("no usable address"))])
    }

    @Test func theConnectTimeoutCoversResolvingAndConnecting() {
        var (c, _) = HTTPConnectionLifecycle.opening(host: "slow.example", isAddress: false, nowMs: 0, Self.t)
        #expect(c.timerFired() == [.closeSocket, .release(attemptFailure: .timeout(.connecting))])
        var (d, _) = HTTPConnectionLifecycle.opening(host: "10.0.0.1", isAddress: true, nowMs: 0, Self.t)
        #expect(d.timerFired() == [.closeSocket, .release(attemptFailure: .timeout(.connecting))])
        // A late answer after the timeout changes nothing.
        #expect(c.resolved(["10.0.0.1"]) == [])
    }

    @Test func requestsOneAtATimeOnAKeptAliveConnection() {
        var (c, _) = HTTPConnectionLifecycle.opening(host: "127.0.0.1", isAddress: true, nowMs: 0, Self.t)
        #expect(c.connected(nowMs: 50, Self.t) == [.armTimer(atMs: 30_050), .ready])
        #expect(c.assigned(7) == [.cancelTimer, .send(request: 7)] && c.phase == .busy(request: 7))
        #expect(c.assigned(8) == [.fail(request: 8, .closedEarly)], "never two requests in flight")
        #expect(c.responded(keepAlive: true, nowMs: 80, Self.t) == [.respond(request: 7), .armTimer(atMs: 30_080), .ready])
        #expect(c.served == 1 && c.phase == .idle)
        #expect(c.assigned(9) == [.cancelTimer, .send(request: 9)])
        #expect(c.responded(keepAlive: false, nowMs: 90, Self.t) == [.respond(request: 9), .closeSocket, .release(attemptFailure: nil)])
    }

    @Test func theKeepAliveTimeoutClosesAnIdleConnection() {
        var c = Self.idle()
        #expect(c.timerFired() == [.closeSocket, .release(attemptFailure: nil)])
    }

    @Test func aBusyConnectionWaitsForTheRequestsOwnDeadline() {
        var c = Self.idle()
        _ = c.assigned(3)
        #expect(c.timerFired() == [])
        #expect(c.deadlinePassed() == [.fail(request: 3, .timeout(.awaitingResponse)), .closeSocket, .release(attemptFailure: nil)])
        #expect(c.deadlinePassed() == [])
    }

    @Test func losingTheConnection() {
        var busy = Self.idle()
        _ = busy.assigned(1)
        #expect(busy.lost(.closedEarly) == [.fail(request: 1, .closedEarly), .closeSocket, .release(attemptFailure: nil)])
        // An idle connection the server let go is no failure of anyone's.
        var idle = Self.idle()
        #expect(idle.lost(.connect("the server closed the connection")) == [.closeSocket, .release(attemptFailure: nil)])
        var confused = Self.idle()
        #expect(confused.unexpectedInput() == [.closeSocket, .release(attemptFailure: nil)])
    }

    @Test func closingByTheClient() {
        var busy = Self.idle()
        _ = busy.assigned(4)
        #expect(busy.close() == [.fail(request: 4, .shutDown), .closeSocket, .release(attemptFailure: nil)])
        var (opening, _) = HTTPConnectionLifecycle.opening(host: "a.example", isAddress: false, nowMs: 0, Self.t)
        #expect(opening.close() == [.closeSocket, .release(attemptFailure: nil)])
        #expect(opening.close() == [])
    }

    static func idle() -> HTTPConnectionLifecycle {
        var (c, _) = HTTPConnectionLifecycle.opening(host: "127.0.0.1", isAddress: true, nowMs: 0, t)
        _ = c.connected(nowMs: 0, t)
        return c
    }
}
