import CLinux
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
    /// fdatasync at most every N ms. Panic start/status/end/invite/revoke are synced before their reply anyway.
    case interval(Int64)
    /// Never fsync (the kernel writes back when it likes); panic's critical records still are.
    case off

    init(_ name: String, intervalMs: Int) {
        switch name {
        case "always": self = .always
        case "off": self = .off
        default: self = .interval(Int64(intervalMs))
        }
    }
}

/// The glue between the live hubs and VigilState's files, on the loop thread.
///
/// - Journal: every acknowledged mutation is appended in the same loop turn as its reply, and the
///   journal is written to the kernel (`write`) before that turn's replies are flushed, so an
///   acknowledged write survives the process being killed whatever the fsync policy; the policy
///   only decides what a power loss can take. Critical records (panic start, status, end, invite,
///   revoke) are fdatasynced before their reply in every policy.
/// - Snapshots: every `snapshot_interval_s` the journal moves to a new segment N, then the pins
///   are encoded a slice per tick (so the loop never stalls for long and no copy-on-write copy of
///   a million pins is ever made), and the finished bytes are written, fsynced and renamed on a
///   background thread. Replay is idempotent, so records in segment N that the snapshot already
///   reflects are harmless. Once the snapshot is durable, older segments and snapshots go.
final class Persistence {
    let directory: StateDirectory
    private let lock: StateLock
    let policy: FsyncPolicy
    private let logger: Logger
    private var journal: JournalFile
    private var criticalPending = false
    private var unsyncedSinceMs: Int64?
    private let snapshotIntervalMs: Int64
    private var nextSnapshotMs: Int64
    private var job: Job?
    private let background = BackgroundResult()
    /// Pins encoded per timer tick while a snapshot is being built (about 2–3 ms of work).
    static let pinsPerSlice = 2_000

    private struct Job {
        var ids: [PinID]
        var position = 0
        var writer: SnapshotWriter
        var pinCount = 0
        let segment: UInt64
        let startedMs: Int64
        var writing = false
    }

    /// The state found in the directory, as hubs.
    let recovered: RecoveredState

    /// Opens (creating) the directory, takes its lock, recovers the state, opens a new journal
    /// segment and writes a fresh snapshot of what was recovered. Any failure stops start-up.
    init(path: String, policy: FsyncPolicy, snapshotIntervalSeconds: Int, pinSettings: PinSettings,
         panicSettings: PanicSettings, logger: Logger) throws {
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
            try directory.removeObsolete(before: state.nextSegment)
        }
        recovered = state
        snapshotIntervalMs = Int64(snapshotIntervalSeconds) * 1000
        nextSnapshotMs = monotonicMilliseconds() + snapshotIntervalMs
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

    // MARK: journal

    /// Appends a record for a mutation applied in this turn. `critical` records are synced
    /// before this turn's replies whatever the policy.
    func record(_ record: JournalRecord, critical: Bool = false) {
        journal.append(record)
        if critical || policy == .always { criticalPending = true }
        if unsyncedSinceMs == nil { unsyncedSinceMs = monotonicMilliseconds() }
    }

    /// End of the loop turn, before replies are flushed: hand the turn's records to the kernel
    /// (one write), and fdatasync when the policy or a critical record asks for it (group commit).
    func beforeFlush() {
        guard journal.pendingBytes > 0 || criticalPending else { return }
        do {
            try journal.write()
            if criticalPending {
                try journal.sync()
                criticalPending = false
                unsyncedSinceMs = nil
            }
        } catch {
            fatalStorage("journal write failed", error)
        }
    }

    /// A write that cannot be made durable must not be acknowledged: stop now, before this turn's
    /// replies go out. The next start recovers everything acknowledged so far (systemd restarts us).
    private func fatalStorage(_ what: String, _ error: Error) -> Never {
        logger.critical("\(what); stopping before acknowledging anything more", metadata: ["error": "\(error)"])
        exit(74)  // EX_IOERR
    }

    // MARK: timer

    /// Every server tick: interval fsync, and the snapshot schedule.
    func tick(map: MapHub, panic: PanicHub) {
        let now = monotonicMilliseconds()
        if case .interval(let ms) = policy, let since = unsyncedSinceMs, now - since >= ms {
            do {
                try journal.write()
                try journal.sync()
                unsyncedSinceMs = nil
            } catch {
                fatalStorage("journal fsync failed", error)
            }
        }
        if job == nil, now >= nextSnapshotMs { startSnapshot(map: map, now: now) }
        if job != nil { advanceSnapshot(map: map, panic: panic, now: now) }
    }

    private func startSnapshot(map: MapHub, now: Int64) {
        let segment = journal.segment + 1
        do {
            // Everything before the new segment is on disk before the snapshot that replaces it is
            // started, so a crash at any point leaves snapshot + journal covering every ack.
            try journal.write()
            try journal.sync()
            unsyncedSinceMs = nil
            let next = try directory.openSegment(segment)
            try journal.close()
            journal = next
        } catch {
            fatalStorage("journal rotation failed", error)
        }
        job = Job(ids: map.pinIDs, writer: SnapshotWriter(takenAt: V1Application.wallClockMs(), journalSegment: segment),
                  segment: segment, startedMs: now)
    }

    private func advanceSnapshot(map: MapHub, panic: PanicHub, now: Int64) {
        // Take the job out of `self` while it grows: a second reference to the snapshot buffer
        // would make every append copy all of it (copy-on-write).
        guard var current = job.take() else { return }
        if current.writing {
            guard let result = background.take() else {
                job = current
                return
            }
            nextSnapshotMs = now + snapshotIntervalMs
            switch result {
            case .success(let bytes):
                logger.info("snapshot written", metadata: ["segment": "\(current.segment)", "bytes": "\(bytes)",
                                                           "pins": "\(current.pinCount)", "ms": "\(now - current.startedMs)"])
            case .failure(let error):
                // The journal still holds everything since the last good snapshot; try again next time.
                logger.error("snapshot failed; the journal keeps the state until the next attempt", metadata: ["error": "\(error)"])
            }
            return
        }
        let end = min(current.position + Self.pinsPerSlice, current.ids.count)
        for i in current.position..<end {
            if let pin = map.store[current.ids[i]] { current.writer.append(pin) }
        }
        current.position = end
        if end == current.ids.count {
            // The rest runs off the loop: the streams are values (a copy is a reference until the
            // hub next changes one), and encoding them, joining the buffer and writing the file
            // would otherwise hold the loop for a good part of a second with a large state.
            let streams = panic.exportStreams()
            let handOver = current.writer
            current.writer = SnapshotWriter(takenAt: 0, journalSegment: 0)   // the thread owns the buffer now
            current.pinCount = handOver.pinsWritten
            current.ids = []
            current.writing = true
            let directory = self.directory, segment = current.segment, result = background
            let thread = Thread {
                // Lowest CPU priority for this thread only (Linux applies nice per thread): on a
                // small machine the snapshot must take spare CPU, never the loop's.
                _ = vigil_lower_thread_priority()
                var writer = handOver
                for stream in streams { writer.append(stream) }
                let bytes = writer.finish()
                do throws(StateError) {
                    try directory.writeSnapshot(bytes, segment: segment)
                    // Older segments and snapshots go (the previous snapshot and the journal since
                    // it stay, as the fallback); this reads the previous snapshot, so not on the loop.
                    try directory.removeObsolete(before: segment)
                    result.put(.success(bytes.count))
                } catch {
                    result.put(.failure(error))
                }
            }
            thread.name = "vigil-snapshot"
            thread.start()
        }
        job = current
    }

    // MARK: shutdown

    /// Graceful stop: the journal synced, and a complete snapshot written synchronously, so the
    /// next start has nothing to replay.
    func shutdown(map: MapHub, panic: PanicHub) {
        while job?.writing == true, background.take() == nil { usleep(10_000) }  // let a running write finish
        let segment = journal.segment + 1
        do {
            try journal.write()
            try journal.sync()
            let next = try directory.openSegment(segment)
            try journal.close()
            journal = next
            let bytes = SnapshotCodec.encode(StateSnapshot(takenAt: V1Application.wallClockMs(), journalSegment: segment, map: map, panic: panic))
            try directory.writeSnapshot(bytes, segment: segment)
            try directory.removeObsolete(before: segment)
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

/// The background snapshot write's outcome, handed to the loop thread.
private final class BackgroundResult: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Result<Int, StateError>?

    func put(_ result: Result<Int, StateError>) {
        lock.lock()
        value = result
        lock.unlock()
    }

    func take() -> Result<Int, StateError>? {
        lock.lock()
        defer { lock.unlock() }
        let v = value
        value = nil
        return v
    }
}
