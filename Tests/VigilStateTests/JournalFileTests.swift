import Glibc
import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// `JournalFile` (appending) and `StateDirectory.readJournal` (reading back).
@Suite struct JournalFileTests {
    static func records(_ n: Int, seed: UInt64 = 1) -> [JournalRecord] {
        let s = TestSecrets(seed: seed)
        return (0..<n).map { i in i % 3 == 2 ? .pinRemove(PinID(high: UInt64(i), low: 1)) : .pinPut(Fixtures.pin(s, sequence: UInt64(i + 1), votes: i % 4)) }
    }

    func readAll(_ dir: StateDirectory, from segment: UInt64, repair: Bool = true) throws -> (records: [JournalRecord], report: JournalReadReport) {
        var records: [JournalRecord] = []
        let report = try dir.readJournal(from: segment, repairTornTail: repair) { records.append($0) }
        return (records, report)
    }

    @Test func appendWriteSyncAndReadBack() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let records = Self.records(30)
        let file = try dir.openSegment(3)
        #expect(file.pendingBytes == JournalCodec.headerBytes)      // the header goes first
        for r in records[0..<10] { file.append(r) }
        try file.write()
        try file.sync()
        #expect(file.pendingBytes == 0 && file.writtenBytes == tmp.read("journal-0000000000000003.vgj").count)
        var buffer: [UInt8] = []
        for r in records[10..<30] { JournalCodec.append(r, to: &buffer) }
        file.append(buffer)
        try file.close()
        #expect(fileMode(tmp.file("journal-0000000000000003.vgj")) == 0o600)
        let back = try readAll(dir, from: 3)
        #expect(back.records == records)
        #expect(back.report.records == 30 && back.report.corruption == nil && back.report.truncatedTail == nil)
        #expect(back.report.segments.map(\.file) == ["journal-0000000000000003.vgj"])
        #expect(throws: StateError.self) { try file.sync() }       // closed

        // Reopening appends after what is there, with no second header.
        let again = try dir.openSegment(3)
        #expect(again.pendingBytes == 0)
        again.append(.pinRemove(PinID(high: 99, low: 99)))
        try again.close()
        #expect(try readAll(dir, from: 3).records == records + [.pinRemove(PinID(high: 99, low: 99))])
    }

    /// A segment given up after a failed write is cut back to what was acknowledged: the records
    /// written after that (which the server refused) are not replayed, and the file is closed.
    @Test func anAbandonedSegmentKeepsOnlyItsAcknowledgedRecords() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let records = Self.records(12)
        let file = try dir.openSegment(1)
        for r in records[0..<5] { file.append(r) }
        try file.write()
        let acknowledged = file.writtenBytes
        for r in records[5...] { file.append(r) }
        try file.write()
        file.append(records[0])                                     // still buffered: dropped
        #expect(file.abandon(keeping: acknowledged))
        #expect(tmp.read("journal-0000000000000001.vgj").count == acknowledged)
        #expect(try readAll(dir, from: 1).records == Array(records[0..<5]))
        #expect(throws: StateError.self) { try file.sync() }       // closed
    }

    @Test func storageExhaustionIsToldFromAWrongDirectory() {
        #expect(StateError.system(operation: "write", path: "/x", errno: ENOSPC).isStorageExhaustion)
        #expect(StateError.system(operation: "fdatasync", path: "/x", errno: EIO).storageErrorKind == "io")
        #expect(StateError.system(operation: "write", path: "/x", errno: EDQUOT).storageErrorKind == "quota")
        #expect(!StateError.system(operation: "open", path: "/x", errno: EACCES).isStorageExhaustion)
        #expect(!StateError.locked(path: "/x").isStorageExhaustion)
        #expect(StateError.system(operation: "write", path: "/secret/place", errno: ENOSPC).withoutPath == "write: No space left on device (errno 28)")
    }

    @Test func segmentsAreReadInOrderFromTheSnapshotsSegment() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let records = Self.records(40)
        // Written out of order, numbered past 9 so that hex digits matter (…a, …b, …10).
        let segments: [UInt64] = [0x9, 0xA, 0xB, 0x10, 0xC, 0xD, 0xE, 0xF]
        for (i, segment) in segments.enumerated().reversed() {
            let file = try dir.openSegment(segment)
            for r in records[(i * 5)..<(i * 5 + 5)] { file.append(r) }
            try file.close()
        }
        let back = try readAll(dir, from: 0xA)
        let expected = segments.sorted().dropFirst().flatMap { seg in records[(segments.firstIndex(of: seg)! * 5)..<(segments.firstIndex(of: seg)! * 5 + 5)] }
        #expect(back.records == Array(expected))
        #expect(back.report.segments.map(\.segment) == Array(0xA...0x10))
        #expect(back.report.lastSegment == 0x10)
    }

    /// kill -9 mid-append: the last segment's tail is cut anywhere. Every cut point recovers the
    /// whole records before it, truncates the file to them, and appending then continues cleanly.
    @Test func tornTailOfTheLastSegmentIsCutAtEveryPoint() throws {
        let records = Self.records(4)
        var full = JournalCodec.header(segment: 1)
        var ends = [full.count]
        for r in records { JournalCodec.append(r, to: &full); ends.append(full.count) }
        let before = JournalCodec.header(segment: 0) + JournalCodec.encode(.pinRemove(PinID(high: 5, low: 5)))
        for cut in 0...full.count {
            let tmp = TemporaryDirectory()
            let dir = try StateDirectory(path: tmp.path)
            tmp.write("journal-0000000000000000.vgj", before)
            tmp.write("journal-0000000000000001.vgj", Array(full[0..<cut]))
            let back = try readAll(dir, from: 0)
            let whole = cut < ends[0] ? 0 : ends.lastIndex { $0 <= cut }!
            #expect(back.records == [.pinRemove(PinID(high: 5, low: 5))] + records[0..<whole], "cut \(cut)")
            #expect(back.report.corruption == nil, "cut \(cut)")
            let kept = cut < ends[0] ? 0 : ends[whole]
            #expect(tmp.read("journal-0000000000000001.vgj").count == kept, "cut \(cut)")
            #expect((back.report.truncatedTail != nil) == (cut != kept), "cut \(cut)")
            // Appending after the repair continues the journal cleanly.
            let file = try dir.openSegment(1)
            file.append(.pinRemove(PinID(high: 6, low: 6)))
            try file.close()
            #expect(try readAll(dir, from: 1).records == Array(records[0..<whole]) + [.pinRemove(PinID(high: 6, low: 6))], "cut \(cut)")
        }
    }

    @Test func withoutRepairNothingIsTruncated() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        var bytes = JournalCodec.header(segment: 0)
        JournalCodec.append(.pinRemove(PinID(high: 1, low: 1)), to: &bytes)
        tmp.write("journal-0000000000000000.vgj", bytes + [1, 2, 3])
        let back = try readAll(dir, from: 0, repair: false)
        #expect(back.records.count == 1 && back.report.truncatedTail == nil)
        #expect(back.report.segments.first?.stop == "record at byte \(bytes.count) is cut short")
        #expect(tmp.read("journal-0000000000000000.vgj").count == bytes.count + 3)
    }

    @Test func damageInAMiddleSegmentStopsReplayThere() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let records = Self.records(9)
        for segment: UInt64 in 0...2 {
            var bytes = JournalCodec.header(segment: segment)
            for r in records[Int(segment * 3)..<Int(segment * 3 + 3)] { JournalCodec.append(r, to: &bytes) }
            if segment == 1 { bytes[bytes.count - 3] ^= 0xFF }          // last record of the middle segment
            tmp.write(StateFileName.journal(segment).name, bytes)
        }
        let sizeBefore = tmp.read("journal-0000000000000001.vgj").count
        let back = try readAll(dir, from: 0)
        #expect(back.records == Array(records[0..<5]))
        #expect(back.report.corruption?.hasPrefix("journal-0000000000000001.vgj: record at byte") == true)
        #expect(back.report.corruption?.hasSuffix("fails its checksum (not the last segment)") == true)
        #expect(back.report.truncatedTail == nil && tmp.read("journal-0000000000000001.vgj").count == sizeBefore)
        #expect(back.report.segments.count == 2)
    }

    @Test func aMissingSegmentStopsReplay() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        for segment: UInt64 in [4, 5, 7] {
            var bytes = JournalCodec.header(segment: segment)
            JournalCodec.append(.pinRemove(PinID(high: segment, low: 0)), to: &bytes)
            tmp.write(StateFileName.journal(segment).name, bytes)
        }
        let back = try readAll(dir, from: 4)
        #expect(back.records == [.pinRemove(PinID(high: 4, low: 0)), .pinRemove(PinID(high: 5, low: 0))])
        #expect(back.report.corruption == "journal-0000000000000006.vgj is missing (the next segment present is journal-0000000000000007.vgj)")
        // The snapshot's own segment missing while later ones exist is the same damage.
        #expect(try readAll(dir, from: 3).report.corruption?.hasPrefix("journal-0000000000000003.vgj is missing") == true)
    }

    @Test func badHeadersAreDamageAndShortLastHeadersAreEmpty() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        tmp.write("journal-0000000000000000.vgj", JournalCodec.header(segment: 5))      // names another segment
        #expect(try readAll(dir, from: 0).report.corruption?.contains("names segment 0000000000000005") == true)
        tmp.write("journal-0000000000000000.vgj", JournalCodec.header(segment: 0))
        tmp.write("journal-0000000000000001.vgj", Array(JournalCodec.header(segment: 1).prefix(10)))
        let back = try readAll(dir, from: 0)
        #expect(back.report.corruption == nil && back.report.truncatedTail == .init(file: "journal-0000000000000001.vgj", size: 10, keptBytes: 0))
        #expect(tmp.read("journal-0000000000000001.vgj").isEmpty)
        // Opening it again writes a fresh header.
        let file = try dir.openSegment(1)
        #expect(file.pendingBytes == JournalCodec.headerBytes)
        try file.close()
        #expect(try JournalCodec.readHeader(tmp.read("journal-0000000000000001.vgj")) == 1)
    }

    @Test func emptySegmentsAnywhereHoldNoRecords() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        _ = try dir.openSegment(0)                     // opened, never written: an empty file
        let second = try dir.openSegment(1)
        second.append(.pinRemove(PinID(high: 1, low: 1)))
        try second.close()
        tmp.write("journal-0000000000000002.vgj", [])
        let back = try readAll(dir, from: 0)
        #expect(back.records == [.pinRemove(PinID(high: 1, low: 1))])
        #expect(back.report.corruption == nil && back.report.truncatedTail == nil && back.report.segments.count == 3)
        // A short but non-empty header before the last segment is damage, though.
        tmp.write("journal-0000000000000000.vgj", [0x89])
        #expect(try readAll(dir, from: 0).report.corruption?.hasPrefix("journal-0000000000000000.vgj: bad header") == true)
    }

    @Test func anUndecodableRecordAtTheTailIsNotCutAway() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let payload: [UInt8] = [200, 0]
        let bytes = JournalCodec.header(segment: 0) + SnapshotCodecTests.le32(2) + SnapshotCodecTests.le32(CRC32C.checksum(payload)) + payload
        tmp.write("journal-0000000000000000.vgj", bytes)
        let back = try readAll(dir, from: 0)
        #expect(back.report.corruption?.contains("cannot be read") == true && back.report.truncatedTail == nil)
        #expect(tmp.read("journal-0000000000000000.vgj") == bytes)
    }

    @Test func aShortHeaderLeftInAFileIsRestartedOnOpen() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        tmp.write("journal-0000000000000002.vgj", [0x89, 0x56])
        let file = try dir.openSegment(2)
        file.append(.panicRemove(StreamID(high: 1, low: 2)))
        try file.close()
        #expect(try readAll(dir, from: 2).records == [.panicRemove(StreamID(high: 1, low: 2))])
    }
}
