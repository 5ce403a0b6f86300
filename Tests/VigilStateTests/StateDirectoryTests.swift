import Glibc
import Testing
@testable import VigilCore
@testable import VigilState

/// The snapshot side of `StateDirectory`: creating the directory, atomic writes, fallbacks, cleanup.
@Suite struct StateDirectoryTests {
    @Test func aMissingDirectoryIsCreatedPrivate() throws {
        let tmp = TemporaryDirectory()
        let path = tmp.file("a/b/state")
        let dir = try StateDirectory(path: path + "/")
        #expect(dir.path == path)
        #expect(try StateFiles.isDirectory(path) == true)
        #expect(fileMode(path) == 0o700)
        #expect(tmp.names() == ["a"])
        #expect(try StateFiles.list(path).isEmpty, "the probe file is gone")
        _ = try StateDirectory(path: path)        // existing: fine
    }

    /// Issue 12: a directory and files that existed before, with looser modes, are made private.
    @Test func anExistingDirectoryAndItsFilesAreMadePrivate() throws {
        let tmp = TemporaryDirectory()
        let path = tmp.file("state")
        #expect(mkdir(path, 0o755) == 0)
        #expect(chmod(path, 0o755) == 0)
        let snapshot = path + "/snapshot-0000000000000001.vgs", journal = path + "/journal-0000000000000001.vgj"
        for file in [snapshot, journal] {
            let fd = open(file, O_WRONLY | O_CREAT, 0o644)
            #expect(fd >= 0)
            close(fd)
            #expect(chmod(file, 0o644) == 0)
        }
        let dir = try StateDirectory(path: path)
        #expect(fileMode(path) == 0o700)
        #expect(fileMode(snapshot) == 0o600 && fileMode(journal) == 0o600)
        // A segment re-opened for appending is 0600 even if it was loosened after the start.
        #expect(chmod(journal, 0o664) == 0)
        let fd = try StateFiles.open(journal, O_WRONLY | O_APPEND)
        close(fd)
        #expect(fileMode(journal) == 0o600)
        _ = dir
    }

    @Test func aPathThroughARegularFileFailsNamingIt() throws {
        let tmp = TemporaryDirectory()
        tmp.write("x-file", [1, 2, 3])
        #expect {
            try StateDirectory(path: tmp.file("x-file/state"))
        } throws: { error in
            let text = "\(error)"
            return text.contains(tmp.file("x-file")) && text.contains("Not a directory")
        }
        #expect(throws: StateError.notADirectory(path: tmp.file("x-file"))) { try StateDirectory(path: tmp.file("x-file")) }
    }

    /// Root writes through mode 0500, so as root this is skipped; the path-under-a-file test
    /// covers the same error path in every environment.
    @Test(.disabled(if: geteuid() == 0, "running as root: a read-only mode does not stop root writing"))
    func anUnwritableDirectoryFailsNamingIt() throws {
        let tmp = TemporaryDirectory()
        let path = tmp.file("ro")
        _ = try StateDirectory(path: path)
        chmod(path, 0o500)
        defer { chmod(path, 0o700) }
        #expect {
            try StateDirectory(path: path)
        } throws: { error in
            "\(error)".contains(path) && "\(error)".contains("Permission denied")
        }
    }

    @Test func systemErrorsNameTheCallThePathAndTheErrno() {
        let text = StateError.system(operation: "open", path: "/var/lib/vigil/x", errno: EACCES).description
        #expect(text == "open /var/lib/vigil/x: Permission denied (errno 13)")
    }

    @Test func snapshotWriteIsAtomicAndPrivate() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let bytes = SnapshotCodec.encode(SnapshotCodecTests.sample())
        // A temp file left by a crash, with loose permissions: replaced, and the result is 0600.
        tmp.write("snapshot-0000000000000007.vgs.tmp", [9, 9, 9])
        chmod(tmp.file("snapshot-0000000000000007.vgs.tmp"), 0o644)
        try dir.writeSnapshot(bytes, segment: 7)
        #expect(tmp.names() == ["snapshot-0000000000000007.vgs"])
        #expect(fileMode(tmp.file("snapshot-0000000000000007.vgs")) == 0o600)
        #expect(tmp.read("snapshot-0000000000000007.vgs") == bytes)
    }

    @Test func writeFailuresNameTheFileAndLeaveNoTemp() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        // The final name is a non-empty directory: rename fails after the temp file was written.
        try StateFiles.makeDirectory(tmp.file("snapshot-0000000000000003.vgs/x"), mode: 0o700)
        #expect {
            try dir.writeSnapshot([1, 2, 3], segment: 3)
        } throws: { error in
            "\(error)".hasPrefix("rename ") && "\(error)".contains("snapshot-0000000000000003.vgs.tmp")
        }
        #expect(tmp.names() == ["snapshot-0000000000000003.vgs"])
    }

    @Test func loadTakesTheNewestAndFallsBackPastDamage() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        #expect(try dir.loadNewestSnapshot().snapshot == nil)
        var older = SnapshotCodecTests.sample(seed: 1)
        older.journalSegment = 4
        var newer = SnapshotCodecTests.sample(seed: 2)
        newer.journalSegment = 9
        try dir.writeSnapshot(SnapshotCodec.encode(older), segment: 4)
        try dir.writeSnapshot(SnapshotCodec.encode(newer), segment: 9)
        var loaded = try dir.loadNewestSnapshot()
        #expect(loaded.file == "snapshot-0000000000000009.vgs" && loaded.fallbacks.isEmpty)
        expectSamePins(loaded.snapshot?.pins ?? [], newer.pins)

        // Damage the newest: the older one is used, and the log says why.
        var bytes = tmp.read("snapshot-0000000000000009.vgs")
        bytes[bytes.count / 2] ^= 0x10
        tmp.write("snapshot-0000000000000009.vgs", bytes)
        // A snapshot whose content names another segment than its file name is skipped too.
        var misnamed = SnapshotCodecTests.sample(seed: 3)
        misnamed.journalSegment = 1
        tmp.write("snapshot-000000000000000c.vgs", SnapshotCodec.encode(misnamed))
        loaded = try dir.loadNewestSnapshot()
        #expect(loaded.file == "snapshot-0000000000000004.vgs")
        expectSamePins(loaded.snapshot?.pins ?? [], older.pins)
        #expect(loaded.fallbacks.count == 2)
        #expect(loaded.fallbacks[0].hasPrefix("snapshot-000000000000000c.vgs: names journal segment 0000000000000001"))
        #expect(loaded.fallbacks[1].hasPrefix("snapshot-0000000000000009.vgs: snapshot checksum mismatch"))
    }

    @Test func unrelatedFilesAreIgnored() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        for name in ["snapshot-7.vgs", "snapshot-000000000000000G.vgs", "SNAPSHOT-0000000000000001.vgs", "notes.txt", "journal-0000000000000001.vgj.bak"] {
            tmp.write(name, [1])
        }
        #expect(try dir.loadNewestSnapshot().fallbacks.isEmpty)
        let listing = try dir.listing()
        #expect(listing.snapshots.isEmpty && listing.journals.isEmpty && listing.temps.isEmpty)
    }

    @Test func removeObsoleteKeepsOneVerifiedFallbackAndItsJournal() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let bytes = SnapshotCodec.encode(SnapshotCodecTests.sample())
        for segment: UInt64 in [2, 5, 8, 11] { try dir.writeSnapshot(bytes, segment: segment) }
        for segment: UInt64 in 1...11 { tmp.write(StateFileName.journal(segment).name, JournalCodec.header(segment: segment)) }
        tmp.write("snapshot-0000000000000004.vgs.tmp", [0])
        tmp.write("snapshot-000000000000000c.vgs.tmp", [0])      // a newer write in progress: kept
        // The newest older snapshot (8) is damaged: 5 becomes the fallback.
        var damaged = bytes
        damaged[40] ^= 1
        tmp.write("snapshot-0000000000000008.vgs", damaged)
        // Every stream of the sample is still held: nothing to scrub, but the damaged snapshot 8
        // cannot be scrubbed and restore would skip it, so it goes too.
        let live = Set(SnapshotCodecTests.sample().streams.map(\.id))
        let removed = try dir.removeObsolete(before: 11, liveStreams: live)
        #expect(removed.sorted() == ["journal-0000000000000001.vgj", "journal-0000000000000002.vgj", "journal-0000000000000003.vgj",
                                     "journal-0000000000000004.vgj", "snapshot-0000000000000002.vgs", "snapshot-0000000000000004.vgs.tmp",
                                     "snapshot-0000000000000008.vgs"])
        let listing = try dir.listing()
        #expect(listing.snapshots == [5, 11] && listing.journals == Array(5...11) && listing.temps == [12])
        // Nothing older left: a second call removes nothing.
        #expect(try dir.removeObsolete(before: 11, liveStreams: live).isEmpty)
    }

    @Test func removeObsoleteWithoutAFallbackKeepsOnlyTheNewest() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        try dir.writeSnapshot(SnapshotCodec.encode(SnapshotCodecTests.sample()), segment: 3)
        for segment: UInt64 in 0...3 { tmp.write(StateFileName.journal(segment).name, JournalCodec.header(segment: segment)) }
        #expect(try dir.removeObsolete(before: 3, liveStreams: []) == ["journal-0000000000000000.vgj", "journal-0000000000000001.vgj", "journal-0000000000000002.vgj"])
    }

    @Test func fileNamesRoundTrip() {
        for name in [StateFileName.snapshot(0), .snapshot(.max), .snapshotTemp(255), .journal(0xABCDEF)] {
            #expect(StateFileName(name.name) == name)
        }
        #expect(StateFileName.journal(0xABCDEF).name == "journal-0000000000abcdef.vgj")
        #expect(StateFileName("journal-0000000000ABCDEF.vgj") == nil)
    }
}
