import Foundation
import Testing
@testable import VigilClient

// The Swift client on an end-to-end encrypted stream's wire (docs/PROTOCOL.md, "End-to-end
// encrypted streams"), against the scripted fake server (Support/Fakes.swift): the owner seals the
// start for seq 1 and each update for the seq and status it expects, reseals after seq_mismatch,
// rekeys; the watch opens each point into a location or says `cannotDecrypt`, never a position.
// The JS client's sealing and opening on the same wire both ways (node clients/js/test/e2e-cli.js).

private func point(_ key: StreamKey, seq: Int, status: PanicStatus = .red, _ p: E2EPosition, at: Int64 = 1_000) throws -> JSONObject {
    ["sealed": .string(try E2E.seal(p, key: key, seq: UInt64(seq), status: status)), "kid": .string(key.kid),
     "status": .string(status.rawValue), "seq": .number(Double(seq)), "at": .number(Double(at))]
}

private func location(_ stream: String, _ p: JSONObject) -> JSONObject {
    var o = p
    o["type"] = "panic.location"
    o["stream"] = .string(stream)
    return o
}

private func state(_ stream: String, seq: Int, kid: String, trail: [JSONObject]) -> JSONObject {
    ["stream": .string(stream), "status": "red", "started_at": 1, "updated_at": 1, "seq": .number(Double(seq)),
     "e2e": true, "kid": .string(kid), "last": trail.last.map { .object($0) } ?? .null, "trail": .array(trail.map { .object($0) })]
}

/// The events of a watch until `count` of the kinds that matter are in.
private func collect(_ r: Reader<WatchEvent>, _ count: Int) async -> [WatchEvent] {
    var out: [WatchEvent] = []
    while out.count < count, let e = await r.next() { out.append(e) }
    return out
}

@Suite struct E2EStreamTests {
    // Checks here never throw while a request is pending: the fake's clock does not move, so a
    // pending `async let` would never time out and the test would hang instead of failing.
    @Test(.timeLimit(.minutes(1)))
    func theOwnerSealsTheStartAndEachUpdateAndResealsAfterSeqMismatch() async throws {
        let server = FakeServer()
        let (c, conn, _) = try await server.client()
        let key = StreamKey.generate()
        let ms = [1: E2E.newMemberSecret(), 3: E2E.newMemberSecret()]
        async let started = c.startPanic(status: .amber, position: Position(lat: 51.5007, lon: -0.1246, accuracyM: 12), note: "by the bridge",
                                         circle: (id: "circle-1", ownerToken: "otok"), e2e: key, memberSecrets: ms)
        let start = try await conn.expect("panic.start")
        for k in ["lat", "lon", "accuracy_m", "note"] { #expect(start[k] == nil, "\(k) is never sent in clear") }
        #expect(!JSONValue.object(start).jsonText.contains("51.5007") && !JSONValue.object(start).jsonText.contains("bridge"))
        let e2e = try #require(start["e2e"]?.objectValue)
        #expect(e2e["v"]?.intValue == 1 && e2e["kid"]?.stringValue == key.kid)
        let opened = try E2E.open(try #require(e2e["sealed"]?.stringValue), key: key, seq: 1, status: .amber)
        #expect(opened == E2EPosition(lat: 51.5007, lon: -0.1246, accuracyM: 12, note: "by the bridge"))
        #expect(start["boxes"] == nil)
        let boxes = try #require(e2e["boxes"]?.arrayValue).map { $0.objectValue ?? [:] }
        #expect(boxes.map { $0["member"]?.intValue } == [1, 3])
        for b in boxes {
            let m = try #require(b["member"]?.intValue)
            let box = try #require(b["box"]?.stringValue)
            #expect((try? E2E.unwrapForMember(box, memberSecret: ms[m]!, kid: key.kid, member: UInt64(m))) == key)
        }
        conn.ok(start, ["stream": "s1", "seq": 1, "owner_token": "tok", "watch_tokens": ["w1"], "circle": "circle-1"])
        let owner = try await started
        #expect(await owner.e2eKey() == key)

        // An update: sealed for seq 2, amber; no clear member.
        async let first = owner.update(Position(lat: 51.501, lon: -0.125))
        let u1 = try await conn.expect("panic.update")
        #expect(u1["lat"] == nil && u1["lon"] == nil)
        #expect(u1["seq"]?.intValue == 2 && u1["status"]?.stringValue == "amber" && u1["kid"]?.stringValue == key.kid)
        #expect((try? E2E.open(u1["sealed"]?.stringValue ?? "", key: key, seq: 2, status: .amber))?.lat == 51.501)
        conn.ok(u1, ["seq": 2])
        #expect(try await first == 2)

        // The server made events meanwhile (seq 3 and 4, red): seq_mismatch, then sealed again for 5, red.
        async let second = owner.update(E2EPosition(lat: 51.502, lon: -0.126, note: "taxi"))
        let u2 = try await conn.expect("panic.update")
        #expect(u2["seq"]?.intValue == 3)
        conn.error(u2, "seq_mismatch", ["current_seq": 4, "status": "red"])
        let u3 = try await conn.expect("panic.update")
        #expect(u3["seq"]?.intValue == 5 && u3["status"]?.stringValue == "red")
        #expect(u3["sealed"] != u2["sealed"])
        #expect((try? E2E.open(u3["sealed"]?.stringValue ?? "", key: key, seq: 5, status: .red)) == E2EPosition(lat: 51.502, lon: -0.126, note: "taxi"))
        conn.ok(u3, ["seq": 5])
        #expect(try await second == 5)
        #expect(await owner.snapshot()?.status == .red)

        // A server that keeps moving: the update fails after maxReseals with its error.
        async let third = outcome { () async throws(VigilError) -> Int in try await owner.update(E2EPosition(lat: 1, lon: 2), maxReseals: 1) }
        let v1 = try await conn.expect("panic.update")
        conn.error(v1, "seq_mismatch", ["current_seq": 7, "status": "red"])
        let v2 = try await conn.expect("panic.update")
        #expect(v2["seq"]?.intValue == 8)
        conn.error(v2, "seq_mismatch", ["current_seq": 9, "status": "red"])
        guard case .failure(let err) = await third else { Issue.record("the update succeeded"); return }
        #expect(err.code == "seq_mismatch")

        // Rekey: a new kid, boxes for the members kept (member 3 revoked), updates under the new key.
        async let rekeyed = owner.rekey(memberSecrets: [1: ms[1]!])
        let r = try await conn.expect("panic.rekey")
        let newKid = try #require(r["kid"]?.stringValue)
        #expect(newKid != key.kid)
        #expect(r["boxes"]?.arrayValue?.map { $0.objectValue?["member"]?.intValue } == [1])
        conn.ok(r)
        let next = try await rekeyed
        #expect(next.kid == newKid)
        async let fourth = owner.update(Position(lat: 3, lon: 4))
        let u4 = try await conn.expect("panic.update")
        #expect(u4["kid"]?.stringValue == newKid && u4["seq"]?.intValue == 10)
        #expect((try? E2E.open(u4["sealed"]?.stringValue ?? "", key: next, seq: 10, status: .red))?.lat == 3)
        conn.ok(u4, ["seq": 10])
        _ = try await fourth
        await c.close()
    }

    @Test func theWatchReplysTrailHoldsOnlyWhatOpenedAndAMissingKeyIsSaidOnce() async throws {
        let server = FakeServer()
        let (c, conn, _) = try await server.client()
        let key = StreamKey.generate()
        let p1 = try point(key, seq: 1, E2EPosition(lat: 48.1, lon: 11.5, note: "start"))
        var bad = try point(key, seq: 2, E2EPosition(lat: 0, lon: 0))
        var bytes = E2E.base64urlDecode(bad["sealed"]!.stringValue!)!
        bytes[20] ^= 1
        bad["sealed"] = .string(E2E.base64urlEncode(bytes))
        async let watching = c.watch(stream: "s1", watchToken: "w1", e2e: .fragment("s=s1&t=w1&k=\(key.base64url)"))
        let w = try await conn.expect("panic.watch")
        conn.ok(w, ["state": .object(state("s1", seq: 2, kid: key.kid, trail: [p1, bad]))])
        let watch = try await watching
        let r = Reader(watch.events)
        let first = await collect(r, 2)
        guard case .state(let s, _) = first[0] else { Issue.record("no state: \(first)"); return }
        // The state holds only what opened: seq 1; the tampered seq 2 came as cannotDecrypt, and
        // (under a kid that opened) blames the point, not the key: no notice.
        #expect(s.e2e == true && s.trail.map(\.seq) == [1] && s.trail.first?.lat == 48.1)
        #expect(s.last?.lat == 48.1)
        guard case .cannotDecrypt(let cd) = first[1] else { Issue.record("no cannotDecrypt: \(first)"); return }
        #expect(cd.seq == 2 && cd.kid == key.kid)
        async let unwatched: Void = watch.unwatch()
        conn.ok(try await conn.expect("panic.unwatch"))
        try await unwatched

        // A link without k: nothing opens, no position at all, and the notice once.
        async let again = c.watch(stream: "s1", watchToken: "w1", e2e: .fragment("s=s1&t=w1"))
        let w2 = try await conn.expect("panic.watch")
        conn.ok(w2, ["state": .object(state("s1", seq: 2, kid: key.kid, trail: [p1, try point(key, seq: 2, E2EPosition(lat: 2, lon: 3))]))])
        let blind = try await again
        let r2 = Reader(blind.events)
        let events = await collect(r2, 4)
        guard case .state(let s2, _) = events[0] else { Issue.record("\(events)"); return }
        #expect(s2.trail.isEmpty && s2.last == nil)
        guard case .cannotDecrypt = events[1], case .cannotDecrypt = events[2], case .keyNotice(.absent) = events[3] else {
            Issue.record("\(events)"); return
        }
        conn.push(location("s1", try point(key, seq: 3, E2EPosition(lat: 5, lon: 6))))
        conn.push(["type": "panic.ended", "stream": "s1", "seq": 4, "reason": "safe", "at": 9])
        var rest: [WatchEvent] = []
        while let e = await r2.next() { rest.append(e) }
        guard rest.count == 2, case .cannotDecrypt(let c3) = rest[0], case .ended = rest[1] else { Issue.record("\(rest)"); return }
        #expect(c3.seq == 3)
        await c.close()
    }

    @Test func liveSealedPointsOpenOrAreCannotDecryptNeverAPosition() async throws {
        let server = FakeServer()
        let (c, conn, _) = try await server.client()
        let key = StreamKey.generate()
        let other = StreamKey.generate()
        async let watching = c.watch(stream: "s1", watchToken: "w1", e2e: .key(key.bytes))
        let w = try await conn.expect("panic.watch")
        conn.ok(w, ["state": .object(state("s1", seq: 1, kid: key.kid, trail: [try point(key, seq: 1, E2EPosition(lat: 48.1, lon: 11.5))]))])
        let watch = try await watching
        let r = Reader(watch.events)
        guard case .state(let s, _)? = await r.next() else { Issue.record("no state"); return }
        #expect(s.trail.map(\.seq) == [1])

        let good = try point(key, seq: 2, E2EPosition(lat: 48.2, lon: 11.6, accuracyM: 7))
        var tampered = try point(key, seq: 3, E2EPosition(lat: 0, lon: 0))
        var b = E2E.base64urlDecode(tampered["sealed"]!.stringValue!)!
        b[b.count - 1] ^= 0x80
        tampered["sealed"] = .string(E2E.base64urlEncode(b))
        var replayed = good
        replayed["seq"] = 4  // sealed for 2
        let moved = try point(other, seq: 5, E2EPosition(lat: 40, lon: -3))
        for p in [good, tampered, replayed, moved] { conn.push(location("s1", p)) }
        conn.push(location("s1", try point(key, seq: 6, E2EPosition(lat: 48.3, lon: 11.7))))
        let events = await collect(r, 6)
        guard case .location(let l2) = events[0] else { Issue.record("\(events)"); return }
        #expect(l2.seq == 2 && l2.lat == 48.2 && l2.accuracyM == 7)
        var cannot: [Int] = []
        var notices: [E2EKeyNotice] = []
        var locations: [Int] = [2]
        for e in events.dropFirst() {
            switch e {
            case .cannotDecrypt(let cd): cannot.append(cd.seq)
            case .keyNotice(let n): notices.append(n)
            case .location(let l): locations.append(l.seq)
            default: Issue.record("unexpected \(e)")
            }
        }
        #expect(cannot == [3, 4, 5])
        #expect(locations == [2, 6])
        // The moved point is under a kid this key never opened, after one it did: said once.
        #expect(notices == [.rekeyed])
        await c.close()
    }

    @Test func aMemberOpensItsBoxAndItsNewBoxAfterARekey() async throws {
        let server = FakeServer()
        let (c, conn, _) = try await server.client()
        let key = StreamKey.generate()
        let ms = E2E.newMemberSecret()
        async let watching = c.watch(stream: "s1", memberToken: "m2", e2e: .member(secret: ms, member: 2))
        let w = try await conn.expect("panic.watch")
        #expect(w["member_token"]?.stringValue == "m2")
        conn.ok(w, ["state": .object(state("s1", seq: 1, kid: key.kid, trail: [try point(key, seq: 1, E2EPosition(lat: 1, lon: 2))])),
                    "box": .string(try E2E.wrapForMember(key, memberSecret: ms, member: 2))])
        let watch = try await watching
        let r = Reader(watch.events)
        guard case .state(let s, _)? = await r.next() else { Issue.record("no state"); return }
        #expect(s.last?.lat == 1)
        let next = StreamKey.generate()
        conn.push(["type": "panic.rekeyed", "stream": "s1", "kid": .string(next.kid), "box": .string(try E2E.wrapForMember(next, memberSecret: ms, member: 2))])
        guard case .rekeyed(let kid)? = await r.next() else { Issue.record("no rekeyed"); return }
        #expect(kid == next.kid)
        conn.push(location("s1", try point(next, seq: 2, E2EPosition(lat: 3, lon: 4))))
        guard case .location(let l)? = await r.next() else { Issue.record("not opened"); return }
        #expect(l.lat == 3)
        await c.close()
    }

    @Test func aMemberWithAnotherMembersSecretOpensNothing() async throws {
        let server = FakeServer()
        let (c, conn, _) = try await server.client()
        let key = StreamKey.generate()
        async let watching = c.watch(stream: "s1", memberToken: "m2", e2e: .member(secret: E2E.newMemberSecret(), member: 2))
        let w = try await conn.expect("panic.watch")
        conn.ok(w, ["state": .object(state("s1", seq: 1, kid: key.kid, trail: [try point(key, seq: 1, E2EPosition(lat: 1, lon: 2))])),
                    "box": .string(try E2E.wrapForMember(key, memberSecret: E2E.newMemberSecret(), member: 2))])
        let watch = try await watching
        let events = await collect(Reader(watch.events), 3)
        guard case .state(let s, _) = events[0] else { Issue.record("\(events)"); return }
        #expect(s.trail.isEmpty && s.last == nil)
        guard case .cannotDecrypt = events[1], case .keyNotice(.box) = events[2] else { Issue.record("\(events)"); return }
        await c.close()
    }
}

/// The JS client and the Swift client on one stream's wire: what one seals the other opens.
@Suite struct E2EStreamInteropTests {
    @Test func aJSOwnersSealedUpdatesOpenInTheSwiftWatch() async throws {
        let server = FakeServer()
        let (c, conn, _) = try await server.client()
        let key = StreamKey.generate()
        let js = try node(["seal", key.base64url, key.kid, "1", "red", #"{"lat":59.3293,"lon":18.0686,"accuracy_m":12,"note":"taxi"}"#])
        #expect(js.status == 0)
        async let watching = c.watch(stream: "s1", watchToken: "w1", e2e: .key(key.bytes))
        let w = try await conn.expect("panic.watch")
        let p1: JSONObject = ["sealed": .string(js.output), "kid": .string(key.kid), "status": "red", "seq": 1, "at": 5]
        conn.ok(w, ["state": .object(state("s1", seq: 1, kid: key.kid, trail: [p1]))])
        let watch = try await watching
        let r = Reader(watch.events)
        guard case .state(let s, _)? = await r.next() else { Issue.record("no state"); return }
        #expect(s.last?.lat == 59.3293 && s.last?.accuracyM == 12)
        let js2 = try node(["seal", key.base64url, key.kid, "2", "red", #"{"lat":59.3301,"lon":18.0702}"#])
        conn.push(location("s1", ["sealed": .string(js2.output), "kid": .string(key.kid), "status": "red", "seq": 2, "at": 6]))
        // The same JS value replayed at seq 3: refused.
        conn.push(location("s1", ["sealed": .string(js2.output), "kid": .string(key.kid), "status": "red", "seq": 3, "at": 7]))
        guard case .location(let l)? = await r.next() else { Issue.record("not opened"); return }
        #expect(l.lat == 59.3301 && l.lon == 18.0702)
        guard case .cannotDecrypt(let cd)? = await r.next() else { Issue.record("a replay opened"); return }
        #expect(cd.seq == 3)
        await c.close()
    }

    @Test func aSwiftOwnersSealedStartAndUpdateOpenInJS() async throws {
        let server = FakeServer()
        let (c, conn, _) = try await server.client()
        let key = StreamKey.generate()
        async let started = c.startPanic(status: .red, position: Position(lat: 52.52, lon: 13.405), note: "ü \"q\"", e2e: key)
        let start = try await conn.expect("panic.start")
        conn.ok(start, ["stream": "s1", "seq": 1, "owner_token": "tok", "watch_tokens": ["w1"]])
        let owner = try await started
        let sealedStart = try #require(start["e2e"]?.objectValue?["sealed"]?.stringValue)
        let opened = try node(["open", key.base64url, key.kid, "1", "red", sealedStart])
        #expect(opened.status == 0)
        let value = try #require(JSONValue.parse(opened.output)?.objectValue)
        #expect(value["lat"]?.doubleValue == 52.52 && value["note"]?.stringValue == "ü \"q\"")
        async let updated = owner.update(Position(lat: 52.53, lon: 13.41, heading: 90))
        let u = try await conn.expect("panic.update")
        conn.ok(u, ["seq": 2])
        _ = try await updated
        let js = try node(["open", key.base64url, key.kid, "2", "red", try #require(u["sealed"]?.stringValue)])
        #expect(JSONValue.parse(js.output)?.objectValue?["heading"]?.doubleValue == 90)
        #expect(try node(["open", key.base64url, key.kid, "3", "red", u["sealed"]!.stringValue!]) == ("error cannot_decrypt", 2))
        await c.close()
    }
}

/// Runs `node clients/js/test/e2e-live-cli.js arguments…` with `input` on its stdin; its stdout
/// lines. A node that cannot run fails the test (never skips it).
private func liveNode(_ arguments: [String], input: String = "") throws -> [String] {
    let script = repositoryRoot.appendingPathComponent("clients/js/test/e2e-live-cli.js").path
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = ["node", script] + arguments
    let inPipe = Pipe(), out = Pipe(), err = Pipe()
    p.standardInput = inPipe
    p.standardOutput = out
    p.standardError = err
    try p.run()
    inPipe.fileHandleForWriting.write(Data(input.utf8))
    try inPipe.fileHandleForWriting.close()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    p.waitUntilExit()
    guard p.terminationStatus == 0 else {
        throw NodeMissing(detail: "node e2e-live-cli.js \(arguments.first ?? "") exited \(p.terminationStatus): \(errors)")
    }
    return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
}

/// A live e2e stream on a real vigild: Swift ↔ Swift, JS → Swift and Swift → JS.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct E2ELiveInteropTests {
    @Test func aSwiftOwnerStreamsSealedAndASwiftWatcherOpensEvenAfterAStatusChangeItDidNotMake() async throws {
        let d = try Daemon(.client())
        try await d.start()
        let phone = try await liveClient(d)
        let contact = try await liveClient(d)
        let key = StreamKey.generate()
        let owner = try await phone.startPanic(status: .amber, position: Position(lat: 51.5007193, lon: -0.1246377, accuracyM: 12),
                                               note: "swift e2e", e2e: key)
        let watch = try await contact.watch(stream: owner.stream, watchToken: await owner.watchTokens()[0], e2e: .key(key.bytes))
        let r = Reader(watch.events)
        guard case .state(let s, _)? = await r.next() else { Issue.record("no state"); return }
        #expect(s.e2e == true && s.kid == key.kid && s.last?.lat == 51.5007193 && s.note == nil)
        #expect(try await owner.update(Position(lat: 51.5011, lon: -0.1252)) == 2)
        // Another connection with the owner token turns it red: the owner's next update is
        // refused for seq 3 amber and sealed again for seq 4 red.
        let other = try await liveClient(d)
        _ = try await other.request("panic.status", ["stream": .string(owner.stream), "owner_token": .string(owner.ownerToken), "status": "red"])
        #expect(try await owner.update(E2EPosition(lat: 51.5019, lon: -0.1261, note: "later")) == 4)
        var seen: [String] = []
        while seen.count < 3, let e = await r.next() {
            switch e {
            case .location(let l): seen.append("location \(l.seq) \(l.lat)")
            case .status(let st): seen.append("status \(st.seq) \(st.status.rawValue)")
            default: seen.append("\(e)")
            }
        }
        #expect(seen == ["location 2 51.5011", "status 3 red", "location 4 51.5019"])
        await phone.close(); await contact.close(); await other.close()
        _ = await d.stop()
    }

    @Test func aJSOwnersLiveStreamOpensInTheSwiftWatch() async throws {
        let d = try Daemon(.client())
        try await d.start()
        let lines = try liveNode(["own", d.url().absoluteString],
                                 input: #"{"lat":59.3293,"lon":18.0686,"accuracy_m":12,"note":"from js"}"# + "\n" + #"{"lat":59.3301,"lon":18.0702}"# + "\n")
        let info = try #require(JSONValue.parse(lines.first ?? "")?.objectValue)
        #expect(lines.dropFirst().first == "2")
        let keyText = try #require(info["key"]?.stringValue)
        let key = try #require(E2E.decodeKey(keyText))
        let contact = try await liveClient(d)
        let watch = try await contact.watch(stream: try #require(info["stream"]?.stringValue), watchToken: try #require(info["token"]?.stringValue),
                                            since: 0, e2e: .key(key))
        var seen: [String] = []
        for await e in watch.events {
            switch e {
            case .location(let l): seen.append("location \(l.seq) \(l.lat) \(l.lon)")
            case .ended(let end): seen.append("ended \(end.reason)")
            case .state: break
            default: seen.append("\(e)")
            }
        }
        #expect(seen == ["location 1 59.3293 18.0686", "location 2 59.3301 18.0702", "ended safe"])
        await contact.close()
        _ = await d.stop()
    }

    @Test func aSwiftOwnersLiveStreamOpensInTheJSWatchModel() async throws {
        let d = try Daemon(.client())
        try await d.start()
        let phone = try await liveClient(d)
        let key = StreamKey.generate()
        let owner = try await phone.startPanic(status: .red, position: Position(lat: 48.2082, lon: 16.3738), note: "from swift", e2e: key)
        try await owner.update(Position(lat: 48.21, lon: 16.38, heading: 90))
        let lines = try liveNode(["watch", d.url().absoluteString, owner.stream, await owner.watchTokens()[0], key.base64url, "2"])
        let points = lines.compactMap { JSONValue.parse($0)?.objectValue }
        #expect(points.map { $0["seq"]?.intValue } == [1, 2])
        #expect(points.allSatisfy { $0["ok"]?.boolValue == true })
        #expect(points[0]["position"]?.objectValue?["note"]?.stringValue == "from swift")
        #expect(points[1]["position"]?.objectValue?["heading"]?.doubleValue == 90)
        // A key that is not the stream's opens nothing there.
        let wrong = try liveNode(["watch", d.url().absoluteString, owner.stream, await owner.watchTokens()[0], StreamKey.generate().base64url, "2"])
        #expect(wrong.compactMap { JSONValue.parse($0)?.objectValue?["ok"]?.boolValue } == [false, false])
        await phone.close()
        _ = await d.stop()
    }
}
