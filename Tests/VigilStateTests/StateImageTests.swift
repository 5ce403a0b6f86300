import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// The rules of `StateImage.apply`, one by one.
@Suite struct StateImageTests {
    let secrets = TestSecrets(seed: 51)

    @Test func pinPutInsertsOrReplacesAndPinRemoveRemoves() {
        var image = StateImage()
        var pin = Fixtures.pin(secrets, sequence: 3)
        image.apply(.pinPut(pin))
        pin.title = "edited"
        pin.sequence = 0                       // a record without a sequence keeps the held one
        image.apply(.pinPut(pin))
        #expect(image.pins[pin.id]?.title == "edited" && image.pins[pin.id]?.sequence == 3)
        image.apply(.pinPut(image.pins[pin.id]!))
        image.apply(.pinRemove(pin.id))
        image.apply(.pinRemove(pin.id))
        #expect(image.pins.isEmpty)
        #expect(image.appliedCount == 3 && image.duplicateCount == 2 && image.issueCount == 0)
    }

    /// A vote record sets that voter's vote, counts included; the same record again changes
    /// nothing, and a vote for a pin not held (removed later in the journal) is a quiet no-op.
    @Test func pinVoteSetsTheVoteIdempotently() {
        var image = StateImage()
        var pin = Fixtures.pin(secrets, sequence: 4)
        pin.votes = [1: 1]
        pin.up = 1
        pin.down = 0
        image.apply(.pinPut(pin))
        image.apply(.pinVote(pin.id, voter: 2, value: -1))
        image.apply(.pinVote(pin.id, voter: 2, value: -1))
        image.apply(.pinVote(pin.id, voter: 1, value: -1))
        let held = image.pins[pin.id]
        #expect(held?.votes == [1: -1, 2: -1] && held?.up == 0 && held?.down == 2)
        #expect(held?.updatedAt == pin.updatedAt && held?.sequence == 4)
        image.apply(.pinVote(PinID(high: 1, low: 2), voter: 1, value: 1))
        #expect(image.appliedCount == 3 && image.duplicateCount == 2 && image.issueCount == 0)
        #expect(image.highestVoteSession == 2)
    }

    /// The flag threshold is the hub's, when the vote is taken: the journal holds the vote that
    /// flagged as the pin's removal, so replay removes it without a threshold of its own; and a
    /// vote record never removes a pin, whatever its counts.
    @Test func aFlagIsReplayedAsTheHubJournaledIt() throws {
        var map = MapHub(settings: { var s = PinSettings(); s.voteFlagThreshold = 2; return s }())
        var out: [PinDelivery] = []
        let id = PinID(high: 7, low: 7)
        _ = try map.create(PinDraft(point: .init(lat: 1, lon: 2), title: "x", description: "", category: "general", ttlSeconds: 600),
                           id: id, editDigest: secrets.digest(ofToken: "t"), now: 1000, out: &out).get()
        var records = [JournalRecord.pinState(id, in: map)]
        for voter: UInt64 in [1, 2] {
            if let record = JournalRecord.afterVote(try map.vote(id, voter: voter, value: -1, out: &out).get()) { records.append(record) }
        }
        #expect(map.store[id] == nil && records.last == .pinRemove(id))
        var image = StateImage()
        image.apply(records)
        #expect(image.pins.isEmpty && image.issueCount == 0)

        var votesOnly = StateImage()
        votesOnly.apply(Array(records.dropLast()) + (2...9).map { .pinVote(id, voter: $0, value: -1) })
        #expect(votesOnly.pins[id]?.down == 9)
    }

    @Test func panicRecordsRebuildTheStream() throws {
        let start = Fixtures.stream(secrets, events: 0, capacity: 3, tokens: 1)
        var live = start
        var records: [JournalRecord] = [.panicStart(start)]
        for i in 1...5 {
            let e = live.record(i == 3 ? .status(.amber) : .location(PanicLocation(lat: Double(i), lon: 0)), now: start.startedAt + Int64(i))
            records.append(.panicEvent(live.id, e))
        }
        let invited = secrets.digest(ofToken: "second contact")
        live.replayInvite(invited)
        records.append(.panicInvite(live.id, invited))
        live.replayRevoke(start.watchTokenDigests[0])
        records.append(.panicRevoke(live.id, start.watchTokenDigests[0]))
        let e = live.record(.ended(.safe), now: start.startedAt + 10)
        records.append(.panicEvent(live.id, e))

        var image = StateImage()
        image.apply(records)
        expectSameStream(try #require(image.streams[live.id]), live)
        #expect(image.appliedCount == records.count && image.issueCount == 0)

        // Everything again: nothing changes, everything counts as a duplicate.
        image.apply(records)
        expectSameStream(try #require(image.streams[live.id]), live)
        #expect(image.duplicateCount == records.count && image.issueCount == 0)

        image.apply(.panicRemove(live.id))
        #expect(image.streams.isEmpty)
        image.apply(.panicRevoke(live.id, invited))       // stream gone: a quiet no-op
        #expect(image.issueCount == 0)
    }

    @Test func contradictionsAreNotedAndSkipped() {
        var image = StateImage()
        let stream = Fixtures.stream(secrets, events: 0, capacity: 3)
        image.apply(.panicEvent(stream.id, PanicEvent(seq: 2, at: 1, kind: .status(.amber))))
        image.apply(.panicInvite(stream.id, secrets.digest(ofToken: "x")))
        image.apply(.panicStart(stream))
        image.apply(.panicEvent(stream.id, PanicEvent(seq: 4, at: 1, kind: .status(.amber))))
        var bad = PanicStartRecord(stream)
        bad.id = StreamID(high: 1, low: 1)
        bad.historyCapacity = 0
        image.apply(.panicStart(bad))
        #expect(image.issueCount == 4)
        #expect(image.issues[0] == "event seq 2 for unknown stream \(stream.id)")
        #expect(image.issues[2].contains("leaves a gap"))
        #expect(image.issues[3].contains("history capacity 0 is below 1"))
        #expect(image.streams.count == 1 && image.streams[stream.id]?.seq == 1)
    }

    @Test func issuesKeptAreBounded() {
        var image = StateImage()
        for i in 0..<(StateImage.maxIssuesKept + 50) {
            image.apply(.panicInvite(StreamID(high: 0, low: UInt64(i)), secrets.digest(ofToken: "t")))
        }
        #expect(image.issues.count == StateImage.maxIssuesKept && image.issueCount == StateImage.maxIssuesKept + 50)
    }

    @Test func restoreDropsExpiredPinsAndPastGraceStreams() {
        var image = StateImage()
        var fresh = Fixtures.pin(secrets, sequence: 1)
        fresh.expiresAt = 2_000
        var stale = Fixtures.pin(secrets, sequence: 2)
        stale.expiresAt = 1_000
        image.apply([.pinPut(fresh), .pinPut(stale)])
        let settings = PanicSettings(endedGraceMs: 500)
        let gone = Fixtures.stream(secrets, events: 0, capacity: 3, end: .safe, start: 0)        // ended at 1
        let kept = Fixtures.stream(secrets, events: 0, capacity: 3, end: .safe, start: 900)      // ended at 901
        image.streams = [gone.id: gone, kept.id: kept]
        let (map, panic) = image.restore(pinSettings: PinSettings(), panicSettings: settings, now: 1_000)
        #expect(map.exportPins().map(\.id) == [fresh.id])
        #expect(panic.exportStreams().map(\.id) == [kept.id])
    }

    @Test func highestVoteSessionSpansAllPins() {
        var image = StateImage()
        var a = Fixtures.pin(secrets, sequence: 1)
        a.votes = [3: 1, 99: -1]
        var b = Fixtures.pin(secrets, sequence: 2)
        b.votes = [42: 1]
        image.apply([.pinPut(a), .pinPut(b)])
        #expect(image.highestVoteSession == 99)
        #expect(StateImage().highestVoteSession == 0)
    }

    @Test func snapshotOfAnImageRoundTrips() throws {
        let sample = SnapshotCodecTests.sample()
        let image = StateImage(sample)
        let again = image.snapshot(takenAt: sample.takenAt, journalSegment: sample.journalSegment)
        #expect(SnapshotCodec.encode(again) == SnapshotCodec.encode(sample))
    }
}
