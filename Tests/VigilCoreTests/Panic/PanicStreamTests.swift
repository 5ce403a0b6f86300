import Testing
@testable import VigilCore
import VigilTestSupport

@Suite struct PanicStreamTests {
    let secrets = TestSecrets()

    func make(history: Int = 1000) -> PanicStream {
        PanicStream(id: StreamID(high: 1, low: 2), status: .red, location: PanicLocation(lat: 1, lon: 2), note: "n",
                    ownerDigest: secrets.digest(ofToken: "owner"), watchTokens: [secrets.digest(ofToken: "a"), secrets.digest(ofToken: "b")],
                    owner: 3, now: 100, historyEvents: history)
    }

    @Test func recordKeepsSeqStateAndHistoryTogether() {
        var s = make()
        #expect(s.seq == 1 && s.startedAt == 100 && s.updatedAt == 100 && s.isActive)
        #expect(s.last == LastLocation(location: PanicLocation(lat: 1, lon: 2), at: 100))
        let e2 = s.record(.location(PanicLocation(lat: 3, lon: 4, accuracyM: 5, heading: 90, speedMps: 1.5)), now: 200)
        #expect(e2.seq == 2 && s.last.at == 200 && s.last.clearLocation?.heading == 90)
        let e3 = s.record(.status(.amber), now: 300)
        #expect(e3.seq == 3 && s.status == .amber && s.updatedAt == 300 && s.lastLocationAt == 200)
        let e4 = s.record(.ended(.safe), now: 400)
        #expect(e4.seq == 4 && s.ended == PanicEnd(reason: .safe, at: 400) && !s.isActive)
        #expect(s.events(after: 0)?.map(\.seq) == [1, 2, 3, 4])
        #expect(s.trail.map(\.seq) == [1, 2])
    }

    @Test func eventsAfterASeqAheadOfTheStreamIsNil() {
        var s = make()
        _ = s.record(.status(.amber), now: 101)
        #expect(s.events(after: 2) == [])
        #expect(s.events(after: 3) == nil)
    }

    @Test func trailIsTheLocationsStillHeld() {
        var s = make(history: 3)
        _ = s.record(.location(PanicLocation(lat: 2, lon: 2)), now: 101)     // 2
        _ = s.record(.status(.amber), now: 102)                               // 3
        _ = s.record(.location(PanicLocation(lat: 4, lon: 4)), now: 103)     // 4: seq 1 drops
        #expect(s.trail.map(\.seq) == [2, 4])
        #expect(s.trail.map(\.at) == [101, 103])
    }

    @Test func watchTokenLookupFindsOnlyLiveTokens() {
        var s = make()
        #expect(s.watchTokenIndex(secrets.digest(ofToken: "b")) == 1)
        #expect(s.watchTokenIndex(secrets.digest(ofToken: "owner")) == nil)
        s.watchTokens.remove(at: 0)
        #expect(s.watchTokenIndex(secrets.digest(ofToken: "a")) == nil)
        #expect(s.watchTokenIndex(secrets.digest(ofToken: "b")) == 0)
    }
}
