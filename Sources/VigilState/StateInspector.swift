import VigilCore

/// Turns state files into JSON lines for people: `vigild`'s inspect command prints them.
///
/// For each file, in order (snapshots, then journal segments, each by segment): one line that
/// describes the file (kind, segment, size, whether it is valid or where it is torn), then, with
/// `entries`, one line per pin and stream (snapshots) or per record (journals). Every line
/// names its file, so the output can be grepped.
///
/// Read-only: nothing is created, truncated or removed, so it is safe on a live daemon's
/// directory (a segment being appended to may show a torn tail: the write in flight). Token
/// digests are shown as "sha256:<first 8 hex digits>…", enough to tell tokens apart and too
/// little to search for the token. Without `content` (the default) the output holds counts, sizes,
/// times, ids and those digests, but no coordinates, notes or pin texts (see `InspectorLine`).
public enum StateInspector {
    /// Inspects a state directory, or a single snapshot or journal file. With `state`, a
    /// directory's files are followed by the line of the state they restore to (`stateLine`).
    public static func inspect(path: String, entries: Bool = true, content: Bool = false, state: StateDigest.Rules? = nil,
                               emit: (String) -> Void) throws(StateError) {
        let directory = StateDirectory(unchecked: path)
        if try StateFiles.isDirectory(directory.path) == true {
            let files = try directory.listing()
            let names: [StateFileName] = files.snapshots.map { .snapshot($0) } + files.temps.map { .snapshotTemp($0) }
                + files.journals.map { .journal($0) } + files.journalTemps.map { .journalTemp($0) }
            for name in names { try inspectFile(directory.file(name.name), entries: entries, content: content, emit: emit) }
            if let state { emit(try stateLine(directory: path, rules: state)) }
        } else {
            try inspectFile(directory.path, entries: entries, content: content, emit: emit)
        }
    }

    /// One file; its kind comes from its name (a file with another name is read as a snapshot
    /// if it starts with the snapshot magic, else as a journal segment).
    public static func inspectFile(_ path: String, entries: Bool = true, content: Bool = false, emit: (String) -> Void) throws(StateError) {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        let bytes = try StateFiles.readAll(path)
        var line = InspectorLine(file: name, content: content)
        switch StateFileName(name) {
        case .snapshot(let n)?:
            snapshot(bytes, segment: n, kind: "snapshot", line: &line, entries: entries, emit: emit)
        case .snapshotTemp(let n)?:
            snapshot(bytes, segment: n, kind: "snapshot-temp", line: &line, entries: entries, emit: emit)
        case .journal(let n)?, .journalTemp(let n)?:
            journal(bytes, segment: n, line: &line, entries: entries, emit: emit)
        case nil:
            if bytes.starts(with: SnapshotCodec.magic) {
                snapshot(bytes, segment: nil, kind: "snapshot", line: &line, entries: entries, emit: emit)
            } else {
                journal(bytes, segment: nil, line: &line, entries: entries, emit: emit)
            }
        }
    }

    private static func snapshot(_ bytes: [UInt8], segment: UInt64?, kind: StaticString, line: inout InspectorLine,
                                 entries: Bool, emit: (String) -> Void) {
        let decoded: Result<StateSnapshot, StateError> = Result { () throws(StateError) in try SnapshotCodec.decode(bytes) }
        line.begin(kind)
        if let segment { line.w.field("segment", Int64(bitPattern: segment)) }
        line.w.field("size", Int64(bytes.count))
        switch decoded {
        case .success(let s):
            line.w.field("valid", true)
            line.w.field("taken_at", s.takenAt)
            line.w.field("journal_segment", Int64(bitPattern: s.journalSegment))
            line.replicatedSequence(s.replicatedSequence)
            line.w.field("pins", Int64(s.pins.count))
            line.w.field("streams", Int64(s.streams.count))
            line.w.field("circles", Int64(s.circles.count))
            // Kept answers are sealed with keys only clients hold: counts and sizes only.
            line.w.field("kept_answers", Int64(s.keptAnswers.count))
            line.w.field("kept_answer_bytes", Int64(s.keptAnswers.reduce(0) { $0 + $1.byteCount }))
            emit(line.end())
            guard entries else { return }
            for pin in s.pins {
                line.begin("pin")
                line.pin(pin)
                emit(line.end())
            }
            for stream in s.streams {
                line.begin("stream")
                line.stream(stream)
                emit(line.end())
            }
            for circle in s.circles {
                line.begin("circle")
                line.circle(circle)
                emit(line.end())
            }
        case .failure(let error):
            line.w.field("valid", false)
            line.w.field("error", error.description)
            emit(line.end())
        }
    }

    private static func journal(_ bytes: [UInt8], segment: UInt64?, line: inout InspectorLine,
                                entries: Bool, emit: (String) -> Void) {
        line.begin("journal")
        if let segment { line.w.field("segment", Int64(bitPattern: segment)) }
        line.w.field("size", Int64(bytes.count))
        let header: Result<UInt64, StateError> = Result { () throws(StateError) in try JournalCodec.readHeader(bytes) }
        switch header {
        case .failure(let error):
            line.w.field("valid", false)
            line.w.field("error", (bytes.isEmpty ? "empty file (no header yet)" : "bad header: \(error)"))
            emit(line.end())
        case .success(let named):
            let scan = JournalCodec.scan(bytes, from: JournalCodec.headerBytes)
            line.w.field("valid", segment == nil || segment == named)
            line.w.field("header_segment", Int64(bitPattern: named))
            line.w.field("valid_length", Int64(scan.validLength))
            line.w.field("records", Int64(scan.records.count))
            line.w.field("torn", scan.torn)
            if let stop = scan.stop {
                line.w.field("stop", stop.description)
                line.w.field("torn_bytes", Int64(bytes.count - scan.validLength))
            }
            emit(line.end())
            guard entries else { return }
            for record in scan.records {
                line.begin("record")
                line.record(record)
                emit(line.end())
            }
        }
    }
}
