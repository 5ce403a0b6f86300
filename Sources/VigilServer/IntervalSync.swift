import CLinux
import Dispatch
import Glibc
import VigilLoop
import VigilState

/// The `fsync: interval` policy's periodic fdatasync, off the loop thread.
///
/// Why: an fdatasync of the journal takes milliseconds (median 3.7 ms, up to ~15 ms on this
/// project's machine: benchmarks/fsync_latency.py, and `perf trace` of a loaded vigild), and run by the loop it held every read, update and event of those
/// milliseconds back: with 10,000 panic updates a second, the p99 of update-to-watcher followed
/// the disk (docs/BENCHMARKS.md, "Panic latency under load"). The interval policy promises only
/// that a power cut loses at most about that interval of acknowledged pin writes and locations,
/// so its sync need not stand between a turn and its replies; critical records and the `always`
/// policy are synced on the loop before their replies, as before (`Persistence.commitTurn`).
///
/// How: `start` opens the segment's file again (a descriptor of its own, so a rotation closing
/// the loop's descriptor cannot pull this one away, and a writeback error is reported to both)
/// and a serial queue runs fdatasync on it, then posts the outcome to `outcomes`, which the loop
/// reads in its next turn. One sync at a time: while one runs, the next interval's waits.
final class IntervalSync {
    struct Outcome: Sendable {
        let segment: UInt64
        /// The sync's duration in ns, or why it failed.
        let result: Result<UInt64, StateError>
    }

    let outcomes: Inbox<Outcome>
    private let queue = DispatchQueue(label: "vigil-journal-sync", qos: .utility)
    /// A sync was started and its outcome has not been handled yet (loop thread only).
    private(set) var running = false

    init() throws {
        outcomes = try Inbox()
    }

    /// Starts an fdatasync of everything written to `journal` so far. Throws when the file cannot
    /// be opened again (it is the open segment: that is a failing disk, treated as a failed sync).
    func start(_ journal: JournalFile) throws(StateError) {
        let path = journal.path, segment = journal.segment
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .system(operation: "open", path: path, errno: errno) }
        running = true
        let outcomes = self.outcomes
        queue.async {
            // The sync's own CPU work (allocating and submitting the dirty pages) must not take
            // the loop's: lowest priority for this thread, as the snapshot writer.
            _ = vigil_lower_thread_priority()
            let start = DispatchTime.now().uptimeNanoseconds
            var rc = fdatasync(fd)
            while rc != 0 && errno == EINTR { rc = fdatasync(fd) }
            let code = errno
            Glibc.close(fd)
            let result: Result<UInt64, StateError> = rc == 0
                ? .success(DispatchTime.now().uptimeNanoseconds - start)
                : .failure(.system(operation: "fdatasync", path: path, errno: code))
            outcomes.post(Outcome(segment: segment, result: result))
        }
    }

    /// The loop took the outcome: the next interval may start another.
    func handled() {
        running = false
    }
}
