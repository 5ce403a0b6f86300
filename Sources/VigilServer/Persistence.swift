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
}

/// The local journal and the snapshots, on the loop thread: the `ChangeLog` of a single node.
///
/// - Journal: every change is appended in the turn that applied it, and the turn's records are
///   written to the kernel (`write`) in `commitTurn`, before that turn's replies are flushed, so
///   an acknowledged change survives the process being killed whatever the policy; the policy
///   only decides what a power loss can take. Records whose `Durability` is critical are
///   fdatasynced before their reply in every policy.
/// - Snapshots: see `SnapshotSchedule`.
final class Persistence: ChangeLog {
    let directory: StateDirectory
    private let lock: StateLock
    let policy: FsyncPolicy
    private let logger: Logger
    private var journal: JournalFile
    /// A record of this turn must be fsynced before its reply (critical, or policy `always`).
    private var syncDue = false
    private var unsyncedSinceMs: Int64?
    private var snapshots: SnapshotSchedule
    private(set) var journalStats = JournalStats()
    var snapshotStats: SnapshotStats { snapshots.stats }

    /// The state found in the directory, as hubs.
    let recovered: RecoveredState

    /// Opens (creating) the directory, takes its lock, recovers the state, opens a new journal
    /// segment and writes a fresh snapshot of what was recovered. Any failure stops start-up.
    init(path: String, policy: FsyncPolicy, snapshotIntervalSeconds: Int, pinSettings: PinSettings,
         panicSettings: PanicSettings, logger: Logger, loop: EventLoop) throws {
        self.policy = policy
        self.logger = logger
        directory = try Self.describe(path) { () throws(StateError) in try StateDirectory(path: path) }
        lock = try Self.describe(path) { [directory] () throws(StateError) in try StateLock(directory) }
        let now = V1Application.wallClockMs()
        let state = try Self.describe(path) { [directory] () throws(StateError) in
            try directory.recover(pinSettings: pinSettings, panicSettings: panicSettings, now: now)
        }
        for line in state.logLines { logger.notice("\(line)", metadata: ["state": "\(path)"]) }
        if let corruption = state.journal.corruption {
            throw PersistenceError("state directory \(path): the journal is damaged before its end (\(corruption)); refusing to start with part of it. Move the damaged segment away to start from what precedes it, or restore a backup.")
        }
        if state.snapshotFile == nil && !state.snapshotFallbacks.isEmpty {
            throw PersistenceError("state directory \(path): every snapshot is damaged (\(state.snapshotFallbacks.joined(separator: "; "))); refusing to start without one.")
        }
        journal = try Self.describe(path) { [directory, state] () throws(StateError) in try directory.openSegment(state.nextSegment) }
        let snapshot = StateSnapshot(takenAt: now, journalSegment: state.nextSegment, map: state.map, panic: state.panic)
        let bytes = SnapshotCodec.encode(snapshot)
        try Self.describe(path) { [directory, state] () throws(StateError) in
            try directory.writeSnapshot(bytes, segment: state.nextSegment)
            _ = try directory.removeObsolete(before: state.nextSegment, liveStreams: Set(snapshot.streams.map(\.id)))
        }
        recovered = state
        snapshots = try SnapshotSchedule(directory: directory, intervalSeconds: snapshotIntervalSeconds, logger: logger, loop: loop)
        logger.info("state ready", metadata: ["directory": "\(path)", "fsync": "\(policy)", "segment": "\(state.nextSegment)",
                                              "snapshot_bytes": "\(bytes.count)"])
    }

    private static func describe<T>(_ path: String, _ body: () throws(StateError) -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw PersistenceError("state directory \(path): \(error)")
        }
    }

    // MARK: ChangeLog

    func append(_ record: JournalRecord) {
        journal.append(record)
        journalStats.records += 1
        if record.durability == .critical || policy == .always { syncDue = true }
        if unsyncedSinceMs == nil { unsyncedSinceMs = monotonicMilliseconds() }
    }

    /// One write of the turn's records, and one fdatasync when any of them needs it (group commit).
    func commitTurn() {
        guard journal.pendingBytes > 0 || syncDue else { return }
        do {
            try writeJournal()
            if syncDue {
                try syncJournal()
                syncDue = false
                unsyncedSinceMs = nil
            }
        } catch {
            fatalStorage("journal write failed", error)
        }
    }

    /// The turn's records to the kernel, counted.
    private func writeJournal() throws(StateError) {
        let bytes = journal.pendingBytes
        try journal.write()
        if bytes > 0 {
            journalStats.writes += 1
            journalStats.bytes += bytes
        }
    }

    /// fdatasync, counted and timed.
    private func syncJournal() throws(StateError) {
        let start = DispatchTime.now().uptimeNanoseconds
        try journal.sync()
        journalStats.fsyncs += 1
        journalStats.fsyncNanoseconds += DispatchTime.now().uptimeNanoseconds - start
    }

    /// A change that cannot be made durable must not be acknowledged: stop now, before this turn's
    /// replies go out. The next start recovers everything acknowledged so far (systemd restarts us).
    private func fatalStorage(_ what: String, _ error: any Error) -> Never {
        logger.critical("\(what); stopping before acknowledging anything more", metadata: ["error": "\(error)"])
        exit(74)  // EX_IOERR
    }

    // MARK: timer

    /// Every server tick: the interval fsync, and the snapshot schedule.
    func tick(map: MapHub, panic: PanicHub) {
        let now = monotonicMilliseconds()
        if case .interval(let ms) = policy, let since = unsyncedSinceMs, now - since >= ms {
            do {
                try writeJournal()
                try syncJournal()
                unsyncedSinceMs = nil
            } catch {
                fatalStorage("journal fsync failed", error)
            }
        }
        if snapshots.isDue(nowMs: now) {
            snapshots.begin(segment: rotateJournal(), map: map, nowMs: now)
        }
        snapshots.advance(map: map, panic: panic)
    }

    /// Moves the journal to a new segment, everything before it synced first, so that a crash at
    /// any point leaves a snapshot plus journal covering every acknowledged change.
    private func rotateJournal() -> UInt64 {
        let segment = journal.segment + 1
        do {
            try writeJournal()
            try syncJournal()
            unsyncedSinceMs = nil
            let next = try directory.openSegment(segment)
            try journal.close()
            journal = next
        } catch {
            fatalStorage("journal rotation failed", error)
        }
        return segment
    }

    // MARK: shutdown

    /// Graceful stop: the journal synced, and a complete snapshot written synchronously, so the
    /// next start has nothing to replay.
    func shutdown(map: MapHub, panic: PanicHub) {
        snapshots.waitForRunningWrite()
        let segment = rotateJournal()
        do {
            let final = StateSnapshot(takenAt: V1Application.wallClockMs(), journalSegment: segment, map: map, panic: panic)
            let bytes = SnapshotCodec.encode(final)
            try directory.writeSnapshot(bytes, segment: segment)
            _ = try directory.removeObsolete(before: segment, liveStreams: Set(final.streams.map(\.id)))
            try journal.close()
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
