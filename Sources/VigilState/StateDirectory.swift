import Glibc
import VigilCore

/// The directory that holds Vigil's durable state:
///
///     snapshot-<segment>.vgs       snapshots, written atomically (the .tmp name while written)
///     journal-<segment>.vgj        journal segments, appended to
///     lock                         held by the running daemon (see `StateLock`)
///
/// `<segment>` is 16 lowercase hex digits. A snapshot names the first journal segment whose
/// records it does not contain, so restore = newest valid snapshot + the segments from its
/// number on. Segments are numbered consecutively: a missing one is damage.
///
/// A value with no mutable state: its methods may run on any thread, though the daemon should
/// keep writes (snapshots, `removeObsolete`) on one persistence thread so they do not race.
public struct StateDirectory: Sendable {
    public let path: String

    /// Opens the state directory, creating it (mode 0700, parents 0755) if missing, making it and
    /// the regular files in it private (0700, 0600) if they were not, and proves it
    /// writable by creating and removing a probe file, so a misconfigured path fails at startup
    /// with a message that names it, not at the first snapshot.
    public init(path: String) throws(StateError) {
        try self.init(preparing: path)
        try proveWritable()
    }

    /// `init(path:)` without the probe: the daemon runs the probe itself, so that a full disk
    /// (`StateError.isStorageExhaustion`) can start it read-only instead of stopping it.
    public init(preparing path: String) throws(StateError) {
        self.init(unchecked: path)
        try StateFiles.makeDirectory(self.path, mode: 0o700)
        // An existing directory, and the files an older version or an operator left in it, are
        // made private too: mkdir's mode only applies to a new directory.
        try StateFiles.setMode(self.path, 0o700)
        for name in try StateFiles.list(self.path) {
            let path = file(name)
            var info = stat()
            if lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_mode & 0o077 != 0 {
                try StateFiles.setMode(path, 0o600)
            }
        }
    }

    /// Creates, writes a byte to and removes a probe file.
    public func proveWritable() throws(StateError) {
        let probe = file(".vigil-probe-\(getpid())")
        let fd = try StateFiles.open(probe, O_WRONLY | O_CREAT | O_TRUNC)
        var written = 0
        do throws(StateError) {
            try [UInt8(0x0A)].withStateBytes { (raw: UnsafeRawBufferPointer) throws(StateError) in
                try StateFiles.writeAll(fd, raw, path: probe, written: &written)
            }
            try StateFiles.close(fd, path: probe)
        } catch {
            _ = try? StateFiles.unlink(probe)
            throw error
        }
        try StateFiles.unlink(probe)
    }

    /// A directory used as it is, for reading only (the inspector must not create anything).
    init(unchecked path: String) {
        var p = path
        while p.count > 1 && p.hasSuffix("/") { p.removeLast() }
        self.path = p
    }

    func file(_ name: String) -> String { path + "/" + name }

    /// The state files present, by kind, each list in ascending segment order.
    func listing() throws(StateError) -> (snapshots: [UInt64], temps: [UInt64], journals: [UInt64], journalTemps: [UInt64]) {
        var snapshots: [UInt64] = [], temps: [UInt64] = [], journals: [UInt64] = [], journalTemps: [UInt64] = []
        for name in try StateFiles.list(path) {
            switch StateFileName(name) {
            case .snapshot(let n)?: snapshots.append(n)
            case .snapshotTemp(let n)?: temps.append(n)
            case .journal(let n)?: journals.append(n)
            case .journalTemp(let n)?: journalTemps.append(n)
            case nil: break
            }
        }
        return (snapshots.sorted(), temps.sorted(), journals.sorted(), journalTemps.sorted())
    }

    // MARK: snapshots

    /// Writes a snapshot so that a crash at any moment leaves either the old state or the new
    /// one, never half of it: write `snapshot-<segment>.vgs.tmp` (mode 0600), fsync it, rename
    /// it over the final name, fsync the directory (the rename itself is durable only then).
    /// On failure the temporary file is removed and the error names the failing call.
    public func writeSnapshot(_ bytes: [UInt8], segment: UInt64) throws(StateError) {
        try writeAtomically(bytes, final: .snapshot(segment), temp: .snapshotTemp(segment))
    }

    /// The bytes of the snapshot file for `segment` (a cluster node publishes them).
    public func readSnapshot(segment: UInt64) throws(StateError) -> [UInt8] {
        try StateFiles.readAll(file(StateFileName.snapshot(segment).name))
    }

    /// `bytes` as the file `final`, by way of `temp` (see `writeSnapshot`).
    func writeAtomically(_ bytes: [UInt8], final finalName: StateFileName, temp tempName: StateFileName) throws(StateError) {
        let final = file(finalName.name)
        let temp = file(tempName.name)
        do throws(StateError) {
            let fd = try StateFiles.open(temp, O_WRONLY | O_CREAT | O_TRUNC)
            do throws(StateError) {
                // A temp file left by a crashed run keeps its old mode through O_CREAT: set it.
                guard fchmod(fd, 0o600) == 0 else { throw .system(operation: "fchmod", path: temp, errno: errno) }
                var written = 0
                try bytes.withStateBytes { (raw: UnsafeRawBufferPointer) throws(StateError) in
                    try StateFiles.writeAll(fd, raw, path: temp, written: &written)
                }
                try StateFiles.fsync(fd, path: temp)
            } catch {
                Glibc.close(fd)
                throw error
            }
            try StateFiles.close(fd, path: temp)
            try StateFiles.rename(temp, to: final)
        } catch {
            _ = try? StateFiles.unlink(temp)
            throw error
        }
        try StateFiles.fsyncDirectory(path)
    }

    /// The newest snapshot that decodes, trying older ones when a newer one is damaged; each
    /// one skipped is described in `fallbacks` ("snapshot-….vgs: <reason>") for the log. All nil
    /// and no fallbacks: there is no snapshot (a first start).
    public func loadNewestSnapshot() throws(StateError) -> (snapshot: StateSnapshot?, file: String?, fallbacks: [String]) {
        var fallbacks: [String] = []
        for segment in try listing().snapshots.reversed() {
            let name = StateFileName.snapshot(segment).name
            do throws(StateError) {
                let snapshot = try SnapshotCodec.decode(try StateFiles.readAll(file(name)))
                guard snapshot.journalSegment == segment else {
                    fallbacks.append("\(name): names journal segment \(StateFileName.hex(snapshot.journalSegment)), not its own")
                    continue
                }
                return (snapshot, name, fallbacks)
            } catch {
                fallbacks.append("\(name): \(error)")
            }
        }
        return (nil, nil, fallbacks)
    }

    /// Deletes what a snapshot at `segment` (just written) makes obsolete, keeping one fallback:
    /// the newest older snapshot whose checksum verifies stays, with the journal segments from
    /// its number on (falling back to it needs them). Older snapshots and segments go, and so do
    /// temporary files of older snapshots and segments (left by a crash mid-write). Then what is
    /// kept is scrubbed of the panic streams that are no longer held (`liveStreams`: the streams
    /// in the snapshot just written), see `scrub`. Returns the names removed or rewritten.
    ///
    /// Reads the candidate fallback to verify it (magic, version, checksum: no decoding), so it
    /// belongs on the persistence thread, after `writeSnapshot`.
    @discardableResult
    public func removeObsolete(before segment: UInt64, liveStreams: Set<StreamID>) throws(StateError) -> [String] {
        let files = try listing()
        var keepFrom = segment
        for older in files.snapshots.reversed() where older < segment {
            // Checked in chunks: reading the whole previous snapshot here doubled the peak RSS.
            if SnapshotFileScan.verifies(file(StateFileName.snapshot(older).name)) {
                keepFrom = older
                break
            }
        }
        var doomed: [StateFileName] = []
        doomed += files.snapshots.filter { $0 < keepFrom }.map { .snapshot($0) }
        doomed += files.temps.filter { $0 < segment }.map { .snapshotTemp($0) }
        doomed += files.journals.filter { $0 < keepFrom }.map { .journal($0) }
        doomed += files.journalTemps.filter { $0 < segment }.map { .journalTemp($0) }
        for name in doomed { try StateFiles.unlink(file(name.name)) }
        if !doomed.isEmpty { try StateFiles.fsyncDirectory(path) }
        return doomed.map(\.name) + (try scrub(before: segment, liveStreams: liveStreams))
    }
}
