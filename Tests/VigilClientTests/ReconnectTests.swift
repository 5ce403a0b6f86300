import Foundation
import Testing
@testable import VigilClient

// Swift twins of clients/js/test/reconnect.test.js with the fake transport: backoff and
// jitter, the attempt timeout, the heartbeat, re-subscribe with reconciliation, re-watch with
// since (every event once, in order, or a gap), owner resume; and the phone's life.

@Suite(.timeLimit(.minutes(1)))
struct ReconnectTests {
    @Test func theDefaultsAreTheJavaScriptClients() {
        let p = ReconnectPolicy()
        #expect(p.minDelay == .milliseconds(500))
        #expect(p.maxDelay == .seconds(15))
        #expect(p.factor == 2)
        #expect(p.jitter == 0.5)
        let o = VigilClientOptions()
        #expect(o.requestTimeout == .seconds(10))
        #expect(o.attemptTimeout == .seconds(10))
        #expect(o.rateLimitRetries == 3)
        #expect(o.heartbeat == nil)
        #expect(o.heartbeatTimeout == .seconds(10))
        #expect(o.outboxLimit == 100)
        // 500 ms doubling to 15 s, each cut by up to half.
        #expect(p.delay(attempt: 0, random: 0) == .milliseconds(500))
        #expect(p.delay(attempt: 0, random: 0.999_999) == .milliseconds(250))
        #expect(p.delay(attempt: 5, random: 0) == .seconds(15))
        #expect(p.delay(attempt: 40, random: 0.5) == .milliseconds(11250))
    }

    @Test func theClientBacksOffWithJitterBetweenAttemptsWhileTheServerIsDown() async throws {
        let server = FakeServer()
        let randoms = RandomScript([0, 0.5, 1.0 - 1e-9, 0.25, 0.5, 0])
        let (c, conn, clock) = try await server.client {
            $0.reconnect = ReconnectPolicy(minDelay: .milliseconds(20), maxDelay: .milliseconds(160), factor: 2, jitter: 0.5)
            $0.random = { randoms.next() }
        }
        let events = Reader(await c.events())
        server.refuse(5)  // the sixth retry gets through
        conn.cut()
        var delays: [Duration] = []
        while delays.count < 6 {
            guard let (attempt, delay) = await events.next(where: { $0.reconnecting != nil })?.reconnecting else { break }
            #expect(attempt == delays.count + 1)
            delays.append(delay)
            clock.advance(by: delay)
        }
        // 20, 40, 80, 160, 160, 160 ms, each cut by jitter × random.
        #expect(delays == [20, 30, 40, 140, 120, 160].map { Duration.milliseconds($0) })
        #expect(await events.next(where: \.isReconnected) != nil)
        #expect(await c.connections == 2)
        await c.close()
    }

    @Test func aRefusedAttemptIsRetriedAfterTheBackoffNotTheAttemptTimeout() async throws {
        let server = FakeServer()
        server.refuse(2)
        let clock = TestClock()
        var o = VigilClientOptions()
        o.clock = clock
        o.reconnect = ReconnectPolicy(minDelay: .milliseconds(50), maxDelay: .milliseconds(50), jitter: 0)
        let c = VigilClient(url: URL(string: "ws://fake/v1")!, options: o, transport: server)
        let events = Reader(await c.events())
        async let connecting = c.connect()
        for attempt in 1...2 {
            let r = await events.next(where: { $0.reconnecting != nil })?.reconnecting
            #expect(r?.0 == attempt)
            #expect(r?.1 == .milliseconds(50))
            clock.advance(by: .milliseconds(50))
        }
        _ = try await connecting
        #expect(server.attemptsMade == 3, "one retry per refused attempt")
        await c.close()
    }

    @Test func anAttemptThatIsNotWelcomedInTimeIsGivenUpAndRetried() async throws {
        let server = FakeServer(autoWelcome: false)
        let clock = TestClock()
        var o = VigilClientOptions()
        o.clock = clock
        o.attemptTimeout = .milliseconds(200)
        o.reconnect = ReconnectPolicy(minDelay: .milliseconds(50), maxDelay: .milliseconds(50), jitter: 0)
        let c = VigilClient(url: URL(string: "ws://fake/v1")!, options: o, transport: server)
        let events = Reader(await c.events())
        async let connecting = c.connect()
        let silent = try await server.nextConnection()
        clock.advance(by: .milliseconds(200))
        #expect(await events.next(where: { $0.reconnecting != nil })?.reconnecting?.0 == 1)
        server.setAutoWelcome(true)
        clock.advance(by: .milliseconds(50))
        _ = try await connecting
        #expect(await c.state == .open)
        #expect(silent.closeCode != nil, "the silent attempt was closed")
        await c.close()
    }

    @Test func aSilentConnectionIsFoundByTheHeartbeatAndReplaced() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client {
            $0.heartbeat = .milliseconds(200)
            $0.heartbeatTimeout = .milliseconds(300)
            $0.reconnect = ReconnectPolicy(minDelay: .milliseconds(50), maxDelay: .milliseconds(50), jitter: 0)
        }
        let events = Reader(await c.events())
        // Quiet but healthy: probed and kept.
        clock.advance(by: .milliseconds(100))
        clock.advance(by: .milliseconds(100))
        let probe = try await conn.expect("panic.unwatch")
        #expect(probe["stream"] == "-")
        conn.ok(probe)
        // A round trip: the probe's answer is handled before the clock moves on.
        async let barrier = c.request("unsubscribe")
        let u = try await conn.expect("unsubscribe")
        conn.ok(u)
        _ = try await barrier
        // The server goes silent: the next probe is not answered.
        clock.advance(by: .milliseconds(100))
        clock.advance(by: .milliseconds(100))
        _ = try await conn.expect("panic.unwatch")
        clock.advance(by: .milliseconds(300))
        guard case .stalled(let silent)? = await events.next(where: { if case .stalled = $0 { true } else { false } }) else {
            Issue.record("not stalled"); return
        }
        #expect(silent >= .milliseconds(200))
        _ = try await server.nextConnection()
        #expect(await events.next(where: \.isReconnected) != nil)
        #expect(await c.connections == 2)
        await c.close()
    }

    @Test func reconnectNowDropsTheConnectionAndRestoresTheSubscriptionAtOnce() async throws {
        let server = FakeServer()
        let (c, conn, _) = try await server.client {
            $0.reconnect = ReconnectPolicy(minDelay: .seconds(2.5), maxDelay: .seconds(2.5), factor: 1, jitter: 0.1)
        }
        async let map = c.subscribe(area: .bbox(south: 1, west: 1, north: 2, east: 2))
        let sub = try await conn.expect("subscribe")
        conn.ok(sub, ["pins": []])
        let m = try await map
        let session = await c.session
        async let pending = outcome { () async throws(VigilError) -> JSONObject in try await c.request("unsubscribe") }
        _ = try await conn.expect("unsubscribe")
        await c.reconnectNow()  // no clock advance: at once, not after the backoff
        guard case .failure(let e) = await pending else { Issue.record("answered"); return }
        #expect(e.code == "disconnected")
        let second = try await server.nextConnection()
        let again = try await second.expect("subscribe")
        #expect(again["area"] == sub["area"])
        second.ok(again, ["pins": []])
        let events = Reader(m.events)
        #expect(await events.next(where: { if case .synced(_, _, true) = $0 { true } else { false } }) != nil)
        #expect(await c.session != session)
        #expect(await c.connections == 2)
        await c.close()
    }

    @Test func foregroundAndNetworkChangedResetTheBackoffAndReconnectAtOnce() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client()
        let events = Reader(await c.events())
        server.refuse(2)
        conn.cut()
        for attempt in 1...3 {
            let r = await events.next(where: { $0.reconnecting != nil })?.reconnecting
            #expect(r?.0 == attempt)
            if attempt < 3 { clock.advance(by: r!.1) }
        }
        // Waiting 1.5 s for the fourth attempt: the app comes to the foreground.
        await c.foreground()
        let back = try await server.nextConnection()
        #expect(await events.next(where: \.isReconnected) != nil)
        // The backoff starts again from its first delay.
        back.cut()
        #expect(await events.next(where: { $0.reconnecting != nil })?.reconnecting?.0 == 1)
        await c.networkChanged()
        _ = try await server.nextConnection()
        #expect(await events.next(where: \.isReconnected) != nil)
        // An open connection is dropped too (it may be dead on the old network).
        await c.networkChanged()
        _ = try await server.nextConnection()
        #expect(await events.next(where: \.isReconnected) != nil)
        #expect(await c.connections == 4)
        await c.close()
    }
}

/// Random numbers from a script, then 0.5.
final class RandomScript: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Double]
    init(_ values: [Double]) { self.values = values }
    func next() -> Double { lock.withLock { values.isEmpty ? 0.5 : values.removeFirst() } }
}
