import VigilCore

extension StateInspector {
    /// The state a directory restores to at `rules.now` (the newest snapshot that decodes, then
    /// the journal from its segment, as `recover` would), as one line:
    ///
    ///     {"type":"state","file":DIR,"digest":hex,"pins":n,"streams":n,"circles":n,"at":ms,
    ///      "snapshot":name or null,"cluster_sequence":n or null,"journal_records":n,
    ///      "issues":n[,"journal_stopped":reason]}
    ///
    /// `digest` is what a daemon restored from this directory reports at `/state/digest` for the
    /// same `at` and settings (`StateDigest`). Read-only, like the rest of the inspector: a torn
    /// tail is read up to its last good record and left as it is.
    public static func stateLine(directory path: String, rules: StateDigest.Rules) throws(StateError) -> String {
        let directory = StateDirectory(unchecked: path)
        let loaded = try directory.loadNewestSnapshot()
        var image = loaded.snapshot.map(StateImage.init) ?? StateImage()
        var from: UInt64 = 0
        if let snapshot = loaded.snapshot { from = snapshot.journalSegment } else { from = try directory.listing().journals.first ?? 0 }
        let journal = try directory.readJournal(from: from, repairTornTail: false) { image.apply($0) }
        let digest = StateDigest.of(image: image, rules: rules)
        var line = InspectorLine(file: path.split(separator: "/").last.map(String.init) ?? path, content: false)
        line.begin("state")
        line.w.field("digest", digest.hex)
        line.w.field("pins", Int64(digest.pins))
        line.w.field("streams", Int64(digest.streams))
        line.w.field("circles", Int64(digest.circles))
        line.w.field("at", rules.now)
        line.w.key("snapshot")
        if let file = loaded.file { line.w.string(file) } else { line.w.null() }
        line.replicatedSequence(loaded.snapshot?.replicatedSequence)
        line.w.field("journal_records", Int64(journal.records))
        line.w.field("issues", Int64(image.issueCount))
        if let corruption = journal.corruption { line.w.field("journal_stopped", corruption) }
        return line.end()
    }
}
