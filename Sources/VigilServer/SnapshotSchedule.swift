import CLinux
import Foundation
import Logging
import VigilCore
import VigilLoop
import VigilState

/// Periodic snapshots that never stall the loop for long.
///
/// Every `snapshot_interval_s` the journal moves to a new segment N (`Persistence` does that and
/// calls `begin`); then the pins are encoded a slice per tick on the loop (no copy-on-write copy
/// of a million pins is ever made, see `SnapshotWriter`) straight into the snapshot's temporary
/// file, 1 MiB at a time (`SnapshotFileWriter`: the whole snapshot is never held in memory),
/// then the panic streams the same way; then the fsync, the rename and the cleanup of older files run on a background
/// thread at the lowest CPU priority, which posts its outcome to an `Inbox` that the loop reads
/// like any other event.
/// Replay is idempotent, so records in segment N that the snapshot already reflects are harmless.
final class SnapshotSchedule {
    /// Pins encoded per timer tick while a snapshot is being built (about 2–3 ms of work).
    static let pinsPerSlice = 2_000
    /// Panic streams encoded per timer tick once the pins are done (a full history of 1,000
    /// locations is some 20 pins' worth).
    static let streamsPerSlice = 100

    /// What the background thread reports.
    struct Outcome: Sendable {
        let takeBacks: Int
        /// The snapshot's bytes and sequence, when `written` wants them.
        let published: ([UInt8], UInt64)?
        let segment: UInt64
        let pins: Int
        let startedMs: Int64
        let result: Result<Int, StateError>
    }

    private struct Job {
        var ids: [PinID]
        var position = 0
        /// Listed once the pins are done.
        var streamIDs: [StreamID]?
        var streamPosition = 0
        var writtenStreams: [StreamID] = []
        let file: SnapshotFileWriter
        let segment: UInt64
        let startedMs: Int64
        let takeBacks: Int
        let replicatedSequence: UInt64?
    }

    private let directory: StateDirectory
    private(set) var stats = SnapshotStats()
    private let logger: Logger
    private let intervalMs: Int64
    private var nextMs: Int64
    /// The snapshot being encoded on the loop, if any.
    private var job: Job?
    /// A snapshot is being written on the background thread.
    private var writing = false
    private let outcomes: Inbox<Outcome>
    private var receiver: InboxReceiver<Outcome>?
    /// Told whether the snapshot being made reached the disk (the retry after an outage waits for it).
    private var completion: ((Bool) -> Void)?
    /// A cluster node's last applied replicated-stream sequence, asked when a snapshot begins and
    /// recorded in it (`StateSnapshot.replicatedSequence`). Asked at `begin`, not at the end: the
    /// slices taken afterwards may include later changes too, which replay from the next sequence
    /// applies again harmlessly (replay is idempotent), whereas a sequence read at the end could
    /// claim changes a slice taken earlier missed. A standalone node keeps the default: nil.
    var replicatedSequence: () -> UInt64? = { nil }
    /// A count that moves whenever state the snapshot may already hold is taken back (a cluster
    /// node's speculative write overtaken or failed, `V1Application+Cluster`). A snapshot during
    /// which it moved may hold a change that never happened: it is followed at once by another.
    var takeBacks: () -> Int = { 0 }
    /// Given each snapshot written (its bytes and cluster sequence), when set: a cluster node
    /// publishes it for nodes that join later (`V1Application+Cluster`). Only snapshots during
    /// which nothing was taken back.
    var written: (([UInt8], UInt64) -> Void)?

    init(directory: StateDirectory, intervalSeconds: Int, logger: Logger, loop: EventLoop) throws {
        self.directory = directory
        self.logger = logger
        intervalMs = Int64(intervalSeconds) * 1000
        nextMs = monotonicMilliseconds() + intervalMs
        outcomes = try Inbox()
        receiver = try outcomes.receive(on: loop) { [unowned self] outcome in self.finished(outcome) }
    }

    func isDue(nowMs: Int64) -> Bool {
        isIdle && nowMs >= nextMs
    }

    /// No snapshot is being encoded or written.
    var isIdle: Bool { job == nil && !writing }

    /// Starts a snapshot that covers everything before journal segment `segment`; `completion`,
    /// if any, learns on the loop whether it was written.
    func begin(segment: UInt64, map: MapHub, nowMs: Int64, completion: ((Bool) -> Void)? = nil) {
        self.completion = completion
        let sequence = replicatedSequence()
        let file: SnapshotFileWriter
        do throws(StateError) {
            file = try SnapshotFileWriter(directory: directory, segment: segment, takenAt: V1Application.wallClockMs(),
                                          replicatedSequence: sequence)
        } catch {
            // Reported like a failed write, in the next turn.
            writing = true
            outcomes.post(Outcome(takeBacks: takeBacks(), published: nil, segment: segment, pins: 0, startedMs: nowMs,
                                  result: .failure(error)))
            return
        }
        job = Job(ids: map.pinIDs, file: file,
                  segment: segment, startedMs: nowMs, takeBacks: takeBacks(), replicatedSequence: sequence)
    }

    /// Encodes the next slice of pins; after the last one, hands the rest to the background thread.
    func advance(map: MapHub, panic: PanicHub, checkin: CheckinHub, kept: () -> [KeptAnswer] = { [] }) {
        guard var current = job.take() else { return }
        let end = min(current.position + Self.pinsPerSlice, current.ids.count)
        for i in current.position..<end {
            if let pin = map.store[current.ids[i]] { current.file.append(pin) }
        }
        current.position = end
        guard end == current.ids.count else {
            job = current
            return
        }
        // Then the streams, a slice per tick as well: handing the thread a copy of them all
        // (`exportStreams`) made the loop's next location on each stream copy its whole history
        // (copy-on-write) while the snapshot was written: a second copy of every trail.
        let streamIDs = current.streamIDs ?? panic.streamIDs
        current.streamIDs = streamIDs
        let streamEnd = min(current.streamPosition + Self.streamsPerSlice, streamIDs.count)
        for i in current.streamPosition..<streamEnd {
            if let stream = panic.stream(streamIDs[i]) {
                current.file.append(stream)
                current.writtenStreams.append(stream.id)
            }
        }
        current.streamPosition = streamEnd
        guard streamEnd == streamIDs.count else {
            job = current
            return
        }
        // The rest runs off the loop: the fsync, the rename and the cleanup (which reads the
        // previous snapshot) would otherwise hold it for a good part of a second.
        writing = true
        let liveStreams = Set(current.writtenStreams)
        let circles = checkin.exportCircles()
        let settlements = checkin.exportSettlements()
        let acks = checkin.exportAcks()
        let keptAnswers = kept()
        let file = current.file
        let directory = self.directory, outcomes = self.outcomes
        let segment = current.segment, startedMs = current.startedMs, pins = file.pinsWritten, takeBacks = current.takeBacks
        let sequence = written == nil ? nil : current.replicatedSequence
        let thread = Thread {
            // Lowest CPU priority for this thread only (Linux applies nice per thread): on a small
            // machine the snapshot must take spare CPU, never the loop's.
            _ = vigil_lower_thread_priority()
            file.appendRest(circles: circles, settlements: settlements, acks: acks, kept: keptAnswers)
            let result: Result<Int, StateError>
            var published: ([UInt8], UInt64)?
            do throws(StateError) {
                let count = try file.finish()
                // A cluster node publishes the snapshot's bytes (`written`): only then are they
                // read back whole, before the cleanup below reads the previous snapshot.
                if let sequence { published = (try directory.readSnapshot(segment: segment), sequence) }
                // Older segments and snapshots go (the previous snapshot and the journal since it
                // stay, as the fallback, scrubbed of the streams removed since); this reads the
                // previous snapshot, so not on the loop.
                try directory.removeObsolete(before: segment, liveStreams: liveStreams)
                result = .success(count)
            } catch {
                published = nil
                result = .failure(error)
            }
            outcomes.post(Outcome(takeBacks: takeBacks, published: published, segment: segment, pins: pins, startedMs: startedMs,
                                  result: result))
        }
        thread.name = "vigil-snapshot"
        thread.start()
    }

    /// On the loop thread, in the turn after the background thread posted.
    private func finished(_ outcome: Outcome) {
        writing = false
        let now = monotonicMilliseconds()
        nextMs = now + intervalMs
        switch outcome.result {
        case .success(let bytes):
            stats.written += 1
            stats.milliseconds += Int(now - outcome.startedMs)
            stats.lastBytes = bytes
            logger.info("snapshot written", metadata: ["segment": "\(outcome.segment)", "bytes": "\(bytes)",
                                                       "pins": "\(outcome.pins)", "ms": "\(now - outcome.startedMs)"])
            if takeBacks() != outcome.takeBacks {
                // It may hold a speculative change taken back since: the next one, at once,
                // replaces it (restore reads the newest).
                nextMs = now
                logger.notice("snapshot superseded at once: a change it may hold was taken back while it was made")
            } else if let (bytes, sequence) = outcome.published {
                written?(bytes, sequence)
            }
        case .failure(let error):
            stats.failures += 1
            // The journal still holds everything since the last good snapshot; try again next time.
            logger.error("snapshot failed; the journal keeps the state until the next attempt", metadata: ["error": "\(error)"])
        }
        if let done = completion.take() {
            if case .success = outcome.result { done(true) } else { done(false) }
        }
    }

    /// At shutdown (the loop has stopped): blocks until a write still running on its thread has
    /// finished, so the final snapshot does not race it.
    func waitForRunningWrite() {
        job.take()?.file.abandon()
        completion = nil
        while writing {
            for outcome in outcomes.wait(timeoutMs: -1) { finished(outcome) }
        }
        receiver?.cancel()
        receiver = nil
    }
}

/// The periodic snapshots since start, for `/metrics`.
struct SnapshotStats {
    var written = 0
    var failures = 0
    /// From the start of encoding to the file renamed into place, summed.
    var milliseconds = 0
    var lastBytes = 0
}
