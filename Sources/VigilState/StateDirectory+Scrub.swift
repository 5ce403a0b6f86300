import VigilCore

/// Data that leaves when it should: once a panic stream is removed (its grace over), the files
/// kept as fallbacks must not go on holding its trail.
///
/// A snapshot at segment N holds only the streams held when it was taken; but the fallback kept
/// with it (the previous snapshot, and the journal segments from that one's number up to N) may
/// still hold a stream removed since. `scrub` rewrites those files without it, each atomically
/// (a temporary file renamed over the old one), so the fallback stays usable and consistent:
/// restoring from it gives the same state, minus streams that are gone anyway. The cost, on the
/// persistence thread after each snapshot: reading and decoding the fallback snapshot and the
/// segments kept with it; a file is rewritten only when it holds a removed stream.
extension StateDirectory {
    /// Rewrites every snapshot and journal segment numbered below `segment` that mentions a panic
    /// stream not in `liveStreams`, without it. A snapshot there that does not decode, or a
    /// segment whose header does not, cannot be scrubbed and holds nothing restore could use
    /// (restore skips a damaged snapshot; a fallback is kept only if it verifies), so it is
    /// deleted, unless it is a newer Vigil's format (left for that version). A segment damaged after its header keeps its damaged tail as it is (restore
    /// refuses it, and says so). Returns the names rewritten or deleted.
    @discardableResult
    public func scrub(before segment: UInt64, liveStreams: Set<StreamID>) throws(StateError) -> [String] {
        let files = try listing()
        var touched: [String] = []
        for n in files.snapshots where n < segment {
            let name = StateFileName.snapshot(n)
            // The usual case, nothing to remove, found without reading the file into memory or
            // decoding its pins; a file that needs rewriting (or does not verify) is decoded.
            if let ids = SnapshotFileScan.streamIDs(file(name.name)), ids.allSatisfy(liveStreams.contains) { continue }
            var snapshot: StateSnapshot
            do throws(StateError) {
                snapshot = try SnapshotCodec.decode(try StateFiles.readAll(file(name.name)))
            } catch {
                if case .unsupportedVersion = error { continue }  // a newer Vigil's: not ours to delete
                try StateFiles.unlink(file(name.name))
                touched.append(name.name)
                continue
            }
            let before = snapshot.streams.count
            snapshot.streams.removeAll { !liveStreams.contains($0.id) }
            guard snapshot.streams.count != before else { continue }
            try writeSnapshot(SnapshotCodec.encode(snapshot), segment: n)
            touched.append(name.name)
        }
        for n in files.journals where n < segment {
            let name = StateFileName.journal(n)
            let bytes = try StateFiles.readAll(file(name.name))
            guard !bytes.isEmpty else { continue }
            guard bytes.count >= JournalCodec.headerBytes, (try? JournalCodec.readHeader(bytes)) == n else {
                try StateFiles.unlink(file(name.name))
                touched.append(name.name)
                continue
            }
            // Most segments mention no removed stream: found without keeping their records.
            var mentionsRemoved = false
            _ = JournalCodec.forEachRecord(bytes, from: JournalCodec.headerBytes) { record in
                if let id = record.stream, !liveStreams.contains(id) { mentionsRemoved = true }
            }
            guard mentionsRemoved else { continue }
            let scan = JournalCodec.scan(bytes, from: JournalCodec.headerBytes)
            let kept = scan.records.filter { record in record.stream.map(liveStreams.contains) ?? true }
            guard kept.count != scan.records.count else { continue }
            var out = JournalCodec.header(segment: n)
            for record in kept { JournalCodec.append(record, to: &out) }
            out += bytes[scan.validLength...]
            try writeAtomically(out, final: name, temp: .journalTemp(n))
            touched.append(name.name)
        }
        if !touched.isEmpty { try StateFiles.fsyncDirectory(path) }
        return touched
    }
}

extension JournalRecord {
    /// The panic stream a record is about (nil for pin records).
    public var stream: StreamID? {
        switch self {
        case .pinPut, .pinRemove, .pinVote, .circlePut, .circleRemove, .noticeSettled, .noticeAcked, .answerKept: return nil
        case .panicStart(let start): return start.id
        case .panicEvent(let id, _), .panicInvite(let id, _), .panicRevoke(let id, _), .panicRemove(let id), .panicRekey(let id, _): return id
        }
    }
}
