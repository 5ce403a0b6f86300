import Foundation
import Testing
import VigilCore
import VigilState
@testable import VigilServer

/// The admin listener's `/state/digest`, its cache, and the cluster sequence the daemon's
/// snapshots record (nil unless a caller supplies one).
@Suite struct StateDigestGlueTests {
    static func digest(_ h: ServerHarness) throws -> JSONObject {
        let reply = try h.get("/state/digest", admin: true)
        #expect(reply.status == 200)
        return try #require(try JSONParser.parse(Array(reply.body.utf8)).object)
    }

    @Test func theAdminListenerReportsTheDigestOfTheHubs() throws {
        let h = try ServerHarness()
        let client = try h.open()
        client.send(#"{"op":"pin.create","ref":1,"pin":{"lat":52.5,"lon":13.4,"title":"t"}}"#)
        client.send(#"{"op":"panic.start","ref":2,"status":"red","lat":52.5,"lon":13.4}"#)
        try h.read(client, count: 2)
        let json = try Self.digest(h)
        let at = try #require(json["at"]?.int64)
        let rules = StateDigest.Rules(now: at, panic: h.v1.panic.settings, checkin: h.v1.checkin.settings)
        let expected = StateDigest.of(map: h.v1.hub, panic: h.v1.panic, checkin: h.v1.checkin, rules: rules)
        #expect(json["digest"]?.string == expected.hex && expected.hex.count == 64)
        #expect(json["pins"]?.int64 == 1 && json["streams"]?.int64 == 1 && json["circles"]?.int64 == 0)
        #expect(json["age_ms"]?.int64 == 0 && json["compute_ms"] != nil)
        #expect(json["cluster_sequence"]?.isNull == true, "null on a standalone node")
        // Asked again at once: the kept digest, not a second computation; the new pin is not in it yet.
        client.send(#"{"op":"pin.create","ref":3,"pin":{"lat":52.6,"lon":13.4,"title":"u"}}"#)
        try h.read(client, count: 3)
        let again = try Self.digest(h)
        #expect(again["digest"]?.string == expected.hex && again["at"]?.int64 == at && h.server.stateDigests.computations == 1)
        // Only on the admin listener.
        #expect(try h.get("/state/digest").status == 404)
    }

    /// A cluster node's applied sequence is taken with the digest, and kept with it.
    @Test func theDigestCarriesTheClusterSequenceTakenWithIt() throws {
        var cache = StateDigestCache()
        var applied: UInt64 = 41
        cache.replicatedSequence = { applied += 1; return applied }
        let empty = StateDigest.of(snapshot: StateSnapshot(takenAt: 0, journalSegment: 0, pins: [], streams: []),
                                   rules: StateDigest.Rules(now: 0, endedGraceMs: 1, circleIdleLifetimeMs: 1))
        #expect(cache.entry(nowNs: 0, wallMs: 1) { _ in empty }.replicatedSequence == 42)
        #expect(cache.entry(nowNs: 1, wallMs: 2) { _ in empty }.replicatedSequence == 42, "kept with its digest")
        let h = try ServerHarness()
        h.server.stateDigests.replicatedSequence = { 7 }
        #expect(try Self.digest(h)["cluster_sequence"]?.int64 == 7)
    }

    @Test func theCacheKeepsADigestForASecondOrTenTimesItsCost() {
        var cache = StateDigestCache()
        var computed = 0
        let empty = StateDigest.of(map: MapHub(settings: PinSettings()), panic: PanicHub(settings: PanicSettings()),
                                   checkin: CheckinHub(settings: CheckinSettings()), rules: StateDigest.Rules(now: 0, endedGraceMs: 1, circleIdleLifetimeMs: 1))
        func ask(_ nowNs: Int64, wall: Int64) -> StateDigestCache.Entry {
            cache.entry(nowNs: nowNs, wallMs: wall) { _ in computed += 1; return empty }
        }
        let first = ask(5_000_000_000, wall: 100)
        #expect(computed == 1 && first.at == 100)
        #expect(ask(5_999_999_999, wall: 200).at == 100 && computed == 1)
        #expect(ask(6_000_000_000, wall: 300).at == 300 && computed == 2 && cache.computations == 2)
        #expect(StateDigestCache.keepNs(costNs: 1_000) == 1_000_000_000)
        #expect(StateDigestCache.keepNs(costNs: 800_000_000) == 8_000_000_000)
        #expect(StateDigestCache.keepNs(costNs: .max) > 0)
    }

    /// The daemon's snapshots record no cluster sequence unless the caller supplies one; the
    /// sequence is asked when a snapshot begins, and the final snapshot records it too.
    @Test func snapshotsRecordTheSuppliedClusterSequence() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("vigil-seq-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let h = try ServerHarness {
            $0.stateDirectory = directory
            $0.snapshotIntervalSeconds = 1
        }
        let state = try StateDirectory(path: directory)
        #expect(try state.loadNewestSnapshot().snapshot?.replicatedSequence == nil, "the start-up snapshot of a standalone node")
        let persistence = try #require(h.v1.persistence)
        var applied: UInt64 = 76
        persistence.replicatedSequence = { applied += 1; return applied }
        try h.run(until: { persistence.snapshotStats.written >= 1 })
        #expect(try state.loadNewestSnapshot().snapshot?.replicatedSequence == 77)
        persistence.shutdown(map: h.v1.hub, panic: h.v1.panic, checkin: h.v1.checkin)
        #expect(try state.loadNewestSnapshot().snapshot?.replicatedSequence == 78)
    }
}
