import Testing
import VigilGeo
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

@Suite struct SnapshotCodecTests {
    func roundTrip(_ snapshot: StateSnapshot, sourceLocation: SourceLocation = #_sourceLocation) throws -> StateSnapshot {
        let bytes = SnapshotCodec.encode(snapshot)
        let decoded = try SnapshotCodec.decode(bytes)
        #expect(decoded.takenAt == snapshot.takenAt, sourceLocation: sourceLocation)
        #expect(decoded.journalSegment == snapshot.journalSegment, sourceLocation: sourceLocation)
        expectSamePins(decoded.pins, snapshot.pins, sourceLocation: sourceLocation)
        expectSameStreams(decoded.streams, snapshot.streams, sourceLocation: sourceLocation)
        #expect(SnapshotCodec.encode(decoded) == bytes, "re-encoding gives the same bytes", sourceLocation: sourceLocation)
        return decoded
    }

    /// A small snapshot with every kind of content: pins with and without votes and unicode,
    /// streams active and ended, with a full ring (wrapped) and a partial one.
    static func sample(seed: UInt64 = 1) -> StateSnapshot {
        let s = TestSecrets(seed: seed)
        let pins = (1...6).map { Fixtures.pin(s, sequence: UInt64($0) * 3, votes: $0 == 2 ? 0 : $0 * 2) }
        let streams = [
            Fixtures.stream(s, events: 0, capacity: 4),                       // just started
            Fixtures.stream(s, events: 10, capacity: 4),                      // ring wrapped
            Fixtures.stream(s, events: 2, capacity: 50, end: .safe, note: nil),
            Fixtures.stream(s, events: 7, capacity: 3, end: .cancelled, tokens: 0),
            Fixtures.stream(s, events: 1, capacity: 5, end: .abandoned, tokens: 1),
            Fixtures.timedStream(s, escalated: false),
            Fixtures.timedStream(s, escalated: true),
        ].sorted { $0.id < $1.id }
        return StateSnapshot(takenAt: 1_700_000_123_456, journalSegment: 42, pins: pins, streams: streams)
    }

    @Test func emptyRoundTrips() throws {
        let decoded = try roundTrip(StateSnapshot(takenAt: 0, journalSegment: 0, pins: [], streams: []))
        #expect(decoded.pins.isEmpty && decoded.streams.isEmpty)
        // The header (with the cluster fields of version 5), the empty circle list's count (version 4),
        // the empty settlement and acknowledgement lists' counts (version 7), the empty kept
        // answers' count (version 8) and the checksum.
        #expect(SnapshotCodec.encode(decoded).count == SnapshotCodec.headerBytes + 4 + 4 + 4 + 4 + SnapshotCodec.checksumBytes)
    }

    @Test func pinsAndStreamsRoundTrip() throws {
        let decoded = try roundTrip(Self.sample())
        #expect(decoded.pins.contains { !$0.votes.isEmpty })
        #expect(decoded.pins.contains { $0.title.unicodeScalars.contains { $0.value > 0xFFFF } })
        #expect(decoded.streams.contains { $0.history.count == $0.history.capacity && $0.history.firstSeq! > 1 })
        #expect(decoded.streams.contains { !$0.isActive })
        #expect(decoded.streams.allSatisfy { $0.owner == nil && $0.watcherCount == 0 })
        #expect(decoded.streams.contains { $0.dueAt == 1_700_000_900_000 && $0.missedCheckInAt == nil && $0.status == .amber })
        #expect(decoded.streams.contains { $0.dueAt == nil && $0.missedCheckInAt == 1_700_000_900_000 && $0.missedCheckInSentAt == 1_700_000_900_040 && $0.status == .red })
    }

    /// A stream's timer must not outlive its end: such bytes are damage, not state.
    @Test func anEndedStreamWithATimerIsRefused() throws {
        var stream = Fixtures.stream(TestSecrets(seed: 8), events: 1, capacity: 4, end: .safe)
        stream.dueAt = 1_800_000_000_000
        let bytes = SnapshotCodec.encode(StateSnapshot(takenAt: 1, journalSegment: 1, pins: [], streams: [stream]))
        #expect(throws: StateError.self) { try SnapshotCodec.decode(bytes) }
    }

    @Test func manyPinsRoundTrip() throws {
        let s = TestSecrets(seed: 9)
        let pins = (1...2000).map { Fixtures.pin(s, sequence: UInt64($0), votes: $0 % 7) }
        _ = try roundTrip(StateSnapshot(takenAt: 5, journalSegment: 7, pins: pins, streams: []))
    }

    @Test func extremeValuesRoundTrip() throws {
        let s = TestSecrets(seed: 4)
        var pin = Fixtures.pin(s, sequence: .max)
        pin.point = GeoPoint(lat: -90, lon: 180)
        pin.cell = Geohash.cell(pin.point, precision: Geohash.maxPrecision)
        pin.createdAt = -PanicStream.restorableMagnitude
        pin.expiresAt = PanicStream.restorableMagnitude
        pin.title = String(repeating: "é", count: 5000)
        pin.votes = [0: 1, .max: -1]
        pin.up = 1
        pin.down = 1
        var stream = Fixtures.stream(s, events: 3, capacity: 1, tokens: 40)
        stream.last.position = .clear(PanicLocation(lat: 90, lon: -180, accuracyM: 0, heading: 360, speedMps: 0))
        _ = try roundTrip(StateSnapshot(takenAt: .min, journalSegment: .max, pins: [pin], streams: [stream]))
    }

    @Test func encodingIsDeterministic() {
        // Votes live in a dictionary, whose order varies: the encoder sorts them.
        #expect(SnapshotCodec.encode(Self.sample(seed: 5)) == SnapshotCodec.encode(Self.sample(seed: 5)))
    }

    @Test func unknownVersionIsRefusedByName() {
        var bytes = SnapshotCodec.encode(Self.sample())
        bytes[8] = 10
        #expect(throws: StateError.unsupportedVersion(kind: "snapshot", found: 10, supported: 9)) { try SnapshotCodec.decode(bytes) }
        bytes[8] = 0
        #expect(throws: StateError.unsupportedVersion(kind: "snapshot", found: 0, supported: 9)) { try SnapshotCodec.decode(bytes) }
        let message = StateError.unsupportedVersion(kind: "snapshot", found: 9, supported: 8).description
        #expect(message == "snapshot format version 9 is not supported (this build reads version 8)")
    }

    /// A stream started for a check-in circle keeps it (version 7): present or absent, one form each.
    @Test func aStreamsCircleRoundTrips() throws {
        let s = TestSecrets(seed: 9)
        let circle = CircleID(random: s.randomBytes(16))
        var start = PanicStartRecord(Fixtures.stream(s, events: 0, capacity: 4))
        start.circle = circle
        var circled = try start.stream()
        _ = circled.record(.location(Fixtures.location(s)), now: start.startedAt + 10)
        let plain = Fixtures.stream(s, events: 2, capacity: 4)
        let snapshot = StateSnapshot(takenAt: 1, journalSegment: 1, pins: [], streams: [circled, plain].sorted { $0.id < $1.id })
        let decoded = try roundTrip(snapshot)
        #expect(decoded.streams.first { $0.id == circled.id }?.circle == circle)
        #expect(decoded.streams.first { $0.id == plain.id }?.circle == nil)
        // The circle's flag is a u8 0/1: anything else is damage.
        var bytes = SnapshotCodec.encode(StateSnapshot(takenAt: 1, journalSegment: 1, pins: [], streams: [plain]))
        let flag = bytes.count - SnapshotCodec.checksumBytes - 4 - 1      // before the circle count and the checksum
        #expect(bytes[flag] == 0)
        bytes[flag] = 2
        #expect(throws: StateError.self) { try SnapshotCodec.decode(bytes, verifyingChecksum: false) }
    }

    @Test func wrongMagicAndChecksumAreNamed() {
        var bytes = SnapshotCodec.encode(Self.sample())
        bytes[bytes.count - 1] ^= 1
        #expect {
            try SnapshotCodec.decode(bytes)
        } throws: { error in
            guard case StateError.checksumMismatch(kind: "snapshot", _, _) = error else { return false }
            return "\(error)".contains("damaged")
        }
        #expect(throws: StateError.badMagic(kind: "snapshot")) { try SnapshotCodec.decode(Array("{\"pins\":[]}".utf8)) }
        #expect(throws: StateError.badMagic(kind: "snapshot")) { try SnapshotCodec.decode(JournalCodec.header(segment: 1)) }
    }

    /// Every single flipped bit position class (one byte changed) anywhere: always an error,
    /// never a crash and never a silently different snapshot.
    @Test func everyFlippedByteIsDetected() {
        let bytes = SnapshotCodec.encode(Self.sample())
        for i in 0..<bytes.count {
            for flip: UInt8 in [0x01, 0x80, 0xFF] {
                var damaged = bytes
                damaged[i] ^= flip
                #expect(throws: StateError.self) { try SnapshotCodec.decode(damaged) }
            }
        }
    }

    @Test func everyTruncationIsDetected() {
        let bytes = SnapshotCodec.encode(Self.sample())
        for length in 0..<bytes.count {
            #expect(throws: StateError.self) { try SnapshotCodec.decode(Array(bytes[0..<length])) }
        }
        #expect(throws: StateError.self) { try SnapshotCodec.decode(bytes + [0]) }
    }

    /// With the checksum off, damage reaches the field decoders: they must refuse it (or read a
    /// consistent snapshot), never trap. This is what the fuzzer exercises at scale.
    @Test func fieldDecodersSurviveDamageWithoutTheChecksum() {
        let bytes = SnapshotCodec.encode(Self.sample())
        let s = TestSecrets(seed: 77)
        var refused = 0
        for i in 0..<bytes.count {
            for _ in 0..<4 {
                var damaged = bytes
                damaged[i] = UInt8(truncatingIfNeeded: s.next())
                if (try? SnapshotCodec.decode(damaged, verifyingChecksum: false)) == nil { refused += 1 }
            }
        }
        for _ in 0..<2000 {
            var damaged = bytes
            for _ in 0..<(1 + s.roll(8)) { damaged[s.roll(damaged.count)] = UInt8(truncatingIfNeeded: s.next()) }
            damaged.removeLast(s.roll(40))
            _ = try? SnapshotCodec.decode(damaged, verifyingChecksum: false)
        }
        #expect(refused > bytes.count)
    }

    @Test func hostileCountsDoNotAllocate() throws {
        // A header claiming 2^32-1 pins in a file of a few bytes: refused before any reserve.
        var w = StateWriter()
        w.bytes = SnapshotCodec.magic
        w.u16(1); w.u16(0); w.i64(0); w.u64(0); w.u32(.max); w.u32(.max)
        w.u32(CRC32C.checksum(w.bytes))
        #expect {
            try SnapshotCodec.decode(w.bytes)
        } throws: { error in
            guard case StateError.invalid(_, _, let reason) = error else { return false }
            return reason.contains("pin count 4294967295")
        }
    }

    @Test func invalidUTF8IsRefused() throws {
        let s = TestSecrets(seed: 2)
        var pin = Fixtures.pin(s, sequence: 1)
        pin.title = "abc"
        var bytes = SnapshotCodec.encode(StateSnapshot(takenAt: 0, journalSegment: 0, pins: [pin], streams: []))
        let abc = Array("abc".utf8)
        let at = try #require((0..<(bytes.count - 3)).first { Array(bytes[$0..<($0 + 3)]) == abc })
        bytes[at] = 0xC3          // a lead byte followed by "b": not UTF-8
        bytes.replaceSubrange((bytes.count - 4)..., with: Self.le32(CRC32C.checksum(Array(bytes[0..<(bytes.count - 4)]))))
        #expect {
            try SnapshotCodec.decode(bytes)
        } throws: { error in
            guard case StateError.invalid(_, _, let reason) = error else { return false }
            return reason.contains("UTF-8")
        }
    }

    @Test func inconsistentStreamIsRefusedWithItsReason() throws {
        let s = TestSecrets(seed: 6)
        let stream = Fixtures.stream(s, events: 3, capacity: 10)
        var w = StateWriter()
        PanicFields.write(stream, to: &w)
        // Patch the seq (after id 16, status 1, two times 16) to one the history does not end at.
        var bytes = w.bytes
        bytes[33] &+= 1
        #expect {
            try bytes.withStateBytes { (raw: UnsafeRawBufferPointer) throws(StateError) in
                var r = StateReader(raw, what: "panic stream")
                _ = try PanicFields.readStream(&r)
            }
        } throws: { error in
            "\(error)".contains("newest history event has seq 4, the stream is at seq 5")
        }
    }

    @Test func verifyChecksOnlyTheEnvelope() {
        let bytes = SnapshotCodec.encode(Self.sample())
        #expect(SnapshotCodec.verify(bytes))
        var damaged = bytes
        damaged[100] ^= 4
        #expect(!SnapshotCodec.verify(damaged))
        #expect(!SnapshotCodec.verify([]))
    }

    static func le32(_ v: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: v >> UInt32($0 * 8)) }
    }
}
