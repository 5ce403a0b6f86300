import Testing
@testable import VigilCore
import VigilTestSupport

/// The `state` of `panic.watch` / `panic.resume` replies: a history of up to 100,000 events does
/// not fit a reply, so its trail is cut to the newest points that fit, and says so.
@Suite struct PanicStateMessageTests {
    let secrets = TestSecrets()

    func stream(events: Int) -> PanicStream {
        var s = PanicStream(id: StreamID(high: 1, low: 2), status: .red, location: PanicLocation(lat: 1, lon: 2), note: "n",
                            ownerDigest: secrets.digest(ofToken: "owner"), watchTokens: [secrets.digest(ofToken: "a")],
                            owner: 3, now: 100, historyEvents: events)
        for i in 2...events {
            _ = s.record(i % 10 == 0 ? .status(.amber) : .location(PanicLocation(lat: 1 + Double(i) / 1e5, lon: 2, accuracyM: 8.5)), now: 100 + Int64(i))
        }
        return s
    }

    func reply(_ s: PanicStream, maxBytes: Int) throws -> (text: Int, state: JSONObject) {
        var w = JSONWriter(capacity: 1024)
        ServerMessages.reply(.panicState(s, gap: false), ref: .number(1), maxBytes: maxBytes, into: &w)
        let json = try JSONParser.parse(w.bytes)
        return (w.count, try #require(json.object?["state"]?.object))
    }

    @Test func aTrailThatFitsIsWholeAndNotMarked() throws {
        let s = stream(events: 100)
        let (_, state) = try reply(s, maxBytes: 1 << 20)
        #expect(state["trail"]?.array?.compactMap { $0.object?["seq"]?.int64 } == s.trail.map { Int64($0.seq) })
        #expect(state["trail_truncated"] == nil)
    }

    @Test(arguments: [4_096, 20_000, 65_536])
    func aTrailThatDoesNotFitKeepsItsNewestPointsAndSaysSo(maxBytes: Int) throws {
        let s = stream(events: 5_000)
        let (size, state) = try reply(s, maxBytes: maxBytes)
        #expect(size <= maxBytes)
        #expect(state["trail_truncated"]?.bool == true)
        let seqs = try #require(state["trail"]?.array?.compactMap { $0.object?["seq"]?.int64 })
        let all = s.trail.map { Int64($0.seq) }
        #expect(!seqs.isEmpty && seqs == Array(all.suffix(seqs.count)))       // the newest, in order
        #expect(size + 200 > maxBytes - 512)                                  // and as many as fit
        #expect(state["seq"]?.int64 == 5_000 && state["last"] != nil)        // the rest of the state is whole
    }

    func encoded(_ s: PanicStream) -> [UInt8] {
        var w = JSONWriter(capacity: 256)
        ServerMessages.panicState(s, maxBytes: 4_096, into: &w)
        return w.bytes
    }

    /// The server encodes a state once per turn for every reply showing the same state
    /// (`hasTheSameState`): over every pair of a stream's versions, and versions of another stream
    /// and of copies rebuilt with their own storage, "the same state" holds exactly when the
    /// encoder writes the same bytes.
    @Test func theSameStateIsExactlyTheSameEncoding() {
        func make(_ id: UInt64, history: Int = 4) -> PanicStream {
            PanicStream(id: StreamID(high: id, low: 2), status: .red, location: PanicLocation(lat: 1, lon: 2), note: id == 1 ? "n" : nil,
                        ownerDigest: secrets.digest(ofToken: "owner"), watchTokens: [secrets.digest(ofToken: "a")],
                        owner: 3, now: 100, historyEvents: history)
        }
        let steps: [PanicEventKind] = [
            .location(PanicLocation(lat: 1.5, lon: 2)), .status(.amber), .timer(dueAt: 900), .location(PanicLocation(lat: 1.6, lon: 2)),
            .missedCheckIn(dueAt: 900, last: LastLocation(location: PanicLocation(lat: 1.6, lon: 2), at: 104), sentAt: 950),
            .location(PanicLocation(lat: 1.7, lon: 2)), .ended(.safe),
        ]
        var versions: [PanicStream] = []
        for id in [UInt64(1), 2] {
            var s = make(id)
            var twin = make(id)  // the same events into storage of its own
            versions.append(s)
            for (i, step) in steps.enumerated() {
                _ = s.record(step, now: 101 + Int64(i))
                _ = twin.record(step, now: 101 + Int64(i))
                versions += [s, twin]
            }
            // A copy whose watchers and owner changed: not part of the state.
            var watched = s
            watched.watchers[9] = secrets.digest(ofToken: "a")
            watched.owner = nil
            versions.append(watched)
        }
        // The same seq and times with another location (a cluster's take-back and a different
        // write), and streams that differ only in an older point of their trail.
        var other = make(1)
        _ = other.record(.location(PanicLocation(lat: 9, lon: 9)), now: 101)
        versions.append(other)
        var older = make(1)
        _ = older.record(.location(PanicLocation(lat: 1.4, lon: 2)), now: 101)
        for (i, step) in steps.enumerated().dropFirst() {
            _ = older.record(step, now: 101 + Int64(i))
            versions.append(older)
        }
        // End-to-end encrypted versions: sealed points, a rekeyed copy (the same events under
        // another key id: another state) and one with other boxes only (boxes are not in a state).
        let kid = E2EKeyID(bytes: Array(0...15))
        func point(_ fill: UInt8) -> SealedPoint {
            SealedPoint(kid: kid, status: .red, sealed: SealedBytes(bytes: [UInt8](repeating: fill, count: 92)))
        }
        var sealed = PanicStream(id: StreamID(high: 3, low: 2), status: .red,
                                 origin: .e2e(E2EStart(keys: E2EKeys(kid: kid, boxes: []), sealed: point(1).sealed)),
                                 ownerDigest: secrets.digest(ofToken: "owner"), watchTokens: [], owner: 3, now: 100, historyEvents: 4)
        versions.append(sealed)
        _ = sealed.record(.sealedLocation(point(2)), now: 101)
        versions.append(sealed)
        var rekeyed = sealed
        rekeyed.e2e = E2EKeys(kid: E2EKeyID(bytes: Array(16...31)), boxes: [])
        var reboxed = sealed
        reboxed.e2e = E2EKeys(kid: kid, boxes: [MemberBox(member: 1, box: point(3).sealed)])
        versions += [rekeyed, reboxed]
        _ = sealed.record(.missedCheckIn(dueAt: 900, last: sealed.last, sentAt: 950), now: 102)
        versions.append(sealed)
        for a in versions {
            for b in versions {
                #expect(a.hasTheSameState(as: b) == (encoded(a) == encoded(b)), "seq \(a.seq) vs \(b.seq)")
            }
        }
    }

    /// The fan-out's reply around a state encoded already is byte for byte the reply encoder's.
    @Test func aReplyAroundAnEncodedStateIsTheReplyEncodersBytes() throws {
        let s = stream(events: 50)
        for (ref, gap) in [(JSONValue.number(7), false), (.string("w"), true), (nil, false)] {
            var direct = JSONWriter(capacity: 256), prefix = JSONWriter(capacity: 256), state = JSONWriter(capacity: 256)
            ServerMessages.reply(.panicState(s, gap: gap), ref: ref, into: &direct)
            ServerMessages.panicState(s, into: &state)
            ServerMessages.stateReplyPrefix(ref: ref, into: &prefix)
            #expect(direct.bytes == prefix.bytes + state.bytes + ServerMessages.stateReplySuffix(gap: gap))
        }
    }
}
