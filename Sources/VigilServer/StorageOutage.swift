import VigilState

/// A time when changes cannot be recorded (a full disk, an I/O error): since when, why, and when
/// `Persistence` next tries the disk again (docs/DURABILITY.md, "When the disk fails").
///
/// The retries back off from 1 s to 30 s: a disk that an operator is clearing should be found
/// again within seconds, and one that stays full costs one small write every half minute.
struct StorageOutage {
    static let firstDelayMs: Int64 = 1_000
    static let maxDelayMs: Int64 = 30_000
    /// What a writer is told to wait at least, while a retry is being written (a snapshot).
    static let minRetryAfterMs: Int64 = 250

    let sinceMs: Int64
    /// The first error, for the log line of the recovery (never a path).
    let cause: String
    /// The segment the journal starts again with when the disk takes writes again.
    let resumeSegment: UInt64
    private(set) var delayMs = firstDelayMs
    private(set) var nextAttemptMs: Int64
    /// A retry is under way (its snapshot being written): no second one starts.
    var attempting = false
    /// Changes refused since the outage began (for the recovery's log line).
    var refused = 0

    init(cause: String, resumeSegment: UInt64, nowMs: Int64) {
        self.cause = cause
        self.resumeSegment = resumeSegment
        sinceMs = nowMs
        nextAttemptMs = nowMs + Self.firstDelayMs
    }

    func isDue(nowMs: Int64) -> Bool { !attempting && nowMs >= nextAttemptMs }

    /// The retry failed: wait twice as long (up to the maximum) before the next one.
    mutating func attemptFailed(nowMs: Int64) {
        attempting = false
        delayMs = min(delayMs * 2, Self.maxDelayMs)
        nextAttemptMs = nowMs + delayMs
    }

    /// What a refused writer is told to wait: until the next retry of the disk.
    func retryAfterMs(nowMs: Int64) -> Int64 {
        max(nextAttemptMs - nowMs, Self.minRetryAfterMs)
    }
}
