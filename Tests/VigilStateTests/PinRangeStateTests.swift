import Testing
import VigilGeo
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// A pin's reach (`range_m`) is part of the pin: journal records of kind 10, snapshot version 3,
/// and the older forms still read (a pin in them has no range).
@Suite struct PinRangeStateTests {
    let secrets = TestSecrets(seed: 77)

    func rangedPin(_ sequence: UInt64, range: Int?) -> Pin {
        var pin = Fixtures.pin(secrets, sequence: sequence, votes: 3)
        pin.rangeMeters = range
        return pin
    }

    @Test func aPinWithARangeIsJournaledAsKind10AndOneWithoutStaysKind1() throws {
        let ranged = rangedPin(1, range: 2_500)
        let plain = rangedPin(2, range: nil)
        let rangedBytes = JournalCodec.encode(.pinPut(ranged))
        let plainBytes = JournalCodec.encode(.pinPut(plain))
        #expect(rangedBytes[JournalCodec.frameBytes] == 10)
        #expect(plainBytes[JournalCodec.frameBytes] == 1)
        let scan = JournalCodec.scan(rangedBytes + plainBytes)
        #expect(scan.stop == nil)
        #expect(scan.records == [.pinPut(ranged), .pinPut(plain)])
        if case .pinPut(let back) = scan.records[0] { #expect(back.rangeMeters == 2_500) } else { Issue.record("not a pinPut") }
    }

    @Test func aKind10RecordWithRangeZeroIsDamage() {
        var payload = Array(JournalCodec.encode(.pinPut(rangedPin(1, range: 7))).dropFirst(JournalCodec.frameBytes))
        payload.replaceSubrange((payload.count - 4)..., with: [0, 0, 0, 0])
        #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: payload) }
        // Cut short: the range is missing.
        #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: Array(payload.dropLast(4))) }
    }

    @Test func snapshotsKeepRangesAndReadVersion2() throws {
        let pins = [rangedPin(1, range: 1), rangedPin(2, range: nil), rangedPin(3, range: 20_000_000)]
        let snapshot = StateSnapshot(takenAt: 1_700_000_000_000, journalSegment: 5, pins: pins, streams: [])
        let bytes = SnapshotCodec.encode(snapshot)
        #expect(bytes[8] == SnapshotCodec.version && SnapshotCodec.version >= 3)
        let back = try SnapshotCodec.decode(bytes)
        expectSamePins(back.pins, pins)
        #expect(back.pins.map(\.rangeMeters) == [1, nil, 20_000_000])

        // Version 2 wrote the same pin fields without the range: build one from a version 9 file
        // holding one pin without a range and no streams (before the checksum: the pin's range,
        // then the empty circle, settlement, acknowledgement and kept answer lists' counts, 4
        // bytes each; in the header, the cluster fields).
        let one = SnapshotCodec.encode(StateSnapshot(takenAt: 9, journalSegment: 1, pins: [pins[1]], streams: []))
        #expect(one[8] == 9)
        var v2 = Array(one[..<(one.count - 24)])
        v2.removeSubrange(36..<45)
        v2[8] = 2
        v2 += withUnsafeBytes(of: CRC32C.checksum(v2).littleEndian, Array.init)
        let old = try SnapshotCodec.decode(v2)
        expectSamePins(old.pins, [pins[1]])
        #expect(old.pins[0].rangeMeters == nil)
    }

    @Test func replayRestoresTheRangeAndItsRemoval() {
        var pin = rangedPin(1, range: 800)
        var image = StateImage(StateSnapshot(takenAt: 0, journalSegment: 0, pins: [], streams: []))
        image.apply(.pinPut(pin))
        #expect(image.pins[pin.id]?.rangeMeters == 800)
        pin.rangeMeters = nil
        pin.updatedAt += 1
        image.apply(.pinPut(pin))
        #expect(image.pins[pin.id]?.rangeMeters == nil)
    }
}
