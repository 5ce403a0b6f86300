import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// `PanicHub.exportStreams/restoreStreams`.
@Suite struct PanicHubStateTests {
    let secrets = TestSecrets(seed: 41)
    let settings = PanicSettings(historyEvents: 4, staleAfterMs: 30_000, endedGraceMs: 100_000, maxWatchTokens: 4, maxStreams: 10, maxWatchersOnStart: 3)

    struct Started {
        var id: StreamID
        var ownerToken: String
        var watchTokens: [String]
    }

    func start(_ hub: inout PanicHub, owner: WatcherID, now: Int64) throws -> Started {
        var out: [PanicDelivery] = []
        let s = try hub.start(owner: owner, status: .red, location: PanicLocation(lat: 1, lon: 2), note: nil, watchers: 2,
                              secrets: secrets, now: now, out: &out).get()
        return Started(id: s.stream.id, ownerToken: s.ownerToken, watchTokens: s.watchTokens)
    }

    @Test func restoredStreamsHaveNoConnectionsButKeepTheirTokens() throws {
        var live = PanicHub(settings: settings)
        let a = try start(&live, owner: 1, now: 0)
        var out: [PanicDelivery] = []
        _ = live.watch(a.id, watcher: 5, watchToken: a.watchTokens[0], since: nil, secrets: secrets, out: &out)
        for i in 1...6 {
            _ = live.update(a.id, by: 1, ownerToken: nil, location: PanicLocation(lat: Double(i), lon: 0), secrets: secrets, now: Int64(i) * 1000, out: &out)
        }
        var restored = PanicHub(settings: settings)
        restored.restoreStreams(live.exportStreams(), now: 7000)
        let stream = try #require(restored.stream(a.id))
        expectSameStream(stream, try #require(live.stream(a.id)))
        #expect(stream.owner == nil && restored.watcherCount(a.id) == 0)

        // The old owner connection number means nothing now; the owner token still steers.
        #expect(restored.update(a.id, by: 1, ownerToken: nil, location: PanicLocation(lat: 0, lon: 0), secrets: secrets, now: 8000, out: &out) == .failure(.forbidden))
        _ = try restored.resume(a.id, by: 9, ownerToken: a.ownerToken, secrets: secrets).get()
        #expect(try restored.update(a.id, by: 9, ownerToken: nil, location: PanicLocation(lat: 0, lon: 0), secrets: secrets, now: 8000, out: &out).get() == 8)

        // A contact re-watches with `since` and gets what it missed, from the restored history.
        let watched = try restored.watch(a.id, watcher: 5, watchToken: a.watchTokens[0], since: 5, secrets: secrets, out: &out).get()
        #expect(watched.events.map(\.seq) == [6, 7, 8] && !watched.gap)
        let early = try restored.watch(a.id, watcher: 6, watchToken: a.watchTokens[1], since: 1, secrets: secrets, out: &out).get()
        #expect(early.gap)
    }

    @Test func staleNoticesAreReArmed() throws {
        var live = PanicHub(settings: settings)
        let quiet = try start(&live, owner: 1, now: 0)          // silent since 0: stale at 30 s
        let chatty = try start(&live, owner: 2, now: 0)
        var out: [PanicDelivery] = []
        _ = live.update(chatty.id, by: 2, ownerToken: nil, location: PanicLocation(lat: 0, lon: 0), secrets: secrets, now: 20_000, out: &out)

        var restored = PanicHub(settings: settings)
        restored.restoreStreams(live.exportStreams(), now: 25_000)
        #expect(restored.nextDeadline == 30_000)
        _ = restored.watch(quiet.id, watcher: 7, watchToken: quiet.watchTokens[0], since: nil, secrets: secrets, out: &out)
        _ = restored.watch(chatty.id, watcher: 8, watchToken: chatty.watchTokens[0], since: nil, secrets: secrets, out: &out)
        out = []
        restored.tick(now: 30_000, out: &out)
        #expect(out.map(\.stream) == [quiet.id] && out.first?.kind == .stale(since: 0))
        out = []
        restored.tick(now: 50_000, out: &out)
        #expect(out.map(\.stream) == [chatty.id] && out.first?.kind == .stale(since: 20_000))
        #expect(restored.stream(quiet.id)?.isStaleNotified == true)
    }

    @Test func aStaleNoticeGivenBeforeTheRestartIsNotRepeated() throws {
        var live = PanicHub(settings: settings)
        let a = try start(&live, owner: 1, now: 0)
        var out: [PanicDelivery] = []
        _ = live.watch(a.id, watcher: 5, watchToken: a.watchTokens[0], since: nil, secrets: secrets, out: &out)
        live.tick(now: 40_000, out: &out)
        #expect(out.contains { $0.kind == .stale(since: 0) })
        var restored = PanicHub(settings: settings)
        restored.restoreStreams(live.exportStreams(), now: 40_000)
        _ = restored.watch(a.id, watcher: 5, watchToken: a.watchTokens[0], since: nil, secrets: secrets, out: &out)
        out = []
        restored.tick(now: 90_000, out: &out)
        #expect(out.isEmpty)
    }

    @Test func endedStreamsLeaveAfterTheirGraceAndPastGraceOnesAtOnce() throws {
        var live = PanicHub(settings: settings)
        let early = try start(&live, owner: 1, now: 0)
        let late = try start(&live, owner: 2, now: 0)
        var out: [PanicDelivery] = []
        _ = live.end(early.id, by: 1, ownerToken: nil, reason: .safe, secrets: secrets, now: 10_000, out: &out)
        _ = live.end(late.id, by: 2, ownerToken: nil, reason: .cancelled, secrets: secrets, now: 50_000, out: &out)
        let exported = live.exportStreams()

        var restored = PanicHub(settings: settings)
        restored.restoreStreams(exported, now: 120_000)           // early's grace ended at 110 s
        #expect(restored.stream(early.id) == nil && restored.stream(late.id) != nil)
        #expect(restored.nextDeadline == 150_000)
        restored.tick(now: 150_000, out: &out)
        #expect(restored.count == 0)
    }

    @Test func exportIsOrderedById() throws {
        var live = PanicHub(settings: settings)
        for owner in 1...6 { _ = try start(&live, owner: WatcherID(owner), now: 0) }
        let ids = live.exportStreams().map(\.id)
        #expect(ids == ids.sorted() && ids.count == 6)
    }

    @Test func restoringTimesNearTheLimitsCannotOverflow() throws {
        let s = Fixtures.stream(secrets, events: 0, capacity: 2, start: PanicStream.restorableMagnitude)
        var hub = PanicHub(settings: PanicSettings(staleAfterMs: .max, endedGraceMs: .max, abandonAfterMs: .max))
        hub.restoreStreams([s], now: 0)
        #expect(hub.nextDeadline == .max)
        var abandoning = PanicHub(settings: PanicSettings(staleAfterMs: .max, endedGraceMs: .max))
        abandoning.restoreStreams([s], now: 0)
        #expect(abandoning.nextDeadline == PanicStream.restorableMagnitude + PanicSettings().abandonAfterMs)
        var out: [PanicDelivery] = []
        #expect(abandoning.tick(now: .max, out: &out).map(\.event.kind) == [.ended(.abandoned)])
    }
}
