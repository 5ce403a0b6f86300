import Glibc
import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// The seeds of the snapshot and journal fuzz targets (Tests/fuzz/seeds/{snapshot,journal}) are
/// what the real encoders write: this test re-creates them and fails when the committed files
/// differ (the format changed: run it with VIGIL_WRITE_FUZZ_SEEDS=1 to rewrite them, and commit).
@Suite struct FuzzSeedTests {
    static let seedDirectory: String = {
        var path = #filePath
        for _ in 0..<2 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path + "/fuzz/seeds"
    }()

    /// name → bytes, for each target.
    static func seeds() -> [(target: String, name: String, bytes: [UInt8])] {
        let secrets = TestSecrets(seed: 12)
        var out: [(String, String, [UInt8])] = []
        let pins = (1...3).map { Fixtures.pin(secrets, sequence: $0, votes: Int($0) * 2) }
        let streams = [Fixtures.stream(secrets, events: 4, capacity: 8),
                       Fixtures.stream(secrets, events: 2, capacity: 4, end: .safe, tokens: 1, note: nil)]
        out.append(("snapshot", "empty.vgs", SnapshotCodec.encode(StateSnapshot(takenAt: 1_700_000_000_000, journalSegment: 1, pins: [], streams: []))))
        out.append(("snapshot", "pins-and-streams.vgs", SnapshotCodec.encode(StateSnapshot(takenAt: 1_700_000_000_000, journalSegment: 7, pins: pins, streams: streams))))
        out.append(("snapshot", "one-stream.vgs", SnapshotCodec.encode(StateSnapshot(takenAt: 1_700_000_000_000, journalSegment: 2, pins: [], streams: [streams[1]]))))
        out.append(("snapshot", "old-format.vgs", FormatFixtureTests.snapshot))
        out.append(("snapshot", "v4-format.vgs", FormatFixtureTests.snapshotV4))
        // Version 5, with an escalation from before its sent_at was kept (event kind 5).
        out.append(("snapshot", "v5-format.vgs", FormatFixtureTests.snapshotV5))
        // Version 6, from before streams kept their circle.
        out.append(("snapshot", "v6-format.vgs", FormatFixtureTests.snapshotV6))
        // A cluster node's snapshot (version 5's cluster fields set).
        out.append(("snapshot", "cluster.vgs", SnapshotCodec.encode(StateSnapshot(takenAt: 1_700_000_000_000, journalSegment: 3, pins: [pins[0]],
                                                                                    streams: [], replicatedSequence: 4_242))))
        let timed = [Fixtures.timedStream(secrets, escalated: false), Fixtures.timedStream(secrets, escalated: true)].sorted { $0.id < $1.id }
        out.append(("snapshot", "timers.vgs", SnapshotCodec.encode(StateSnapshot(takenAt: 1_700_000_000_000, journalSegment: 4, pins: [], streams: timed))))
        let stream = streams[0]
        var records: [JournalRecord] = [.pinPut(pins[1]), .pinRemove(pins[0].id), .pinVote(pins[2].id, voter: 99, value: -1),
                                        .panicStart(PanicStartRecord(stream)), .panicInvite(stream.id, secrets.digest(ofToken: "w")),
                                        .panicRevoke(stream.id, secrets.digest(ofToken: "w")), .panicRemove(stream.id)]
        records += stream.history.all.map { .panicEvent(stream.id, $0) }
        let escalated = timed.first { $0.missedCheckInAt != nil }!
        guard case .location(let first) = escalated.history.all[0].kind else { fatalError("a stream's first event is a location") }
        records.append(.panicStart(PanicStartRecord(id: escalated.id, status: .amber, location: first,
                                                    note: escalated.note, startedAt: escalated.startedAt, ownerDigest: escalated.ownerTokenDigest,
                                                    watchTokens: escalated.watchTokenDigests, historyCapacity: escalated.history.capacity,
                                                    dueAt: escalated.startedAt + 600_000)))
        records += escalated.history.all.dropFirst().map { .panicEvent(escalated.id, $0) }
        // A pin with a reach: journal record kind 10, and a snapshot pin with a range.
        var ranged = pins[2]
        ranged.rangeMeters = 1_500
        records.append(.pinPut(ranged))
        out.append(("snapshot", "ranges.vgs", SnapshotCodec.encode(StateSnapshot(takenAt: 1_700_000_000_000, journalSegment: 5,
                                                                                 pins: [pins[0], ranged], streams: []))))
        // Check-in circles (snapshot version 4, record kinds 20 and 21).
        let circle = try! CircleStateTests.circle(seed: 12)
        out.append(("snapshot", "circles.vgs", SnapshotCodec.encode(StateSnapshot(takenAt: 1_700_000_000_000, journalSegment: 5, pins: [],
                                                                                    streams: [], circles: [circle]))))
        records += [.circlePut(circle), .circleRemove(circle.id)]
        // Circles with subscriptions (snapshot version 7, record kind 22).
        let subscribed = try! CircleStateTests.circle(seed: 12, subscribed: true)
        // With the settled deliveries of two notices (record kind 30 too).
        let settled = subscribed.subscriptions.prefix(2).enumerated().map { i, sub in
            NoticeSettlement(circle: subscribed.id, notice: NoticeID(kind: i == 0 ? .panicStarted : .checkinRequested, circle: subscribed.id,
                                                                     at: 1_700_000_000_000 + Int64(i), member: UInt32(i)),
                             subscription: sub.id, settlement: i == 0 ? .delivered : .gone)
        }
        let acks = [NoticeAck(circle: subscribed.id, notice: settled[0].notice, by: .member(1), at: 1_700_000_000_500),
                    NoticeAck(circle: subscribed.id, notice: settled[1].notice, by: .owner, at: 1_700_000_000_600)]
        out.append(("snapshot", "subscriptions.vgs", SnapshotCodec.encode(StateSnapshot(takenAt: 1_700_000_000_000, journalSegment: 5, pins: [],
                                                                                        streams: [], circles: [subscribed],
                                                                                        settlements: settled, acks: acks))))
        records += settled.map { .noticeSettled($0) }
        records += acks.map { .noticeAcked($0) }
        out.append(("snapshot", "v6-circle.vgs", FormatFixtureTests.snapshotV6Circle))
        out.append(("snapshot", "v7-format.vgs", FormatFixtureTests.snapshotV7))
        records.append(.circlePut(subscribed))
        // Streams started for a circle (snapshot version 7, record kind 11 with and without a timer).
        var circled = PanicStartRecord(streams[0])
        circled.circle = circle.id
        var circledTimed = PanicStartRecord(timed[0])
        circledTimed.circle = circle.id
        records += [.panicStart(circled), .panicStart(circledTimed)]
        out.append(("snapshot", "circle-streams.vgs", SnapshotCodec.encode(StateSnapshot(
            takenAt: 1_700_000_000_000, journalSegment: 6, pins: [], streams: [try! circled.stream(), try! circledTimed.stream()].sorted { $0.id < $1.id },
            circles: [circle]))))
        // An end-to-end encrypted stream (snapshot version 9's e2e part; record kinds 33 and 34,
        // event kinds 7 and 8).
        let e2e = E2EDurabilityTests.sample()
        records += e2e.records
        out.append(("snapshot", "e2e-stream.vgs", SnapshotCodec.encode(StateSnapshot(takenAt: 1_700_000_700_000, journalSegment: 6, pins: [],
                                                                                      streams: [e2e.hub.stream(e2e.id)!]))))
        // Answers kept for idempotency keys (snapshot version 8, record kind 32).
        let kept = (0..<2).map { i in
            IdempotencySeal.keep(Array(#","pin":{"id":"x"}"#.utf8), claim: IdempotencyClaim(key: "seed-key-\(i)-0123456789", canonical: Array("{}".utf8)),
                                 nonce: [UInt8](repeating: UInt8(i), count: 12), now: 1_700_000_000_000 + Int64(i))!
        }
        out.append(("snapshot", "kept-answers.vgs", SnapshotCodec.encode(StateSnapshot(takenAt: 1_700_000_000_000, journalSegment: 6, pins: [pins[0]],
                                                                                       streams: [], keptAnswers: kept))))
        records += kept.map { .answerKept($0) }
        var segment = JournalCodec.header(segment: 3)
        for (index, record) in records.enumerated() {
            // One payload on its own per record (the fuzzer's `decodeRecord` path) ...
            out.append(("journal", "record-\(index).bin", Array(JournalCodec.encode(record)[JournalCodec.frameBytes...])))
            JournalCodec.append(record, to: &segment)
        }
        // ... and whole segments (header and framed records).
        out.append(("journal", "segment.vgj", segment))
        out.append(("journal", "old-format.vgj", FormatFixtureTests.journal))
        out.append(("journal", "v5-escalation.bin", FormatFixtureTests.escalationRecordsV5[3]))
        return out
    }

    @Test func committedSeedsAreWhatTheEncodersWrite() throws {
        let rewrite = getenv("VIGIL_WRITE_FUZZ_SEEDS") != nil
        for seed in Self.seeds() {
            let path = "\(Self.seedDirectory)/\(seed.target)/\(seed.name)"
            if rewrite {
                mkdir("\(Self.seedDirectory)/\(seed.target)", 0o755)
                let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
                try #require(fd >= 0)
                seed.bytes.withUnsafeBytes { _ = Glibc.write(fd, $0.baseAddress, $0.count) }
                close(fd)
            }
            let committed = try? StateFiles.readAll(path)
            #expect(committed == seed.bytes, "\(path) differs from the encoder's output (VIGIL_WRITE_FUZZ_SEEDS=1 rewrites it)")
        }
    }

    /// The seeds are valid inputs: each decodes (so the fuzzer starts from the inside of the format).
    @Test func seedsDecode() throws {
        for seed in Self.seeds() {
            switch seed.target {
            case "snapshot": _ = try SnapshotCodec.decode(seed.bytes)
            case _ where seed.name.hasSuffix(".vgj"):
                _ = try JournalCodec.readHeader(seed.bytes)
                let scan = JournalCodec.scan(seed.bytes, from: JournalCodec.headerBytes)
                #expect(scan.stop == nil && !scan.records.isEmpty)
            default: _ = try JournalCodec.decodeRecord(payload: seed.bytes)
            }
        }
    }
}
