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
}
