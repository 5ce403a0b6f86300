import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

@Suite struct JournalCodecTests {
    /// One record of every kind, with optional parts both present and absent.
    static func sampleRecords(seed: UInt64 = 1) -> [JournalRecord] {
        let s = TestSecrets(seed: seed)
        let stream = Fixtures.stream(s, events: 0, capacity: 20, tokens: 3)
        let quiet = Fixtures.stream(s, events: 0, capacity: 1, tokens: 0, note: nil)
        var timed = PanicStartRecord(quiet)
        timed.dueAt = 1_700_000_600_000
        var circled = PanicStartRecord(Fixtures.stream(s, events: 0, capacity: 5, tokens: 1))
        circled.circle = CircleID(random: s.randomBytes(16))
        var circledTimed = circled
        circledTimed.id = StreamID(random: s.randomBytes(16))
        circledTimed.dueAt = 1_700_000_700_000
        return [
            .pinPut(Fixtures.pin(s, sequence: 1)),
            .pinPut(Fixtures.pin(s, sequence: 2, votes: 5)),
            .pinRemove(PinID(random: s.randomBytes(16))),
            .pinVote(PinID(random: s.randomBytes(16)), voter: 7, value: 1),
            .pinVote(PinID(random: s.randomBytes(16)), voter: .max, value: -1),
            .panicStart(stream),
            .panicStart(quiet),
            .panicEvent(stream.id, PanicEvent(seq: 2, at: 10, kind: .location(PanicLocation(lat: 1, lon: 2)))),
            .panicEvent(stream.id, PanicEvent(seq: 3, at: 11, kind: .location(Fixtures.location(s)))),
            .panicEvent(stream.id, PanicEvent(seq: 4, at: 12, kind: .status(.amber))),
            .panicEvent(stream.id, PanicEvent(seq: 5, at: 13, kind: .ended(.cancelled))),
            .panicEvent(quiet.id, PanicEvent(seq: 2, at: 86_400_000, kind: .ended(.abandoned))),
            .panicStart(timed),
            .panicEvent(stream.id, PanicEvent(seq: 6, at: 14, kind: .timer(dueAt: 600_014))),
            .panicEvent(stream.id, PanicEvent(seq: 7, at: 15, kind: .timer(dueAt: nil))),
            .panicEvent(stream.id, PanicEvent(seq: 8, at: 600_014, kind: .missedCheckIn(
                dueAt: 600_014, last: LastLocation(location: Fixtures.location(s), at: 11), sentAt: 3_600_014))),
            .panicInvite(stream.id, s.digest(ofToken: "new")),
            .panicRevoke(stream.id, s.digest(ofToken: "old")),
            .panicStart(circled),
            .panicStart(circledTimed),
            .panicRemove(quiet.id),
            .answerKept(KeptAnswer(lookup: s.randomBytes(32), requestDigest: s.randomBytes(32), createdAt: 1_700_000_000_000,
                                   sealed: s.randomBytes(28 + 40))),
        ]
    }

    static func encode(_ records: [JournalRecord]) -> [UInt8] {
        var bytes: [UInt8] = []
        for record in records { JournalCodec.append(record, to: &bytes) }
        return bytes
    }

    /// Offsets where each record starts, and the end.
    static func boundaries(_ records: [JournalRecord]) -> [Int] {
        var offsets = [0]
        for record in records { offsets.append(offsets.last! + JournalCodec.encode(record).count) }
        return offsets
    }

    @Test func everyKindRoundTrips() {
        let records = Self.sampleRecords()
        let scan = JournalCodec.scan(Self.encode(records))
        #expect(scan.records == records)
        #expect(!scan.torn && scan.stop == nil)
        #expect(scan.validLength == Self.encode(records).count)
        // `==` on pins ignores the sequence: check it separately.
        if case .pinPut(let pin) = scan.records[1] { #expect(pin.sequence == 2) } else { Issue.record("not a pinPut") }
    }

    /// A start without a timer keeps the old record kind (3), so a build from before timers reads
    /// it; one with a timer is kind 9, which such a build refuses by name instead of misreading.
    @Test func aStartWithATimerHasItsOwnKind() throws {
        let s = TestSecrets(seed: 3)
        var start = PanicStartRecord(Fixtures.stream(s, events: 0, capacity: 4))
        #expect(JournalCodec.encode(.panicStart(start))[JournalCodec.frameBytes] == 3)
        start.dueAt = 1_700_000_900_000
        let bytes = JournalCodec.encode(.panicStart(start))
        #expect(bytes[JournalCodec.frameBytes] == 9)
        #expect(JournalCodec.scan(bytes).records == [.panicStart(start)])
        #expect(try start.stream().dueAt == 1_700_000_900_000)
    }

    /// A start for a check-in circle is kind 11 (with or without a timer), which a build from
    /// before circles had streams refuses by name; a start for none keeps kind 3 or 9.
    @Test func aStartForACircleHasItsOwnKind() throws {
        let s = TestSecrets(seed: 4)
        var start = PanicStartRecord(Fixtures.stream(s, events: 0, capacity: 4))
        let circle = CircleID(random: s.randomBytes(16))
        start.circle = circle
        let bytes = JournalCodec.encode(.panicStart(start))
        #expect(bytes[JournalCodec.frameBytes] == 11)
        #expect(JournalCodec.scan(bytes).records == [.panicStart(start)])
        #expect(try start.stream().circle == circle && start.stream().dueAt == nil)
        start.dueAt = 1_700_000_900_000
        let timed = JournalCodec.encode(.panicStart(start))
        #expect(timed[JournalCodec.frameBytes] == 11 && timed.count == bytes.count + 8)
        #expect(JournalCodec.scan(timed).records == [.panicStart(start)])
        #expect(try start.stream().circle == circle && start.stream().dueAt == 1_700_000_900_000)
        // The timer's flag is a u8 0/1: anything else is damage, not a timer.
        var payload = Array(bytes[JournalCodec.frameBytes...])
        payload[payload.count - 17] = 2
        #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: payload) }
    }

    @Test func appendAddsToTheCallersBuffer() {
        var buffer: [UInt8] = [1, 2, 3]
        JournalCodec.append(.pinRemove(PinID(high: 1, low: 2)), to: &buffer)
        #expect(buffer.prefix(3) == [1, 2, 3])
        #expect(buffer.count == 3 + JournalCodec.frameBytes + 1 + 16)
        #expect(JournalCodec.scan(buffer, from: 3).records == [.pinRemove(PinID(high: 1, low: 2))])
    }

    @Test func headerRoundTrips() throws {
        let header = JournalCodec.header(segment: 0x1234_5678_9ABC)
        #expect(header.count == JournalCodec.headerBytes)
        #expect(try JournalCodec.readHeader(header) == 0x1234_5678_9ABC)
        var other = header
        other[8] = 9
        #expect(throws: StateError.unsupportedVersion(kind: "journal", found: 9, supported: 1)) { try JournalCodec.readHeader(other) }
        other = header
        other[12] ^= 1
        #expect(throws: StateError.self) { try JournalCodec.readHeader(other) }
        #expect(throws: StateError.truncated(what: "journal header", offset: 5)) { try JournalCodec.readHeader(Array(header.prefix(5))) }
        #expect(throws: StateError.badMagic(kind: "journal")) { try JournalCodec.readHeader(SnapshotCodec.magic + header) }
    }

    /// A crash can cut the file at any byte: the scan gives exactly the whole records before the
    /// cut, says it is torn unless the cut falls between records, and never crashes.
    @Test func tornTailAtEveryCutKeepsTheWholeRecordsBeforeIt() {
        let records = Self.sampleRecords()
        let bytes = Self.encode(records)
        let ends = Self.boundaries(records)
        for cut in 0...bytes.count {
            let scan = JournalCodec.scan(Array(bytes[0..<cut]))
            let whole = ends.lastIndex { $0 <= cut }!
            #expect(scan.records == Array(records[0..<whole]))
            #expect(scan.validLength == ends[whole])
            #expect(scan.torn == (cut != ends[whole]))
            if scan.torn { #expect(scan.stop == .incomplete(offset: ends[whole])) }
        }
    }

    @Test func aDamagedRecordStopsTheScanThere() {
        let records = Self.sampleRecords()
        let bytes = Self.encode(records)
        let ends = Self.boundaries(records)
        for i in 0..<bytes.count {
            var damaged = bytes
            damaged[i] ^= 0x40
            let scan = JournalCodec.scan(damaged)
            let hit = ends.lastIndex { $0 <= i }!
            #expect(scan.records == Array(records[0..<hit]), "byte \(i)")
            #expect(scan.validLength == ends[hit])
            #expect(scan.stop?.offset == ends[hit])
            #expect(scan.stop?.isTornWrite == true)
        }
    }

    @Test func zerosAfterTheDataAreATornTail() {
        let records = Self.sampleRecords()
        let bytes = Self.encode(records) + [UInt8](repeating: 0, count: 4096)
        let scan = JournalCodec.scan(bytes)
        #expect(scan.records == records)
        #expect(scan.stop == .badLength(offset: Self.encode(records).count, length: 0))
        #expect(scan.stop?.isTornWrite == true)
    }

    @Test func aRecordWithAGoodChecksumButUnknownKindIsNotATear() {
        var bytes = Self.encode([.pinRemove(PinID(high: 1, low: 1))])
        let payload: [UInt8] = [99, 1, 2, 3]
        let crc = CRC32C.checksum(payload)
        bytes += SnapshotCodecTests.le32(UInt32(payload.count)) + SnapshotCodecTests.le32(crc) + payload
        bytes += Self.encode([.pinRemove(PinID(high: 2, low: 2))])
        let scan = JournalCodec.scan(bytes)
        #expect(scan.records == [.pinRemove(PinID(high: 1, low: 1))])
        guard case .undecodable(let offset, let reason)? = scan.stop else { Issue.record("expected undecodable"); return }
        #expect(offset == 8 + 17 && reason.contains("unknown record kind 99"))
        #expect(scan.stop?.isTornWrite == false)
    }

    /// A vote record holds exactly the pin, the voter and ±1: 26 bytes of payload however many
    /// votes the pin has, so a pin's journal grows with its votes, not with their square.
    @Test func aVoteRecordIsTheVoteAlone() throws {
        let id = PinID(high: 5, low: 6)
        let bytes = JournalCodec.encode(.pinVote(id, voter: 0x0102_0304_0506_0708, value: -1))
        #expect(bytes.count == JournalCodec.frameBytes + 1 + 16 + 8 + 1)
        #expect(Array(bytes[JournalCodec.frameBytes...].prefix(1)) == [8])
        #expect(try JournalCodec.decodeRecord(payload: Array(bytes[JournalCodec.frameBytes...])) == .pinVote(id, voter: 0x0102_0304_0506_0708, value: -1))
        for bad: UInt8 in [0, 2, 0x7F, 0xFE] {
            var payload = Array(bytes[JournalCodec.frameBytes...])
            payload[payload.count - 1] = bad
            #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: payload) }
        }
        #expect(JournalRecord.pinVote(id, voter: 1, value: 1).durability == .standard)
    }

    @Test func trailingBytesInAPayloadAreRefused() {
        var w = StateWriter()
        JournalCodec.writePayload(.panicRemove(StreamID(high: 3, low: 4)), to: &w)
        let payload = w.bytes + [0]
        let bytes = SnapshotCodecTests.le32(UInt32(payload.count)) + SnapshotCodecTests.le32(CRC32C.checksum(payload)) + payload
        guard case .undecodable(0, let reason)? = JournalCodec.scan(bytes).stop else { Issue.record("expected undecodable"); return }
        #expect(reason.contains("1 bytes after the record's fields"))
    }

    /// Random bytes and randomly damaged journals: the scan always ends, within bounds.
    @Test func garbageNeverCrashesTheScanner() {
        let s = TestSecrets(seed: 12)
        let good = Self.encode(Self.sampleRecords())
        for round in 0..<3000 {
            var bytes: [UInt8]
            if round % 3 == 0 {
                bytes = s.randomBytes(s.roll(300))
            } else {
                bytes = good
                for _ in 0..<(1 + s.roll(6)) { bytes[s.roll(bytes.count)] = UInt8(truncatingIfNeeded: s.next()) }
            }
            let scan = JournalCodec.scan(bytes, from: s.roll(4))
            #expect(scan.validLength <= bytes.count)
        }
        // Payloads straight to the decoder, past the checksum, as a fuzzer with the checksum off would.
        for _ in 0..<3000 {
            let payload = [UInt8(1 + s.roll(8))] + s.randomBytes(s.roll(200))
            _ = try? JournalCodec.decodeRecord(payload: payload)
        }
    }

    @Test func recordConveniencesFollowTheHub() throws {
        let secrets = TestSecrets(seed: 5)
        var map = MapHub(settings: PinSettings())
        var out: [PinDelivery] = []
        let digest = secrets.digest(ofToken: "t")
        let pin = try map.create(PinDraft(point: .init(lat: 1, lon: 2), title: "x", description: "", category: "general", ttlSeconds: 600),
                                 id: PinID(high: 9, low: 9), editDigest: digest, now: 1000, out: &out).get()
        #expect(JournalRecord.pinState(pin.id, in: map) == .pinPut(pin))
        let vote = try map.vote(pin.id, voter: 3, value: -1, out: &out).get()
        #expect(JournalRecord.afterVote(vote) == .pinVote(pin.id, voter: 3, value: -1))
        #expect(JournalRecord.afterVote(try map.vote(pin.id, voter: 3, value: -1, out: &out).get()) == nil, "the same vote again: nothing to journal")
        _ = map.delete(pin.id, digest: digest, out: &out)
        #expect(JournalRecord.pinState(pin.id, in: map) == .pinRemove(pin.id))
        var flagging = MapHub(settings: { var s = PinSettings(); s.voteFlagThreshold = 1; return s }())
        let doomed = try flagging.create(PinDraft(point: .init(lat: 1, lon: 2), title: "x", description: "", category: "general", ttlSeconds: 600),
                                         id: PinID(high: 8, low: 8), editDigest: digest, now: 1000, out: &out).get()
        #expect(JournalRecord.afterVote(try flagging.vote(doomed.id, voter: 1, value: -1, out: &out).get()) == .pinRemove(doomed.id))

        var panic = PanicHub(settings: PanicSettings())
        var deliveries: [PanicDelivery] = []
        let started = try panic.start(owner: 1, status: .amber, location: PanicLocation(lat: 3, lon: 4), note: "n", watchers: 2,
                                      secrets: secrets, now: 50, out: &deliveries).get()
        guard case .panicStart(let start) = JournalRecord.panicStart(started.stream) else { Issue.record("not a start"); return }
        expectSameStream(try start.stream(), started.stream)
        let change: PanicChange = try panic.setStatus(started.stream.id, by: 1, ownerToken: nil, status: .red, secrets: secrets, now: 60, out: &deliveries).get()
        let current = try #require(panic.stream(started.stream.id))
        let latest = try #require(JournalRecord.latestEvent(of: current))
        #expect(latest == .panicEvent(started.stream.id, PanicEvent(seq: change.seq, at: 60, kind: .status(.red))))
        #expect(change.event.map { JournalRecord.panicEvent(started.stream.id, $0) } == latest)
        let again: PanicChange = try panic.setStatus(started.stream.id, by: 1, ownerToken: nil, status: .red, secrets: secrets, now: 70, out: &deliveries).get()
        #expect(again == .unchanged(seq: change.seq) && again.event == nil, "the same status again: nothing to journal")
    }
}
