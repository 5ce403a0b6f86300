import Foundation
import Synchronization
import Testing
@testable import VigilClient

// The client against a real vigild (Support/Daemon.swift) over SocketTransport: a map
// subscription, a watch, an owner's stream and a circle across a restart of the daemon with a
// state directory and across cut connections; the follower's bounded rate. Twins of the JS
// client's reconnect, models and circle tests.
//
// Writes carry their `idem` keys (the server keeps the first answer per key: docs/PROTOCOL.md
// "Writes that are safe to retry"); a test turns them off to see the client without them.

/// A transport whose connections the test can cut, and whose new connections it can hold off
/// (refused while the gate is shut): "the phone is away" without waiting for a backoff.
final class GatedTransport: VigilTransport {
    private let inner = SocketTransport()
    private let state = Mutex<(open: Bool, live: [CuttableConnection], lose: String?)>((true, [], nil))

    func connect(to url: URL, timeout: Duration) async throws(TransportError) -> any VigilConnection {
        guard state.withLock({ $0.open }) else { throw .connectFailed("gate shut (test)") }
        let conn = CuttableConnection(try await inner.connect(to: url, timeout: timeout), gate: self)
        state.withLock { $0.live.append(conn) }
        return conn
    }

    /// The next message holding `marker` is lost with its connection (the gate shuts): a write
    /// the server applied whose answer never arrived.
    func loseNextMessage(containing marker: String) { state.withLock { $0.lose = marker } }

    func loses(_ text: String) -> Bool {
        state.withLock { s in
            guard let marker = s.lose, text.contains(marker) else { return false }
            s.lose = nil
            s.open = false
            return true
        }
    }

    /// Shuts the gate: attempts are refused until `open()`.
    func shut() { state.withLock { $0.open = false } }
    func open() { state.withLock { $0.open = true } }

    /// Cuts every live connection (the client sees it lost) and shuts the gate.
    func cut() async {
        let live = state.withLock { s in
            s.open = false
            defer { s.live = [] }
            return s.live
        }
        for c in live { await c.cut() }
    }
}

final class CuttableConnection: VigilConnection {
    let inner: any VigilConnection
    let gate: GatedTransport
    init(_ inner: any VigilConnection, gate: GatedTransport) { self.inner = inner; self.gate = gate }
    func send(_ text: String) async throws(TransportError) { try await inner.send(text) }
    func receive() async throws(TransportError) -> String {
        let text = try await inner.receive()
        if gate.loses(text) {
            await inner.close(code: 1001, reason: "cut by the test")
            throw .closed(code: nil, reason: "")
        }
        return text
    }
    func close(code: UInt16, reason: String) async { await inner.close(code: code, reason: reason) }
    func cut() async { await inner.close(code: 1001, reason: "cut by the test") }
}

extension DaemonConfig {
    static func client(_ yaml: String = "") -> DaemonConfig {
        var c = DaemonConfig()
        c.persistentState = true
        c.extraYAML = yaml
        return c
    }
}

/// A client of `daemon` with fast reconnects.
func liveClient(_ daemon: Daemon, _ transport: any VigilTransport = SocketTransport(), keys: Bool = true) async throws -> VigilClient {
    var o = VigilClientOptions()
    o.sendsIdempotencyKeys = keys
    o.requestTimeout = .seconds(10)
    o.reconnect = ReconnectPolicy(minDelay: .milliseconds(50), maxDelay: .milliseconds(200))
    let c = VigilClient(url: daemon.url(), options: o, transport: transport)
    try await c.connect()
    return c
}

/// Waits for the client's next welcome after a reconnect.
func reconnected(_ events: Reader<ConnectionEvent>) async {
    _ = await events.next(where: \.isReconnected)
}

@Suite(.serialized, .timeLimit(.minutes(2)))
struct IntegrationTests {
    @Test func aSubscriberComesBackAfterARestartAndItsPinSetIsReconciled() async throws {
        let d = try Daemon(.client())
        try await d.start()
        let other = try await liveClient(d)
        let gate = GatedTransport()
        let viewer = try await liveClient(d, gate)
        let a = try await other.createPin(NewPin(lat: 40.5, lon: 10.5, title: "A"))
        let b = try await other.createPin(NewPin(lat: 40.6, lon: 10.6, title: "B"))
        let map = try await viewer.subscribe(area: .bbox(south: 40, west: 10, north: 41, east: 11))
        let events = Reader(map.events)
        var seen: [String] = []
        while seen.count < 3 { seen.append(await events.next()!.summary) }
        #expect(Set(seen) == ["added \(a.pin.id)", "added \(b.pin.id)", "synced 2 false false"])
        // A pin created now is seen live.
        let early = try await other.createPin(NewPin(lat: 40.55, lon: 10.55, title: "early"))
        #expect(await events.next()?.summary == "added \(early.pin.id)")

        let otherEvents = Reader(await other.events())
        gate.shut()
        try await d.restart()
        await reconnected(otherEvents)
        // While the viewer is away: A and `early` deleted, C created, B voted on.
        try await other.deletePin(id: a.pin.id, editToken: a.editToken)
        try await other.deletePin(id: early.pin.id, editToken: early.editToken)
        let c = try await other.createPin(NewPin(lat: 40.7, lon: 10.7, title: "C"))
        _ = try await other.vote(pin: b.pin.id, up: true)
        #expect(await viewer.connections == 1, "the viewer must not be back yet")
        gate.open()
        seen = []
        while let e = await events.next() {
            seen.append(e.summary)
            if case .synced(_, _, true) = e { break }
        }
        #expect(Set(seen) == ["removed \(a.pin.id) reconciled", "removed \(early.pin.id) reconciled", "added \(c.pin.id)",
                              "updated \(b.pin.id)", "synced 2 false true"])
        #expect(Set(await map.pins().map(\.id)) == [b.pin.id, c.pin.id])
        #expect(await map.pins().first { $0.id == b.pin.id }?.up == 1)
        // Live again.
        let d2 = try await other.createPin(NewPin(lat: 40.8, lon: 10.8, title: "D"))
        #expect(await events.next()?.summary == "added \(d2.pin.id)")
        await other.close()
        await viewer.close()
        _ = await d.stop()
    }

    @Test func aWatcherGetsEveryEventOnceInOrderAcrossARestartAndACutConnection() async throws {
        let d = try Daemon(.client("panic:\n  history_events: 50\n"))
        try await d.start()
        let phone = try await liveClient(d)
        let gate = GatedTransport()
        let contact = try await liveClient(d, gate)
        let owner = try await phone.startPanic(status: .red, position: Position(lat: 52.5, lon: 13.4, accuracyM: 5))
        let ownerEvents = Reader(owner.events)
        let token = try #require(await owner.snapshot()?.watchTokens.first)
        let watch = try await contact.watch(stream: owner.stream, watchToken: token)
        #expect(await watch.lastSeq() == 1)
        let events = Reader(watch.events)
        guard case .state(let first, false)? = await events.next() else { Issue.record("no state"); return }
        #expect(first.seq == 1 && first.trail.count == 1)
        var seqs: [Int] = []
        func take(through last: Int) async {
            while seqs.last ?? 1 < last, let e = await events.next() {
                if let s = e.seq { seqs.append(s) }
            }
        }
        for i in 0..<5 { try await owner.update(Position(lat: 52.5 + Double(i) / 1000, lon: 13.4)) }
        await take(through: 6)

        // A restart of the daemon while the contact is away.
        let phoneEvents = Reader(await phone.events())
        gate.shut()
        try await d.restart()
        await reconnected(phoneEvents)
        guard case .resumed(let resumed)? = await ownerEvents.next(where: { if case .resumed = $0 { true } else { false } }) else {
            Issue.record("the owner was not resumed"); return
        }
        #expect(resumed.status == .red && resumed.seq == 6)
        for i in 5..<10 { try await owner.update(Position(lat: 52.5 + Double(i) / 1000, lon: 13.4)) }
        try await owner.setStatus(.amber)
        #expect(await contact.connections == 1, "the watcher must not be back yet")
        gate.open()
        await take(through: 12)

        // A cut connection: events sent meanwhile come by replay.
        await gate.cut()
        for i in 10..<13 { try await owner.update(Position(lat: 52.5 + Double(i) / 1000, lon: 13.4)) }
        gate.open()
        await take(through: 15)
        try await owner.end("safe")
        await take(through: 16)
        #expect(seqs == Array(2...16), "seqs 2…16 once each, in order")
        #expect(await events.next() == nil, "the stream ended")
        #expect(await contact.connections == 3)
        await phone.close()
        await contact.close()
        _ = await d.stop()
    }

    @Test func anOwnerResumesWithItsTokenFromAnotherClient() async throws {
        let d = try Daemon(.client())
        try await d.start()
        let phone = try await liveClient(d)
        let owner = try await phone.startPanic(status: .amber, position: Position(lat: 20, lon: 20), dueIn: .seconds(600))
        let due = await owner.snapshot()?.dueAt
        #expect(due != nil)
        await phone.close()
        // The app restarted: a new client resumes the stream with the owner token it kept.
        let again = try await liveClient(d)
        let resumed = try await again.resumePanic(stream: owner.stream, ownerToken: owner.ownerToken)
        let snap = await resumed.snapshot()
        #expect(snap?.status == .amber && snap?.seq == 1 && snap?.dueAt == due)
        let seq = try await resumed.update(Position(lat: 20.1, lon: 20))
        #expect(seq == 2)
        do {
            _ = try await again.resumePanic(stream: owner.stream, ownerToken: String(repeating: "x", count: 43))
            Issue.record("resumed with a wrong token")
        } catch {
            #expect(error.code == "forbidden")
        }
        // The owner the wrong token did not replace still steers the stream.
        #expect(try await resumed.update(Position(lat: 20.2, lon: 20)) == 3)
        try await resumed.end("safe")
        await again.close()
        _ = await d.stop()
    }

    @Test func aCircleIsJoinedAgainAfterARestartAndItsStateSaysWhatWasMissed() async throws {
        let d = try Daemon(.client("checkin:\n  requests_per_minute: 60\n"))
        try await d.start()
        let phone = try await liveClient(d)
        let created = try await phone.createCircle(members: ["Sam", nil])
        let gate = GatedTransport()
        let sam = try await liveClient(d, gate)
        let joined = try await sam.joinCircle(created.circle.id, memberToken: created.memberTokens[0].token)
        let samEvents = Reader(joined.events)
        guard case .state(let s, nil)? = await samEvents.next() else { Issue.record("no state"); return }
        #expect(s.you?.label == "Sam")
        let ownerEvents = Reader(created.circle.events)
        _ = await ownerEvents.next()
        // Sam asks; the owner hears it.
        let at = try await joined.request()
        guard case .requested(let r)? = await ownerEvents.next() else { Issue.record("not heard"); return }
        #expect(r.member == 1 && r.at == at)

        let phoneEvents = Reader(await phone.events())
        gate.shut()
        try await d.restart()
        await reconnected(phoneEvents)
        guard case .state(_, let ownerMissed?)? = await ownerEvents.next(where: { if case .state = $0 { true } else { false } }) else {
            Issue.record("the owner's circle was not opened again"); return
        }
        #expect(ownerMissed.isEmpty)
        _ = try await created.circle.answer(note: "after the restart")
        let stream = try await created.circle.startPanic(status: .red, position: Position(lat: 1, lon: 2))
        gate.open()
        guard case .state(let state, let missed?)? = await samEvents.next(where: { if case .state = $0 { true } else { false } }) else {
            Issue.record("Sam's circle was not joined again"); return
        }
        #expect(state.answer?.note == "after the restart")
        #expect(missed.newAnswer?.note == "after the restart")
        #expect(missed.panicsStarted.map(\.stream) == [stream.stream])
        // Sam watches the circle's stream with the member token.
        let watch = try await joined.watch(stream: stream.stream, since: 0)
        try await stream.update(Position(lat: 1.1, lon: 2))
        let watchEvents = Reader(watch.events)
        var seqs: [Int] = []
        while seqs.last != 2, let e = await watchEvents.next() { if let q = e.seq { seqs.append(q) } }
        #expect(seqs == [1, 2])
        try await stream.end("safe")
        guard case .panic(let ended)? = await samEvents.next(where: { if case .panic(let n) = $0 { n.event == "ended" } else { false } }) else {
            Issue.record("no end"); return
        }
        #expect(ended.reason == "safe")
        // Revoked: the member's circle ends.
        try await created.circle.revoke(member: 1)
        #expect(await samEvents.next(where: { if case .revoked = $0 { true } else { false } }) == .revoked(member: 1))
        // The relay is not configured on this daemon.
        do {
            _ = try await created.circle.registerRelay(handle: "apns-1")
            Issue.record("registered without a relay")
        } catch {
            #expect(error.code == "unsupported" && error.field == "relay")
        }
        await phone.close()
        await sam.close()
        _ = await d.stop()
    }

    @Test func theFollowerSendsAtABoundedRateAndTheWatcherSeesTheNewest() async throws {
        let d = try Daemon(.client())
        try await d.start()
        let phone = try await liveClient(d)
        let contact = try await liveClient(d)
        let owner = try await phone.startPanic(status: .red, position: Position(lat: 5, lon: 5))
        let token = try #require(await owner.snapshot()?.watchTokens.first)
        let watch = try await contact.watch(stream: owner.stream, watchToken: token)
        let (feed, positions) = AsyncStream<Position>.makeStream()
        let follower = owner.follow(feed, minInterval: .milliseconds(200))
        let results = Reader(follower.events)
        let started = ContinuousClock.now
        for i in 1...40 {
            positions.yield(Position(lat: 5 + Double(i) / 1000, lon: 5))
            try await Task.sleep(for: .milliseconds(20))  // the feed's own pace: a GPS at 50 Hz
        }
        var sent: [(Int, Position, Duration)] = []
        while let e = await results.next() {
            guard case .sent(let seq, let p, let at) = e else { Issue.record("\(e)"); break }
            sent.append((seq, p, at))
            if p.lat == 5.040 { break }
        }
        let elapsed = ContinuousClock.now - started
        await follower.stop()
        #expect(sent.count >= 3 && sent.count <= Int(elapsed / .milliseconds(200)) + 1, "\(sent.count) updates in \(elapsed)")
        for i in 1..<sent.count { #expect(sent[i].2 - sent[i - 1].2 >= .milliseconds(195)) }
        #expect(sent.map(\.0) == Array(2..<(2 + sent.count)))
        // The watcher sees exactly those, in order, ending with the newest.
        let events = Reader(watch.events)
        var lats: [Double] = []
        while lats.last != 5.040, let e = await events.next() { if case .location(let l) = e { lats.append(l.lat) } }
        #expect(lats == sent.map(\.1.lat))
        try await owner.end("safe")
        await phone.close()
        await contact.close()
        _ = await d.stop()
    }

    @Test func pinsWithAReachAndTheClustersView() async throws {
        let d = try Daemon(.client())
        try await d.start()
        let author = try await liveClient(d)
        let near = try await liveClient(d)
        let far = try await liveClient(d)
        let counts = try await liveClient(d)
        let area = Area.bbox(south: 52.3, west: 13.0, north: 52.7, east: 13.8)
        let nearMap = try await near.subscribe(area: area, viewer: Coordinate(lat: 52.52, lon: 13.41))
        let farMap = try await far.subscribe(area: area, viewer: Coordinate(lat: 52.65, lon: 13.7))
        let view = try await counts.subscribeClusters(area: area)
        let nearEvents = Reader(nearMap.events), farEvents = Reader(farMap.events), viewEvents = Reader(view.events)
        _ = await nearEvents.next()
        _ = await farEvents.next()
        guard case .snapshot(let empty, false)? = await viewEvents.next() else { Issue.record("no snapshot"); return }
        #expect(empty.clusters.isEmpty)
        // A lost dog within 1.5 km of the near viewer only; then a pin for everyone.
        let dog = try await author.createPin(NewPin(lat: 52.52, lon: 13.405, title: "Lost dog, brown", rangeMeters: 1500))
        #expect(dog.pin.rangeM == 1500)
        guard case .added(let seen)? = await nearEvents.next() else { Issue.record("not seen near"); return }
        #expect(seen.id == dog.pin.id && seen.rangeM == 1500)
        let open = try await author.createPin(NewPin(lat: 52.5, lon: 13.4, title: "Open", category: "hazard"))
        #expect(await farEvents.next()?.summary == "added \(open.pin.id)", "the far viewer never saw the dog")
        #expect(await nearEvents.next()?.summary == "added \(open.pin.id)")
        // Counts leave out pins with a reach.
        guard case .changed(_, let cells)? = await viewEvents.next() else { Issue.record("no change"); return }
        #expect(cells.map(\.count) == [1] && cells.first?.byCategory == ["hazard": 1])
        for c in [author, near, far, counts] { await c.close() }
        _ = await d.stop()
    }

    @Test func aMissedCheckInReachesTheWatcherAndTheOwner() async throws {
        let d = try Daemon(.client())
        try await d.start()
        let phone = try await liveClient(d)
        let contact = try await liveClient(d)
        let owner = try await phone.startPanic(status: .amber, position: Position(lat: 48.2, lon: 16.37), dueIn: .seconds(600))
        let ownerEvents = Reader(owner.events)
        let token = try #require(await owner.snapshot()?.watchTokens.first)
        let watch = try await contact.watch(stream: owner.stream, watchToken: token)
        let events = Reader(watch.events)
        guard case .state(let s, _)? = await events.next() else { Issue.record("no state"); return }
        #expect(s.timer?.dueAt == (await owner.snapshot()?.dueAt))
        // Running late, then later still: the deadline moves, 1 s from now.
        let due = try await owner.setTimer(dueIn: .seconds(1))
        guard case .timer(let moved)? = await events.next() else { Issue.record("no timer event"); return }
        #expect(moved.dueAt == due)
        guard case .status(let missed)? = await events.next() else { Issue.record("no escalation"); return }
        #expect(missed.reason == "missed_check_in" && missed.status == .red && missed.dueAt == due)
        #expect((missed.sentAt ?? 0) >= missed.at)
        guard case .missedCheckIn(let told)? = await ownerEvents.next(where: { if case .missedCheckIn = $0 { true } else { false } }) else {
            Issue.record("the owner was not told"); return
        }
        #expect(told.seq == missed.seq)
        let snap = await owner.snapshot()
        #expect(snap?.status == .red && snap?.dueAt == nil && snap?.escalated?.sentAt == missed.sentAt)
        try await owner.end("safe")
        await phone.close()
        await contact.close()
        _ = await d.stop()
    }

    @Test func aWriteMadeWhileOfflineIsSentAndAnsweredOnReconnect() async throws {
        let d = try Daemon(.client())
        try await d.start()
        let gate = GatedTransport()
        let c = try await liveClient(d, gate, keys: false)
        let viewer = try await liveClient(d)
        let map = try await viewer.subscribe(area: .bbox(south: 10, west: 10, north: 11, east: 11))
        let events = Reader(map.events)
        _ = await events.next()
        let connection = Reader(await c.events())
        await gate.cut()
        // Offline for sure (keys are off: a write sent on the dying connection would fail).
        _ = await connection.next(where: { if case .disconnected = $0 { true } else { false } })
        async let created = c.createPin(NewPin(lat: 10.5, lon: 10.5, title: "offline"))
        await waitQueued(c, 1)
        gate.open()
        let pin = try await created
        #expect(await events.next()?.summary == "added \(pin.pin.id)", "applied once")
        await c.close()
        await viewer.close()
        _ = await d.stop()
    }

    @Test func aWriteWhoseAnswerWasLostIsSentAgainAcrossAKill9AndAppliedOnce() async throws {
        let d = try Daemon(.client())
        try await d.start()
        let gate = GatedTransport()
        let c = try await liveClient(d, gate)
        let viewer = try await liveClient(d)
        let map = try await viewer.subscribe(area: .bbox(south: 20, west: 20, north: 21, east: 21))
        let events = Reader(map.events)
        _ = await events.next()
        // The server applies the pin.create; its answer is lost with the connection.
        gate.loseNextMessage(containing: "\"edit_token\"")
        async let created = c.request("pin.create", ["pin": ["lat": 20.5, "lon": 20.5, "title": "once"]])
        guard case .added(let pin)? = await events.next() else { Issue.record("not applied"); return }
        // A crash of the server in the middle; the client comes back and sends the write again.
        await d.kill()
        try await d.start()
        gate.open()
        let reply = try await created
        #expect(reply["repeat"] == true, "the first answer, kept across the kill -9")
        #expect(reply["pin"]?["id"]?.stringValue == pin.id)
        #expect(reply["edit_token"]?.stringValue?.isEmpty == false)
        // The viewer comes back to one pin, not two.
        var seen: [String] = []
        while let e = await events.next() {
            seen.append(e.summary)
            if case .synced(_, _, true) = e { break }
        }
        #expect(seen == ["synced 1 false true"])
        #expect(await map.pins().map(\.id) == [pin.id])
        await c.close()
        await viewer.close()
        _ = await d.stop()
    }

    @Test func aWatchSeesPositionStatusStaleAndRevocation() async throws {
        let d = try Daemon(.client("panic:\n  stale_after_ms: 1000\n"))
        try await d.start()
        let phone = try await liveClient(d)
        let contact = try await liveClient(d)
        let owner = try await phone.startPanic(status: .amber, position: Position(lat: 20, lon: 20, accuracyM: 30), note: "walking home", watchers: 2)
        let ownerEvents = Reader(owner.events)
        let tokens = await owner.watchTokens()
        #expect(tokens.count == 2)
        let watch = try await contact.watch(stream: owner.stream, watchToken: tokens[1])
        #expect(await ownerEvents.next(where: { $0 == .watchers(1) }) != nil, "the owner knows someone sees them")
        let events = Reader(watch.events)
        guard case .state(let s, false)? = await events.next() else { Issue.record("no state"); return }
        #expect(s.status == .amber && s.note == "walking home" && s.last?.accuracyM == 30)
        try await owner.update(Position(lat: 20.001, lon: 20.002, accuracyM: 12, heading: 90))
        guard case .location(let l)? = await events.next() else { Issue.record("no location"); return }
        #expect(l.lat == 20.001 && l.heading == 90 && l.accuracyM == 12)
        try await owner.setStatus(.red)
        guard case .status(let st)? = await events.next() else { Issue.record("no status"); return }
        #expect(st.status == .red && st.reason == nil)
        // No location for stale_after_ms: the server says so once.
        guard case .stale(let stale)? = await events.next() else { Issue.record("no stale"); return }
        #expect(stale.lastLocationAt == l.at)
        try await owner.revoke(tokens[1])
        #expect(await events.next() == .revoked)
        #expect(await events.next() == nil)
        #expect(await owner.watchTokens() == [tokens[0]])
        do {
            _ = try await contact.watch(stream: owner.stream, watchToken: tokens[1])
            Issue.record("watched with a revoked token")
        } catch {
            #expect(error.code == "forbidden")
        }
        try await owner.end("cancelled")
        await phone.close()
        await contact.close()
        _ = await d.stop()
    }

    @Test func aRateLimitedWriteIsWaitedOutAgainstTheRealServer() async throws {
        let d = try Daemon(.client("pins:\n  writes_per_minute: 60\n  write_burst: 2\n"))
        try await d.start()
        let c = try await liveClient(d)
        let events = Reader(await c.events())
        let pin = NewPin(lat: 48.1, lon: 11.5, title: "rate", ttlSeconds: 60)
        _ = try await c.createPin(pin)
        _ = try await c.createPin(pin)
        let started = ContinuousClock.now
        let third = try await c.createPin(pin)
        guard case .rateLimited(let op, let wait)? = await events.next(where: { if case .rateLimited = $0 { true } else { false } }) else {
            Issue.record("not rate limited"); return
        }
        #expect(op == "pin.create" && wait > .zero && wait <= .seconds(1))
        #expect(ContinuousClock.now - started >= wait)
        #expect(!third.pin.id.isEmpty)
        do {
            _ = try await c.request("pin.create", ["pin": ["lat": 48.1, "lon": 11.5, "title": "x"]], retryRateLimited: false)
            Issue.record("not refused")
        } catch {
            #expect(error.code == "rate_limited" && (error.retryAfter ?? .zero) > .zero)
        }
        await c.close()
        _ = await d.stop()
    }
}
