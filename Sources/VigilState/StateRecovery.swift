import VigilCore

/// The state found at startup, as live hubs, with what the log should say about how it was found.
public struct RecoveredState: Sendable {
    public var map: MapHub
    public var panic: PanicHub
    /// Check-in circles.
    public var checkin: CheckinHub
    /// The snapshot restored from (nil: none, the journal alone was replayed).
    public var snapshotFile: String?
    public var snapshotTakenAt: Int64?
    /// The restored snapshot's `replicatedSequence`: the last replicated-stream sequence it includes
    /// (nil: no snapshot, or one written by a standalone node).
    public var replicatedSequence: UInt64?
    /// Newer snapshots that were skipped, each with the reason.
    public var snapshotFallbacks: [String]
    public var journal: JournalReadReport
    /// Records that did not fit the state (see `StateImage`), the first few described.
    public var replayIssues: [String]
    public var replayIssueCount: Int
    /// Number new voters above this (see `StateImage.highestVoteSession`).
    public var highestVoteSession: UInt64
    /// The journal segment to open for new records.
    public var nextSegment: UInt64
    /// Answers kept for idempotency keys, oldest first (expired ones are dropped as they are
    /// put into the table).
    public var keptAnswers: [KeptAnswer] = []

    /// One line each for the startup log: what was restored, and every fallback, cut and issue.
    public var logLines: [String] {
        var lines: [String] = []
        if let snapshotFile {
            lines.append("restored \(snapshotFile) (taken at \(snapshotTakenAt ?? 0) ms)")
        } else {
            lines.append("no snapshot: starting from the journal alone")
        }
        for fallback in snapshotFallbacks { lines.append("skipped damaged snapshot \(fallback)") }
        lines.append("replayed \(journal.records) journal records from \(journal.segments.count) segment(s); \(map.store.count) pins, \(panic.count) panic streams, \(checkin.count) check-in circles")
        if let cut = journal.truncatedTail {
            lines.append("cut a torn write off \(cut.file): \(cut.size) → \(cut.keptBytes) bytes")
        }
        if let corruption = journal.corruption { lines.append("journal replay stopped early: \(corruption)") }
        // The issues name streams and pins (ids, seqs): they stay in `replayIssues` for tests and
        // tools, and the log, which must never hold an id, gets only their number.
        if replayIssueCount > 0 {
            lines.append("\(replayIssueCount) journal record(s) not applied (records that contradict the state before them; `vigild state inspect` lists the journal)")
        }
        return lines
    }

    /// The startup log's lines for a cluster node, which replays no journal: the snapshot it
    /// restored (and at which stream sequence the stream takes over), or that the state comes
    /// from the stream.
    public var replicatedLogLines: [String] {
        var lines: [String] = []
        if let snapshotFile {
            lines.append("restored \(snapshotFile) (taken at \(snapshotTakenAt ?? 0) ms) at stream sequence \(replicatedSequence ?? 0); the stream brings it up to date")
        } else {
            lines.append("no snapshot: the state comes from the stream (or a cluster snapshot)")
        }
        for fallback in snapshotFallbacks { lines.append("skipped damaged snapshot \(fallback)") }
        lines.append("\(map.store.count) pins, \(panic.count) panic streams, \(checkin.count) check-in circles restored")
        return lines
    }

    /// Why a cluster node must not start on this directory (nil: it may): it holds a standalone
    /// node's state, which the stream does not have: journal records (a cluster node writes
    /// none, and replaying none would silently drop them), or a snapshot with state but no
    /// stream sequence (a cluster node's snapshots carry one once it has joined).
    public var replicationNodeRefusal: String? {
        let fix = "Give the cluster node another state.directory (or run this one without the cluster: section)."
        if journal.records > 0 {
            return "its journal holds \(journal.records) record(s) of a standalone node, which are not in the cluster's stream; a cluster node keeps snapshots only and would drop them. " + fix
        }
        if let snapshotFile, replicatedSequence == nil, map.store.count > 0 || panic.count > 0 || checkin.count > 0 {
            return "\(snapshotFile) holds a standalone node's state (\(map.store.count) pins, \(panic.count) panic streams, \(checkin.count) check-in circles), which is not in the cluster's stream; a cluster node would serve it as if it were. " + fix
        }
        return nil
    }
}

extension StateDirectory {
    /// Newest valid snapshot + journal replay → hubs at `now` (expired pins and ended streams past
    /// their grace dropped, timers re-armed, no connections). The torn tail of the last journal
    /// segment is truncated; damage elsewhere stops replay and is reported in `journal.corruption`
    /// (the caller decides whether to start with the state so far or refuse).
    ///
    /// Startup, in order:
    /// 1. `StateDirectory(path:)`, then `StateLock(directory)` (refuse to start when locked).
    /// 2. `recover(...)`; log `logLines`; check `journal.corruption`.
    /// 3. `openSegment(nextSegment)` for new records.
    /// 4. Write a snapshot of the recovered hubs with `journalSegment: nextSegment`, then
    ///    `removeObsolete(before: nextSegment)`: the replayed (and any damaged) files become
    ///    obsolete, and the next restart does not replay or trip over them again.
    public func recover(pinSettings: PinSettings, panicSettings: PanicSettings, checkinSettings: CheckinSettings = CheckinSettings(),
                        now: Int64) throws(StateError) -> RecoveredState {
        var loaded = try loadNewestSnapshot()
        var image: StateImage
        let from: UInt64
        let takenAt = loaded.snapshot?.takenAt
        let replicatedSequence = loaded.snapshot?.replicatedSequence
        if let snapshot = loaded.snapshot {
            image = StateImage(snapshot)
            from = snapshot.journalSegment
            loaded.snapshot = nil      // the image holds the pins now; a million of them need not exist twice
        } else {
            image = StateImage()
            from = try listing().journals.first ?? 0
        }
        let journal = try readJournal(from: from) { image.apply($0) }
        let (map, panic) = image.restore(pinSettings: pinSettings, panicSettings: panicSettings, now: now)
        let checkin = image.restoreCircles(settings: checkinSettings, now: now)
        // Never reuse a segment number a file already has, damaged or not.
        let next = journal.lastSegment.map { max(from, $0 + 1) } ?? from
        return RecoveredState(map: map, panic: panic, checkin: checkin, snapshotFile: loaded.file, snapshotTakenAt: takenAt,
                              replicatedSequence: replicatedSequence,
                              snapshotFallbacks: loaded.fallbacks, journal: journal, replayIssues: image.issues,
                              replayIssueCount: image.issueCount, highestVoteSession: image.highestVoteSession,
                              nextSegment: next, keptAnswers: image.keptAnswers)
    }
}
