import Testing
import VigilGeo
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// The property the whole layer exists for: drive live hubs with random operations, journal
/// what each successful operation implies (the way the server will), take a snapshot part way,
/// and check that snapshot + journal, through the byte codecs, restore hubs equal to the live ones.
@Suite struct StateReplayTests {
    static let pinSettings: PinSettings = {
        var s = PinSettings()
        s.voteFlagThreshold = 2
        s.maxPins = 40
        return s
    }()
    static let panicSettings = PanicSettings(historyEvents: 5, staleAfterMs: 30_000, endedGraceMs: 90_000,
                                             maxWatchTokens: 4, maxStreams: 6, maxWatchersOnStart: 3, abandonAfterMs: 100_000)
    static let area = GeoArea.box(GeoBox(south: 0, west: 0, north: 10, east: 10))

    struct Run {
        var map = MapHub(settings: StateReplayTests.pinSettings)
        var panic = PanicHub(settings: StateReplayTests.panicSettings)
        var pinTokens: [PinID: String] = [:]
        var ownerTokens: [StreamID: String] = [:]
        var watchTokens: [StreamID: [String]] = [:]
        var before: [UInt8] = []            // journal segment 0: records before the snapshot
        var after: [UInt8] = []             // journal segment 1
        var snapshot: [UInt8]?
        /// The journal segment records go to: 0 until the snapshot begins, then 1.
        var segment = 0
        var now: Int64 = 1_700_000_000_000
        var records = 0
        var abandoned = 0
        var escalated = 0

        mutating func journal(_ record: JournalRecord) {
            if segment == 0 { JournalCodec.append(record, to: &before) } else { JournalCodec.append(record, to: &after) }
            records += 1
        }
    }

    /// A snapshot in progress, taken in slices between operations.
    struct Slicing {
        var writer: SnapshotWriter
        var ids: [PinID]
        var next = 0
    }

    /// `slices`: take the snapshot a few pins per operation (as the loop thread will) instead of
    /// all at once at `snapshotAt`.
    static func drive(seed: UInt64, operations: Int, snapshotAt: Int?, slices: Int? = nil) -> Run {
        let secrets = TestSecrets(seed: seed)
        let dice = TestSecrets(seed: seed &* 7919 &+ 1)
        func roll(_ n: Int) -> Int { dice.roll(n) }
        var run = Run()
        var pinOut: [PinDelivery] = []
        var panicOut: [PanicDelivery] = []
        var madePins = 0
        _ = run.map.subscribe(1, area: area, categories: nil)

        func pickPin() -> PinID? {
            let ids = run.pinTokens.keys.sorted()
            return ids.isEmpty ? nil : ids[roll(ids.count)]
        }
        func pickStream() -> StreamID? {
            let ids = run.ownerTokens.keys.sorted()
            return ids.isEmpty ? nil : ids[roll(ids.count)]
        }
        func point() -> GeoPoint { GeoPoint(lat: dice.unit() * 10, lon: dice.unit() * 10) }

        var slicing: Slicing?
        for op in 0..<operations {
            run.now += Int64(roll(4000))
            if op == snapshotAt {
                run.segment = 1
                if slices != nil {
                    slicing = Slicing(writer: SnapshotWriter(takenAt: run.now, journalSegment: 1), ids: run.map.pinIDs.sorted())
                } else {
                    let map = run.map, panic = run.panic
                    run.snapshot = SnapshotCodec.encode(StateSnapshot(takenAt: run.now, journalSegment: 1, map: map, panic: panic))
                }
            }
            if var s = slicing, let slices {
                // One slice per operation: pins listed when the snapshot began, as they are now.
                let end = min(s.ids.count, s.next + slices)
                for id in s.ids[s.next..<end] {
                    if let pin = run.map.store[id] { s.writer.append(pin) }
                }
                s.next = end
                if end == s.ids.count {
                    for stream in run.panic.exportStreams() { s.writer.append(stream) }
                    run.snapshot = s.writer.finish()
                    slicing = nil
                } else {
                    slicing = s
                }
            }
            switch roll(20) {
            case 0...3:
                madePins += 1
                let token = "pin-\(madePins)"
                let draft = PinDraft(point: point(), title: Fixtures.titles[roll(Fixtures.titles.count)], description: "d\(madePins)",
                                     category: ["general", "hazard"][roll(2)], ttlSeconds: 60 + roll(540))
                let id = PinID(random: secrets.randomBytes(16))
                if case .success = run.map.create(draft, id: id, editDigest: secrets.digest(ofToken: token), now: run.now, out: &pinOut) {
                    run.pinTokens[id] = token
                    run.journal(.pinState(id, in: run.map))
                }
            case 4...5:
                guard let id = pickPin() else { continue }
                var changes = PinChanges()
                if roll(2) == 0 { changes.lat = dice.unit() * 10 }
                if roll(3) == 0 { changes.title = "edit \(op)" }
                if roll(3) == 0 { changes.ttlSeconds = 60 + roll(300) }
                let token = roll(6) == 0 ? "wrong" : run.pinTokens[id]!
                if case .success = run.map.update(id, digest: secrets.digest(ofToken: token), changes: changes, now: run.now, out: &pinOut) {
                    run.journal(.pinState(id, in: run.map))
                }
            case 6:
                guard let id = pickPin() else { continue }
                if case .success = run.map.delete(id, digest: secrets.digest(ofToken: run.pinTokens[id]!), out: &pinOut) {
                    run.journal(.pinState(id, in: run.map))
                }
            case 7...8:
                guard let id = pickPin() else { continue }
                // The vote itself, its pin's removal, or nothing (the same vote again).
                if case .success(let vote) = run.map.vote(id, voter: UInt64(1 + roll(12)), value: roll(3) == 0 ? -1 : 1, out: &pinOut),
                   let record = JournalRecord.afterVote(vote) {
                    run.journal(record)
                }
            case 9:
                run.map.expire(now: run.now, out: &pinOut)         // derived at restore: not journaled
            case 10:
                let amber = roll(2) == 0
                let timer: PanicTimer? = amber && roll(2) == 0 ? .inSeconds(Int64(1 + roll(60))) : nil
                let result = run.panic.start(owner: WatcherID(1 + roll(4)), status: amber ? .amber : .red,
                                             location: Fixtures.location(dice), note: roll(2) == 0 ? nil : "note \(op)",
                                             watchers: 1 + roll(3), timer: timer, secrets: secrets, now: run.now, out: &panicOut)
                if case .success(let started) = result {
                    run.ownerTokens[started.stream.id] = started.ownerToken
                    run.watchTokens[started.stream.id] = started.watchTokens
                    run.journal(.panicStart(started.stream))
                }
            case 11...14:
                guard let id = pickStream() else { continue }
                let token = run.ownerTokens[id]!
                switch roll(8) {
                case 5...6:
                    // The event if the status changed; nothing if it was the status it had.
                    let change: Result<PanicChange, PanicFailure> = run.panic.setStatus(id, by: 100, ownerToken: token, status: roll(2) == 0 ? .red : .amber,
                                                                                        secrets: secrets, now: run.now, out: &panicOut)
                    if case .success(let change) = change, let event = change.event { run.journal(.panicEvent(id, event)) }
                case 7:
                    // A safety timer set, moved or cancelled (refused on a red stream): an event when it changed.
                    let timer: PanicTimer = roll(4) == 0 ? .cancel : .at(run.now + Int64(1 + roll(60_000)))
                    let change = run.panic.setTimer(id, by: 100, ownerToken: token, timer: timer, secrets: secrets, now: run.now, out: &panicOut)
                    if case .success(let change) = change, let event = change.event { run.journal(.panicEvent(id, event)) }
                default:
                    let result = roll(5) == 0
                        ? run.panic.end(id, by: 100, ownerToken: token, reason: roll(2) == 0 ? .safe : .cancelled, secrets: secrets, now: run.now, out: &panicOut)
                        : run.panic.update(id, by: 100, ownerToken: token, location: Fixtures.location(dice), secrets: secrets, now: run.now, out: &panicOut)
                    if case .success = result, let stream = run.panic.stream(id), let record = JournalRecord.latestEvent(of: stream) {
                        run.journal(record)
                    }
                }
            case 15:
                guard let id = pickStream() else { continue }
                if case .success(let token) = run.panic.invite(id, by: 100, ownerToken: run.ownerTokens[id]!, secrets: secrets) {
                    run.watchTokens[id, default: []].append(token)
                    run.journal(.panicInvite(id, secrets.digest(ofToken: token)))
                }
            case 16:
                guard let id = pickStream(), let tokens = run.watchTokens[id], !tokens.isEmpty else { continue }
                let token = tokens[roll(tokens.count)]
                if case .success(.revoked) = run.panic.revoke(id, by: 100, ownerToken: run.ownerTokens[id]!, watchToken: token, secrets: secrets, out: &panicOut) {
                    run.journal(.panicRevoke(id, secrets.digest(ofToken: token)))
                }
            case 17:
                // Connection state only: never journaled.
                guard let id = pickStream() else { continue }
                switch roll(3) {
                case 0: _ = run.panic.resume(id, by: WatcherID(1 + roll(4)), ownerToken: run.ownerTokens[id]!, secrets: secrets)
                case 1:
                    if let tokens = run.watchTokens[id], !tokens.isEmpty {
                        _ = run.panic.watch(id, watcher: WatcherID(10 + roll(5)), watchToken: tokens[roll(tokens.count)], since: nil, secrets: secrets, out: &panicOut)
                    }
                default: run.panic.disconnected(WatcherID(1 + roll(15)), out: &panicOut)
                }
            default:
                // Stale notices and grace removal are derived; the end of an abandoned stream is
                // journaled, as the server journals every event the tick reports.
                for changed in run.panic.tick(now: run.now, out: &panicOut) {
                    run.journal(.panicEvent(changed.stream, changed.event))
                    if case .ended = changed.event.kind { run.abandoned += 1 } else { run.escalated += 1 }
                }
            }
        }
        return run
    }

    /// Restores from `snapshot` (or nothing) and the journal bytes, through the codecs.
    static func restore(snapshot: [UInt8]?, journal: [UInt8], now: Int64) throws -> (map: MapHub, panic: PanicHub, image: StateImage) {
        var image = StateImage()
        if let snapshot { image = StateImage(try SnapshotCodec.decode(snapshot)) }
        let scan = JournalCodec.scan(journal)
        #expect(scan.stop == nil)
        image.apply(scan.records)
        #expect(image.issues == [])
        let (map, panic) = image.restore(pinSettings: pinSettings, panicSettings: panicSettings, now: now)
        return (map, panic, image)
    }

    static func expectEquivalent(live: inout Run, restoredMap: MapHub, restoredPanic: PanicHub, secrets: TestSecrets) {
        var map = restoredMap, panic = restoredPanic
        var pinOut: [PinDelivery] = [], panicOut: [PanicDelivery] = []
        live.map.expire(now: live.now, out: &pinOut)
        live.panic.tick(now: live.now, out: &panicOut)
        panic.tick(now: live.now, out: &panicOut)
        expectSamePins(map.exportPins(), live.map.exportPins())
        expectSameStreams(panic.exportStreams(), live.panic.exportStreams(), compareEndedStale: false)
        // Same answers to what clients will ask after the restart.
        expectSamePins(map.subscribe(9, area: area, categories: nil).pins, live.map.subscribe(9, area: area, categories: nil).pins)
        for stream in live.panic.exportStreams() {
            for token in live.watchTokens[stream.id] ?? [] {
                let a = live.panic.watch(stream.id, watcher: 50, watchToken: token, since: 0, secrets: secrets, out: &panicOut).map { ($0.events, $0.gap) }
                let b = panic.watch(stream.id, watcher: 50, watchToken: token, since: 0, secrets: secrets, out: &panicOut).map { ($0.events, $0.gap) }
                switch (a, b) {
                case (.success(let x), .success(let y)): #expect(x.0 == y.0 && x.1 == y.1)
                case (.failure(let x), .failure(let y)): #expect(x == y)
                default: Issue.record("watch differs for stream \(stream.id): \(a) vs \(b)")
                }
            }
        }
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func snapshotPlusJournalEqualsTheLiveHubs(seed: UInt64) throws {
        var run = Self.drive(seed: seed, operations: 500, snapshotAt: 150 + Int(seed) * 20)
        let secrets = TestSecrets(seed: seed)      // digests only: any instance hashes the same
        #expect(run.snapshot != nil && run.records > 100 && run.abandoned > 0 && run.escalated > 0,
                "\(run.records) records, \(run.abandoned) abandoned, \(run.escalated) escalated")
        #expect(run.map.store.count > 0 && run.panic.count > 0)
        let restored = try Self.restore(snapshot: run.snapshot, journal: run.after, now: run.now)
        Self.expectEquivalent(live: &run, restoredMap: restored.map, restoredPanic: restored.panic, secrets: secrets)
    }

    /// A snapshot taken in slices while operations go on, plus the journal from the segment
    /// opened when it began, restores the same state as one taken at an instant.
    @Test(arguments: [41, 42, 43, 44] as [UInt64])
    func aSnapshotTakenInSlicesRestoresTheSameState(seed: UInt64) throws {
        var run = Self.drive(seed: seed, operations: 500, snapshotAt: 200, slices: 1 + Int(seed % 2))
        #expect(run.snapshot != nil)
        let decoded = try SnapshotCodec.decode(try #require(run.snapshot))
        #expect(decoded.pins.count > 10)
        let restored = try Self.restore(snapshot: run.snapshot, journal: run.after, now: run.now)
        #expect(restored.image.duplicateCount > 0, "some changes were seen by both the slices and the journal")
        Self.expectEquivalent(live: &run, restoredMap: restored.map, restoredPanic: restored.panic, secrets: TestSecrets())
    }

    /// Records already reflected in the snapshot replayed again (the snapshot was taken late, or
    /// the old segment was not yet removed): the result is the same.
    @Test(arguments: [11, 12, 13] as [UInt64])
    func replayingRecordsTheSnapshotHoldsChangesNothing(seed: UInt64) throws {
        var run = Self.drive(seed: seed, operations: 500, snapshotAt: 250)
        let restored = try Self.restore(snapshot: run.snapshot, journal: run.before + run.after, now: run.now)
        #expect(restored.image.duplicateCount > 0)
        Self.expectEquivalent(live: &run, restoredMap: restored.map, restoredPanic: restored.panic, secrets: TestSecrets())
    }

    /// The journal alone, from the very first record, rebuilds the same state.
    @Test(arguments: [21, 22, 23] as [UInt64])
    func theWholeJournalAloneRebuildsTheState(seed: UInt64) throws {
        var run = Self.drive(seed: seed, operations: 500, snapshotAt: nil)
        let restored = try Self.restore(snapshot: nil, journal: run.before, now: run.now)
        Self.expectEquivalent(live: &run, restoredMap: restored.map, restoredPanic: restored.panic, secrets: TestSecrets())
    }

    /// Restored hubs go on like the live ones: the same next operations give the same results.
    @Test func restoredHubsContinueLikeTheLiveOnes() throws {
        var run = Self.drive(seed: 31, operations: 300, snapshotAt: 100)
        let secrets = TestSecrets()
        let restored = try Self.restore(snapshot: run.snapshot, journal: run.after, now: run.now)
        var map = restored.map, panic = restored.panic
        var outA: [PinDelivery] = [], outB: [PinDelivery] = []
        var ticks: [PanicDelivery] = []
        // The live hubs catch up with the clock first, as the restored ones did at restore.
        run.map.expire(now: run.now, out: &outA)
        run.panic.tick(now: run.now, out: &ticks)
        outA = []
        _ = map.subscribe(1, area: Self.area, categories: nil)
        let draft = PinDraft(point: GeoPoint(lat: 5, lon: 5), title: "after", description: "", category: "general", ttlSeconds: 600)
        let a = run.map.create(draft, id: PinID(high: 7, low: 7), editDigest: secrets.digest(ofToken: "x"), now: run.now, out: &outA)
        let b = map.create(draft, id: PinID(high: 7, low: 7), editDigest: secrets.digest(ofToken: "x"), now: run.now, out: &outB)
        #expect(try a.get() == b.get() && a.get().sequence <= b.get().sequence)
        #expect(outA.map(\.kind) == outB.map(\.kind))
        for id in run.ownerTokens.keys.sorted() {
            var pa: [PanicDelivery] = [], pb: [PanicDelivery] = []
            let x = run.panic.update(id, by: 200, ownerToken: run.ownerTokens[id]!, location: PanicLocation(lat: 1, lon: 1), secrets: secrets, now: run.now + 1, out: &pa)
            let y = panic.update(id, by: 200, ownerToken: run.ownerTokens[id]!, location: PanicLocation(lat: 1, lon: 1), secrets: secrets, now: run.now + 1, out: &pb)
            #expect(x == y)
        }
    }
}
