import Testing
import VigilReplication
import VigilLoop
import VigilNATS

/// A client on a fresh loop, with short timers so failures show within the tests' bounds.
func makeClient(_ urls: [String], loop: EventLoop, credentials: NATSConnectOptions.Credentials = .none,
                tls: NATSTLS? = nil) throws -> NATSClient {
    var settings = NATSClientSettings()
    settings.tickMs = 20
    settings.connectTimeoutMs = 1_000
    settings.pingIntervalMs = 300
    settings.reconnectBaseMs = 50
    settings.reconnectMaxMs = 400
    let parsed = try urls.map { try NATSServerURL.parse($0).get() }
    let client = NATSClient(urls: parsed, options: NATSConnectOptions(name: "vigil-test", credentials: credentials), settings: settings,
                            tls: tls, loop: loop)
    try client.start()
    return client
}

/// A started server and a client connected to it (the server lives as long as the caller keeps it).
func connectedClient() throws -> (NATSServerProcess, EventLoop, NATSClient) {
    let server = try NATSServerProcess()
    try server.start()
    let loop = try EventLoop()
    let client = try makeClient([server.url], loop: loop)
    guard try turn(loop, until: { client.state == .connected }) else { throw TestFailure("no connection to nats-server") }
    return (server, loop, client)
}

@Suite(.serialized) struct NATSClientTests {
    @Test func publishAndSubscribeRoundTrip() throws {
        let (server, loop, client) = try connectedClient()
        defer { client.close() }
        defer { withExtendedLifetime(server) {} }
        #expect(client.serverInfo?.jetStream == true)
        var got: [NATSMessage] = []
        try client.subscribe(subject: "t.>") { got.append($0) }
        // The SUB must reach the server before the PUB: both go out in one write, in order.
        try client.publish(subject: "t.a", payload: Array("one".utf8))
        try client.publish(subject: "t.b.c", headers: NATSHeaders(fields: [("K", "v")]), payload: Array("two".utf8))
        try client.publish(subject: "other", payload: Array("no".utf8))
        #expect(try turn(loop, until: { got.count == 2 }))
        #expect(got.map(\.subject) == ["t.a", "t.b.c"])
        #expect(got[0].payload == Array("one".utf8) && got[0].headers == nil)
        #expect(got[1].headers?["K"] == "v" && got[1].payload == Array("two".utf8))
    }

    @Test func requestsGetTheirReplyNoRespondersOrATimeout() throws {
        let (server, loop, client) = try connectedClient()
        defer { client.close() }
        defer { withExtendedLifetime(server) {} }
        try client.subscribe(subject: "echo") { message in
            if let reply = message.replyTo { try? client.publish(subject: reply, payload: message.payload.reversed()) }
        }
        try client.subscribe(subject: "silent") { _ in }
        var echo: Result<NATSMessage, NATSClientError>?
        var nobody: Result<NATSMessage, NATSClientError>?
        var silent: Result<NATSMessage, NATSClientError>?
        try client.request(subject: "echo", payload: Array("abc".utf8), timeoutMs: 2_000) { echo = $0 }
        try client.request(subject: "nobody.home", payload: [], timeoutMs: 2_000) { nobody = $0 }
        let asked = monotonicMilliseconds()
        try client.request(subject: "silent", payload: [], timeoutMs: 300) { silent = $0 }
        #expect(try turn(loop, until: { echo != nil && nobody != nil && silent != nil }))
        let waited = monotonicMilliseconds() - asked
        #expect(try echo?.get().payload == Array("cba".utf8))
        #expect(nobody == .failure(.noResponders))
        #expect(silent == .failure(.timedOut))
        #expect(waited >= 300 && waited < 2_500, "timed out after \(waited) ms")
        #expect(client.pendingRequests == 0)
    }

    @Test func refusesWhatItCannotSendNow() throws {
        let server = try NATSServerProcess()
        let loop = try EventLoop()
        // Nothing listens yet: every operation is refused at once, nothing is buffered.
        let client = try makeClient([server.url], loop: loop)
        defer { client.close() }
        #expect(throws: NATSClientError.notConnected) { try client.publish(subject: "a", payload: [1]) }
        #expect(throws: NATSClientError.notConnected) { try client.request(subject: "a", payload: [1], timeoutMs: 100) { _ in } }
        try server.start()
        #expect(try turn(loop, until: { client.state == .connected }))
        #expect(throws: NATSClientError.invalid(.invalidSubject("'a b' contains whitespace or a control character"))) {
            try client.publish(subject: "a b", payload: [])
        }
        let big = [UInt8](repeating: 0, count: client.maxPayload + 1)
        #expect(throws: NATSClientError.invalid(.payloadTooLarge(size: big.count, limit: client.maxPayload))) {
            try client.publish(subject: "a", payload: big)
        }
    }

    @Test func connectsToTheFirstServerThatAnswersAndReconnectsAfterAKill() throws {
        let dead = try NATSServerProcess.freePort()  // nobody listens there
        let server = try NATSServerProcess()
        try server.start()
        let loop = try EventLoop()
        let client = try makeClient(["nats://127.0.0.1:\(dead)", server.url], loop: loop)
        defer { client.close() }
        var states: [NATSClientState] = []
        client.addStateObserver { state, _ in states.append(state) }
        #expect(try turn(loop, until: { client.state == .connected }))
        var got: [UInt8] = []
        try client.subscribe(subject: "r") { got.append(contentsOf: $0.payload) }
        var lost: Result<NATSMessage, NATSClientError>?
        try client.subscribe(subject: "hold") { _ in }
        try client.request(subject: "hold", payload: [], timeoutMs: 10_000) { lost = $0 }
        #expect(try turn(loop, until: { client.pendingBytes == 0 }))

        server.kill()
        // The loop keeps turning while the client retries: no turn waits on NATS.
        var longestTurn: Int64 = 0
        #expect(try turn(loop, until: {
            let before = monotonicMilliseconds()
            try? loop.turn(timeoutMs: 20)
            longestTurn = max(longestTurn, monotonicMilliseconds() - before)
            return client.state != .connected && lost != nil
        }))
        #expect(lost == .failure(.connectionLost))
        // Several attempts over both URLs while down, each refused at once.
        let down = monotonicMilliseconds()
        #expect(try turn(loop, until: { monotonicMilliseconds() - down > 600 }, timeoutMs: 2_000))
        #expect(client.state != .connected)
        #expect(longestTurn < 200, "a loop turn took \(longestTurn) ms during the outage")

        try server.start()
        #expect(try turn(loop, until: { client.state == .connected }, timeoutMs: 5_000))
        #expect(client.connectionCount == 2)
        // The subscription came back with the connection.
        try client.publish(subject: "r", payload: [7])
        #expect(try turn(loop, until: { got == [7] }))
        // Observed from the kill on: down, attempts, up again.
        #expect(states.first == .disconnected && states.last == .connected && states.contains(.connecting))
    }

    @Test func authenticatesWithUserAndPasswordOrTellsWhy() throws {
        let server = try NATSServerProcess(extraArguments: ["--user", "vigil", "--pass", "s3cret"])
        try server.start()
        let loop = try EventLoop()
        let wrong = try makeClient([server.url], loop: loop, credentials: .userPassword(user: "vigil", password: "nope"))
        var reasons: [String] = []
        wrong.addStateObserver { state, reason in if state == .disconnected { reasons.append(reason) } }
        #expect(try turn(loop, until: { !reasons.isEmpty }))
        #expect(reasons.first == "server error: Authorization Violation")
        #expect(!(reasons.first ?? "").contains("nope"))
        wrong.close()
        let right = try makeClient([server.url], loop: loop, credentials: .userPassword(user: "vigil", password: "s3cret"))
        defer { right.close() }
        #expect(try turn(loop, until: { right.state == .connected }))
    }
}
