import Foundation
import Glibc
import Logging
import VigilCore
import VigilLoop
import VigilState

/// When the journal reaches the disk (config `state.fsync`; docs/DURABILITY.md says what each loses).
public enum FsyncPolicy: Equatable, Sendable {
    /// fdatasync before the replies of the turn go out: one fsync per loop turn with writes.
    case always
    /// fdatasync at most every N ms. Critical records are synced before their reply anyway.
    case interval(Int64)
    /// Never fsync (the kernel writes back when it likes); critical records still are.
    case off

    init(_ name: String, intervalMs: Int) {
        switch name {
        case "always": self = .always
        case "off": self = .off
        default: self = .interval(Int64(intervalMs))
        }
    }
}

/// What the journal has done since start, for `/metrics`: plain integers kept on the loop.
struct JournalStats {
    var records = 0
    var writes = 0
    var bytes = 0
    var fsyncs = 0
    var fsyncNanoseconds: UInt64 = 0
    /// Of `fsyncs`: the interval policy's periodic ones, run off the loop (`IntervalSync`).
    var backgroundFsyncs = 0
}

/// The local journal and the snapshots, on the loop thread: the `ChangeLog` of a single node.
///
/// - Journal: every change is appended in the turn that applied it, and the turn's records are
///   written to the kernel (`write`) in `commitTurn`, before that turn's replies are flushed, so
///   an acknowledged change survives the process being killed whatever the policy; the policy
///   only decides what a power loss can take. Records whose `Durability` is critical are
///   fdatasynced before their reply in every policy.
/// - Snapshots: see `SnapshotSchedule`.
/// - Outages: a write, fsync or rotation that fails (a full disk, an I/O error) does not stop the
///   daemon. The turn's records are reported unrecorded (`commitTurn` returns false, and `/v1`
///   takes those changes back), the segment is cut back to what was acknowledged and given up,
///   and changes are refused (`retryAfterMs`) until a retry writes a new segment and a snapshot
///   of the state in memory; then the journal goes on in that segment. See `StorageOutage`.
final class Persistence: ChangeLog {
    let directory: StateDirectory
    private let lock: StateLock
    let policy: FsyncPolicy
    /// False on a cluster node: the stream is its journal; the directory holds snapshots only,
    /// and what `append` is given (the start-up tick's changes, before the node joins) is dropped.
    let keepsJournal: Bool
    private let logger: Logger
    /// The segment being appended to; nil during an outage.
    private var journal: JournalFile?
    /// The journal's length up to the last acknowledged record: what a failed write cuts it back to.
    private var acknowledgedBytes = 0
    /// Set while changes cannot be recorded.
    private(set) var outage: StorageOutage?
    /// An outage began during this turn: its records were not recorded (see `commitTurn`).
    private var failedThisTurn = false
    /// A record of this turn must be fsynced before its reply (critical, or policy `always`).
    private var syncDue = false
    private var unsyncedSinceMs: Int64?
    private var snapshots: SnapshotSchedule
    /// The interval policy's fdatasync, on a thread of its own (see `tick`).
    private let intervalSync: IntervalSync
    private var intervalSyncReceiver: InboxReceiver<IntervalSync.Outcome>?
    private(set) var journalStats = JournalStats()
    var snapshotStats: SnapshotStats { snapshots.stats }
    /// A cluster node's last applied replicated-stream sequence, recorded in every snapshot written
    /// from now on (see `SnapshotSchedule.replicatedSequence`); nil, the default, for a standalone node.
    var replicatedSequence: () -> UInt64? {
        get { snapshots.replicatedSequence }
        set { snapshots.replicatedSequence = newValue }
    }
    /// See `SnapshotSchedule.written`.
    var snapshotWritten: (([UInt8], UInt64) -> Void)? {
        get { snapshots.written }
        set { snapshots.written = newValue }
    }
    /// The live answers kept for idempotency keys, oldest first, for each snapshot (the
    /// application sets it; `IdempotencyTable.export`).
    var keptAnswers: () -> [KeptAnswer] = { [] }
    /// See `SnapshotSchedule.takeBacks`.
    var takeBacks: () -> Int {
        get { snapshots.takeBacks }
        set { snapshots.takeBacks = newValue }
    }
    /// Run by `/v1`'s stop step before `shutdown` (a cluster node takes back its unconfirmed
    /// writes, so that the final snapshot holds only what the stream holds).
    var beforeFinalSnapshot: () -> Void = {}
    /// Failed writes, fsyncs and file creations of the state, by `StateError.storageErrorKind`.
    private(set) var storageErrors: [String: Int] = [:]
    private(set) var outages = 0

    /// The state found in the directory, as hubs.
    let recovered: RecoveredState

    /// Opens (creating) the directory, takes its lock, recovers the state, opens a new journal
    /// segment and writes a fresh snapshot of what was recovered. A directory that is wrong (no
    /// permission, locked, damaged) stops start-up; one that is full or failing only stops the
    /// writes: the daemon starts read-only (an outage) and retries.
    init(path: String, policy: FsyncPolicy, snapshotIntervalSeconds: Int, pinSettings: PinSettings,
         panicSettings: PanicSettings, checkinSettings: CheckinSettings = CheckinSettings(), journal replays: Bool = true,
         logger: Logger, loop: EventLoop) throws {
        self.policy = policy
        self.logger = logger
        keepsJournal = replays
        directory = try Self.describe(path) { () throws(StateError) in try StateDirectory(preparing: path) }
        lock = try Self.describe(path) { [directory] () throws(StateError) in try StateLock(directory) }
        let now = V1Application.wallClockMs()
        let state = try Self.describe(path) { [directory] () throws(StateError) in
            try directory.recover(pinSettings: pinSettings, panicSettings: panicSettings, checkinSettings: checkinSettings, now: now)
        }
        for line in replays ? state.logLines : state.replicatedLogLines { logger.notice("\(line)", metadata: ["state": "\(path)"]) }
        if !replays, let refusal = state.replicationNodeRefusal {
            throw PersistenceError("state directory \(path): \(refusal)")
        }
        if let corruption = state.journal.corruption {
            throw PersistenceError("state directory \(path): the journal is damaged before its end (\(corruption)); refusing to start with part of it. Move the damaged segment away to start from what precedes it, or restore a backup.")
        }
        if state.snapshotFile == nil && !state.snapshotFallbacks.isEmpty {
            throw PersistenceError("state directory \(path): every snapshot is damaged (\(state.snapshotFallbacks.joined(separator: "; "))); refusing to start without one.")
        }
        recovered = state
        snapshots = try SnapshotSchedule(directory: directory, intervalSeconds: snapshotIntervalSeconds, logger: logger, loop: loop)
        intervalSync = try IntervalSync()
        do throws(StateError) {
            try directory.proveWritable()
            let bytes = try startJournal(state, now: now)
            logger.info("state ready", metadata: ["directory": "\(path)", "fsync": "\(policy)", "segment": "\(state.nextSegment)",
                                                  "snapshot_bytes": "\(bytes)"])
        } catch where error.isStorageExhaustion {
            journal?.abandon(keeping: 0)
            journal = nil
            begin(outage: error, during: "start-up", resumeSegment: state.nextSegment)
        } catch {
            throw PersistenceError("state directory \(path): \(error)")
        }
        intervalSyncReceiver = try intervalSync.outcomes.receive(on: loop) { [unowned self] in self.intervalSynced($0) }
    }

    /// The journal segment after the recovered ones, and a snapshot of the recovered state
    /// naming it; returns the snapshot's size.
    private func startJournal(_ state: RecoveredState, now: Int64) throws(StateError) -> Int {
        journal = try directory.openSegment(state.nextSegment)
        acknowledgedBytes = journal?.writtenBytes ?? 0
        // The recovered snapshot's sequence carries over: the state may hold more than it (the
        // journal replayed on top), and replaying from the next sequence is harmless.
        let snapshot = StateSnapshot(takenAt: now, journalSegment: state.nextSegment, map: state.map, panic: state.panic,
                                     checkin: state.checkin, replicatedSequence: state.replicatedSequence)
        let bytes = SnapshotCodec.encode(snapshot)
        try directory.writeSnapshot(bytes, segment: state.nextSegment)
        _ = try directory.removeObsolete(before: state.nextSegment, liveStreams: Set(snapshot.streams.map(\.id)))
        return bytes.count
    }

    private static func describe<T>(_ path: String, _ body: () throws(StateError) -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw PersistenceError("state directory \(path): \(error)")
        }
    }

    // MARK: ChangeLog

    func refusalRetryAfterMs() -> Int64? {
        guard var current = outage else { return nil }
        current.refused += 1
        outage = current
        return current.retryAfterMs(nowMs: monotonicMilliseconds())
    }

    func append(_ record: JournalRecord) {
        // During an outage only the tick's records come here (writes are refused before they
        // change anything): stream ends and removals that follow from time, which a restart
        // derives again and the snapshot that ends the outage holds. They are dropped.
        guard keepsJournal, let journal else { return }
        journal.append(record)
        journalStats.records += 1
        if record.durability == .critical || policy == .always { syncDue = true }
        if unsyncedSinceMs == nil { unsyncedSinceMs = monotonicMilliseconds() }
    }

    /// One write of the turn's records, and one fdatasync when any of them needs it (group
    /// commit). False when they could not be recorded: none of them may be acknowledged.
    func commitTurn() -> Bool {
        defer { failedThisTurn = false }
        guard let journal else { return !failedThisTurn }
        guard journal.pendingBytes > 0 || syncDue else { return true }
        do throws(StateError) {
            try writeJournal(journal)
            if syncDue {
                try syncJournal(journal)
                syncDue = false
                unsyncedSinceMs = nil
            }
            acknowledgedBytes = journal.writtenBytes
            return true
        } catch {
            fail(error, during: "journal write")
            return false
        }
    }

    /// The turn's records to the kernel, counted.
    private func writeJournal(_ journal: JournalFile) throws(StateError) {
        let bytes = journal.pendingBytes
        try journal.write()
        if bytes > 0 {
            journalStats.writes += 1
            journalStats.bytes += bytes
        }
    }

    /// fdatasync, counted and timed.
    private func syncJournal(_ journal: JournalFile) throws(StateError) {
        let start = DispatchTime.now().uptimeNanoseconds
        try journal.sync()
        journalStats.fsyncs += 1
        journalStats.fsyncNanoseconds += DispatchTime.now().uptimeNanoseconds - start
    }

    // MARK: outages

    /// The journal could not be written: give up its segment (cut back to what was acknowledged,
    /// so no refused record is replayed at the next start) and refuse changes until a retry
    /// succeeds. After a failed fsync the segment cannot be trusted anyway (the kernel may have
    /// dropped the pages and reports that once): the retry's snapshot re-records the state.
    private func fail(_ error: StateError, during what: String) {
        guard let journal else { return }
        let cut = journal.abandon(keeping: acknowledgedBytes)
        self.journal = nil
        syncDue = false
        unsyncedSinceMs = nil
        failedThisTurn = true
        if !cut { logger.error("could not cut the failed journal segment back to its acknowledged records") }
        begin(outage: error, during: what, resumeSegment: journal.segment + 1)
    }

    private func begin(outage error: StateError, during what: String, resumeSegment: UInt64) {
        count(error)
        outages += 1
        outage = StorageOutage(cause: "\(what): \(error.withoutPath)", resumeSegment: resumeSegment, nowMs: monotonicMilliseconds())
        logger.error("state unavailable: changes are refused until the disk takes writes again; reads and live events go on",
                     metadata: ["during": "\(what)", "kind": "\(error.storageErrorKind)", "error": "\(error.withoutPath)"])
    }

    private func count(_ error: StateError) {
        storageErrors[error.storageErrorKind, default: 0] += 1
    }

    /// Once the retry is due: a new journal segment (its header written and synced: the cheap
    /// test of the disk), then a snapshot of the state in memory naming that segment, written
    /// off the loop. Only when the snapshot is in place are changes recorded again, in the new
    /// segment: a restart then finds the snapshot plus everything acknowledged after it.
    /// Changes stay refused while it is written, so it holds exactly the state in memory.
    private func retryIfDue(map: MapHub, now: Int64) {
        guard var current = outage, current.isDue(nowMs: now), snapshots.isIdle else { return }
        let segment: JournalFile
        do throws(StateError) {
            segment = try directory.openSegment(current.resumeSegment)
            try segment.write()
            try segment.sync()
        } catch {
            count(error)
            current.attemptFailed(nowMs: now)
            outage = current
            return
        }
        current.attempting = true
        outage = current
        snapshots.begin(segment: current.resumeSegment, map: map, nowMs: now) { [unowned self] written in
            self.retryFinished(written, segment: segment)
        }
    }

    private func retryFinished(_ written: Bool, segment: JournalFile) {
        guard var current = outage else { return }
        let now = monotonicMilliseconds()
        guard written else {
            segment.abandon(keeping: segment.writtenBytes)
            current.attemptFailed(nowMs: now)
            outage = current
            return
        }
        journal = segment
        acknowledgedBytes = segment.writtenBytes
        outage = nil
        logger.error("state writable again: changes are recorded and acknowledged again",
                     metadata: ["outage_s": "\((now - current.sinceMs) / 1000)", "refused": "\(current.refused)",
                                "segment": "\(segment.segment)", "cause": "\(current.cause)"])
    }

    // MARK: timer

    /// Every server tick: the interval fsync, and the snapshot schedule (or, during an outage,
    /// the retry).
    func tick(map: MapHub, panic: PanicHub, checkin: CheckinHub) {
        let now = monotonicMilliseconds()
        if outage != nil {
            retryIfDue(map: map, now: now)
        } else {
            if case .interval(let ms) = policy, let since = unsyncedSinceMs, now - since >= ms, let journal, !intervalSync.running {
                // Off the loop: an fdatasync takes milliseconds (benchmarks/fsync_latency.py),
                // and on the loop it held every update and event of those
                // milliseconds back (docs/BENCHMARKS.md, "Panic latency under load"). Everything
                // written so far is covered; what is appended meanwhile sets `unsyncedSinceMs`
                // again and waits for the next one. Critical records and `always` are still synced
                // on the loop, before their replies (`commitTurn`).
                do throws(StateError) {
                    try writeJournal(journal)
                    try intervalSync.start(journal)
                    // Not before: a failed start cuts the segment back to what was acknowledged,
                    // without this turn's records (they are taken back).
                    acknowledgedBytes = journal.writtenBytes
                    unsyncedSinceMs = nil
                } catch {
                    fail(error, during: "journal fsync")
                }
            }
            if snapshots.isDue(nowMs: now), let segment = rotateJournal() {
                snapshots.begin(segment: segment, map: map, nowMs: now)
            }
        }
        snapshots.advance(map: map, panic: panic, checkin: checkin, kept: keptAnswers)
    }

    /// The interval sync's outcome, on the loop. A failure fails the segment it synced if that is
    /// still the open one (the sync ran on a descriptor of its own, so the loop's descriptor sees
    /// the same error at its next sync: a rotated segment's closing sync has already reported it).
    private func intervalSynced(_ outcome: IntervalSync.Outcome) {
        intervalSync.handled()
        switch outcome.result {
        case .success(let ns):
            journalStats.fsyncs += 1
            journalStats.backgroundFsyncs += 1
            journalStats.fsyncNanoseconds += ns
        case .failure(let error):
            guard let journal, journal.segment == outcome.segment else { return count(error) }
            fail(error, during: "journal fsync")
        }
    }

    /// Moves the journal to a new segment, everything before it synced first, so that a crash at
    /// any point leaves a snapshot plus journal covering every acknowledged change. Nil when it
    /// failed (an outage has begun).
    private func rotateJournal() -> UInt64? {
        guard let journal else { return nil }
        let segment = journal.segment + 1
        do throws(StateError) {
            try writeJournal(journal)
            try syncJournal(journal)
            unsyncedSinceMs = nil
            acknowledgedBytes = journal.writtenBytes
            let next = try directory.openSegment(segment)
            try journal.close()
            self.journal = next
            acknowledgedBytes = next.writtenBytes
        } catch {
            fail(error, during: "journal rotation")
            return nil
        }
        return segment
    }

    // MARK: shutdown

    /// Graceful stop: the journal synced, and a complete snapshot written synchronously, so the
    /// next start has nothing to replay. During an outage the snapshot is tried all the same (the
    /// disk may have room by now); if it fails, the next start recovers from the files as they
    /// were when the outage began, which hold every acknowledged change.
    func shutdown(map: MapHub, panic: PanicHub, checkin: CheckinHub) {
        snapshots.waitForRunningWrite()
        let segment = rotateJournal() ?? outage?.resumeSegment
        guard let segment else { return }
        do {
            var final = StateSnapshot(takenAt: V1Application.wallClockMs(), journalSegment: segment, map: map, panic: panic,
                                      checkin: checkin, replicatedSequence: replicatedSequence())
            final.keptAnswers = keptAnswers()
            let bytes = SnapshotCodec.encode(final)
            try directory.writeSnapshot(bytes, segment: segment)
            _ = try directory.removeObsolete(before: segment, liveStreams: Set(final.streams.map(\.id)))
            try journal?.close()
            logger.info("final snapshot written", metadata: ["segment": "\(segment)", "bytes": "\(bytes.count)"])
        } catch {
            logger.error("final snapshot failed; the journal holds the state", metadata: ["error": "\(error)"])
        }
        _ = lock
    }
}

/// A state directory problem that stops start-up, said plainly.
public struct PersistenceError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
