import Foundation
import Testing
import VigilLoop
import VigilWire
@testable import VigilHTTPClient

/// The client on a real loop against a real server (Tests/http-test-server) over loopback.
@Suite(.serialized) struct HTTPClientTests {
    @Test func sequentialRequestsShareOneKeptAliveConnection() throws {
        let rig = try Rig()
        for _ in 0..<3 { #expect(try rig.exchange("/ok")) }
        let o = rig.outcomes
        #expect((0..<3).map { o.response($0)?.value("x-connection") } == ["1", "1", "1"])
        #expect((0..<3).map { o.response($0)?.value("x-request") } == ["1", "2", "3"])
        #expect(o.body(2) == "ok")
        let counters = rig.client.snapshot
        #expect(counters.connectionsOpened == 1 && counters.connectionReuses == 2 && counters.responsesByClass[1] == 3)
        #expect(counters.connections == 1 && counters.inFlight == 0 && counters.queued == 0)
        #expect(counters.latency.count == 3)
    }

    @Test func aPostBodyArrivesFramedAsTheServerChecksIt() throws {
        let rig = try Rig()
        let payload = Array("{\"notice\":\"panic\"}".utf8)
        rig.send("/echo", method: "POST", headers: [("Content-Type", "application/json"), ("TTL", "60")], body: payload)
        #expect(try rig.wait(for: 1))
        #expect(try rig.exchange("/created", method: "POST"))
        #expect(rig.outcomes.response(0)?.status == 200 && rig.outcomes.response(0)?.body == payload)
        #expect(rig.outcomes.response(1)?.status == 201 && rig.outcomes.response(1)?.location == "/messages/1")
    }

    @Test func thePoolBoundHoldsAndTheQueueDrainsThroughIt() throws {
        let rig = try Rig { $0.maxConnectionsPerOrigin = 2 }
        for _ in 0..<6 { rig.send("/slow?ms=100") }
        #expect(rig.client.snapshot.connections == 2 && rig.client.snapshot.queued == 6)
        var most = 0
        #expect(try turn(rig.loop, until: {
            most = max(most, rig.client.snapshot.connections, rig.client.snapshot.inFlight)
            return rig.outcomes.count == 6
        }))
        #expect(most == 2)
        #expect(Set((0..<6).compactMap { rig.outcomes.response($0)?.value("x-connection") }) == ["1", "2"])
        #expect((0..<6).allSatisfy { rig.outcomes.response($0)?.status == 200 })
    }

    @Test func aDestinationPolicyRefusesAnAddressLiteralAndANameThatResolvesToIt() throws {
        let rig = try Rig { $0.destinations = .publicOnly() }
        rig.send("/ok")                       // 127.0.0.1 as written
        rig.send("/ok", host: "localhost")    // a name: refused after resolution, every address of it
        #expect(try rig.wait(for: 2))
        #expect(rig.outcomes.failure(0) == .destinationRefused(.loopback))
        #expect(rig.outcomes.failure(1) == .destinationRefused(.loopback))
        #expect(rig.client.snapshot.failures[.destinationRefused] == 2 && rig.client.snapshot.responsesByClass.reduce(0, +) == 0)
        let allowed = try Rig { $0.destinations = .publicOnly(allowLoopback: true) }
        #expect(try allowed.exchange("/ok"))
        #expect(allowed.outcomes.response(0)?.status == 200)
    }

    @Test func pastTheQueueBoundRequestsAreRefused() throws {
        let rig = try Rig {
            $0.maxConnectionsPerOrigin = 1
            $0.maxQueuedPerOrigin = 2
            $0.maxQueued = 3
        }
        for _ in 0..<3 { rig.send("/slow?ms=50") }
        // Another origin (the same server by name) has its own queue, but the total is reached.
        rig.send("/ok", host: "localhost")
        rig.send("/ok", host: "localhost")
        try rig.loop.turn(timeoutMs: 0)
        #expect(rig.outcomes.count == 2)
        #expect(rig.outcomes.failure(0) == .queueFull(.origin) && rig.outcomes.failure(1) == .queueFull(.total))
        #expect(try rig.wait(for: 5))
        #expect(rig.client.snapshot.failures[.queueFull] == 2 && rig.client.snapshot.responsesByClass[1] == 3)
    }

    @Test func aStalledServerTimesOutAtTheDeadlineWhileAnotherOriginIsServed() throws {
        let rig = try Rig()
        let start = monotonicMilliseconds()
        rig.send("/stall", timeoutMs: 600)
        // localhost is another origin (resolved off the loop): its requests are served meanwhile.
        for _ in 0..<3 { #expect(try rig.exchange("/ok", host: "localhost")) }
        #expect(rig.outcomes.list.allSatisfy { if case .response = $0.outcome { true } else { false } })
        #expect(monotonicMilliseconds() - start < 600)
        #expect(try rig.wait(for: 4))
        let waited = rig.outcomes.list[3].atMs - start
        #expect(rig.outcomes.failure(3) == .timeout(.awaitingResponse))
        #expect(waited >= 600 && waited < 800, "timed out after \(waited) ms")
        // The stalled connection is gone with its request; the other origin's stays.
        #expect(rig.client.snapshot.connections == 1 && rig.client.snapshot.failures[.timeout] == 1)
    }

    @Test func aServerThatDropsMidResponseFailsTheRequestAndTheNextGetsANewConnection() throws {
        let rig = try Rig()
        #expect(try rig.exchange("/ok"))
        #expect(try rig.exchange("/drop"))
        #expect(try rig.exchange("/ok"))
        #expect(rig.outcomes.failure(1) == .closedEarly)
        #expect(rig.outcomes.response(0)?.value("x-connection") == "1" && rig.outcomes.response(2)?.value("x-connection") == "2")
        #expect(rig.client.snapshot.failures[.closedEarly] == 1)
    }

    @Test func connectionCloseIsHonouredAndTheConnectionReplaced() throws {
        let rig = try Rig { $0.maxConnectionsPerOrigin = 1 }
        rig.send("/close")
        rig.send("/ok")
        #expect(try rig.wait(for: 2))
        // The origin's one connection closed after "bye"; the request waiting for it got a new one.
        #expect(rig.outcomes.body(0) == "bye" && rig.outcomes.response(0)?.value("x-connection") == "1")
        #expect(rig.outcomes.body(1) == "ok" && rig.outcomes.response(1)?.value("x-connection") == "2")
    }

    @Test func aChunkedBodyIsDecodedAndItsConnectionKept() throws {
        let rig = try Rig()
        #expect(try rig.exchange("/chunked"))
        #expect(try rig.exchange("/ok"))
        #expect(rig.outcomes.body(0) == "hello, world")
        #expect(rig.outcomes.response(1)?.value("x-connection") == "1")
    }

    @Test func retryAfterAsSecondsAndAsADate() throws {
        let rig = try Rig()
        #expect(try rig.exchange("/retry-seconds"))
        #expect(try rig.exchange("/retry-date"))
        #expect(rig.outcomes.response(0)?.status == 503 && rig.outcomes.response(0)?.retryAfterSeconds == 120)
        #expect(rig.outcomes.response(1)?.status == 429)
        let delay = rig.outcomes.response(1)?.retryAfterSeconds ?? -1
        #expect(delay >= 28 && delay <= 31, "Retry-After date read as \(delay) s")
        #expect(rig.client.snapshot.responsesByClass[3] == 1 && rig.client.snapshot.responsesByClass[4] == 1)
    }

    @Test func aHeadResponseHasNoBodyWhateverItsLength() throws {
        let rig = try Rig()
        #expect(try rig.exchange("/ok", method: "HEAD"))
        #expect(try rig.exchange("/ok"))
        #expect(rig.outcomes.response(0)?.body == [] && rig.outcomes.response(0)?.value("content-length") == "2")
        #expect(rig.outcomes.body(1) == "ok" && rig.outcomes.response(1)?.value("x-connection") == "1")
    }

    @Test func aBodyOverTheBoundFailsAsTooLarge() throws {
        let rig = try Rig()
        #expect(try rig.exchange("/big"))
        #expect(rig.outcomes.failure(0) == .tooLarge("Content-Length 2097152 over 1048576 bytes"))
    }

    @Test func localhostIsResolvedOffTheLoop() throws {
        let rig = try Rig()
        #expect(try rig.exchange("/ok", host: "localhost"))
        #expect(rig.outcomes.body(0) == "ok")
    }

    @Test func failuresBeforeAnyResponse() throws {
        let rig = try Rig()
        // RFC 6761: .invalid never resolves.
        rig.client.send(try OutgoingURL(parsing: "https://push.invalid/x"), into: rig.outcomes)
        let closed = try Socket.listen(on: ListenAddress(host: "127.0.0.1", port: 0), backlog: 1)
        let port = Socket.localPort(closed)!
        close(closed)
        rig.client.send(try OutgoingURL(parsing: "http://127.0.0.1:\(port)/"), into: rig.outcomes)
        rig.send("/ok", headers: [("X", "a\r\nInjected: 1")])
        #expect(try rig.wait(for: 3))
        let kinds = Set((0..<3).compactMap { rig.outcomes.failure($0)?.kind })
        #expect(kinds == [.dns, .connect, .invalidRequest])
        #expect((0..<3).contains { rig.outcomes.failure($0) == .connect("Connection refused") })
    }

    @Test func closingTheClientFailsWhatIsPending() throws {
        let rig = try Rig()
        rig.send("/stall")
        #expect(try turn(rig.loop, until: { rig.client.snapshot.inFlight == 1 }))
        rig.send("/ok", host: "localhost")
        rig.client.close()
        rig.send("/ok")
        #expect(try rig.wait(for: 3))
        #expect((0..<3).allSatisfy { rig.outcomes.failure($0) == .shutDown })
        #expect(rig.client.snapshot.connections == 0)
    }

    @Test func anIdleConnectionIsClosedAfterTheKeepAliveTimeout() throws {
        let rig = try Rig { $0.keepAliveIdleMs = 200 }
        #expect(try rig.exchange("/ok"))
        #expect(rig.client.snapshot.connections == 1)
        #expect(try turn(rig.loop, until: { rig.client.snapshot.connections == 0 }, timeoutMs: 1_000))
        #expect(try rig.exchange("/ok"))
        #expect(rig.outcomes.response(1)?.value("x-connection") == "2")
    }
}
