import Glibc
import VigilState

/// The admin listener's `/state/digest`: the digest of the state this node holds
/// (`StateDigest`), computed on the loop thread and kept, so that requests cannot make the loop
/// spend more than a bounded share of its time on it.
///
/// A digest is O(pins): about 0.1 s of the loop per 100,000 pins on the reference machine
/// (docs/OPERATIONS.md, `vigil-bench state-digest`). A request gets the kept digest when it is
/// younger than `minimumIntervalMs`, or than `costFactor` times what the last computation took,
/// whichever is longer: at most one computation a second, and the loop never spends more than
/// about 1/(costFactor + 1) of its time on digests however often it is asked (a million pins:
/// one computation every 8 s or so). The answer says how old the digest is and when it is of.
struct StateDigestCache {
    static let minimumIntervalMs: Int64 = 1_000
    static let costFactor: Int64 = 10

    struct Entry {
        let digest: StateDigest
        /// The replicated stream's last applied sequence when the digest was taken (nil: a
        /// standalone node). Taken in the same loop turn as the digest, so the two describe one
        /// state: nodes compare digests taken at the same sequence.
        let replicatedSequence: UInt64?
        /// The `now` the digest is of (unix ms): what had expired by then is left out.
        let at: Int64
        /// When it was computed (monotonic ns), and how long that took (ns).
        let computedNs: Int64
        let costNs: Int64
    }

    private(set) var last: Entry?
    /// A cluster node's last applied sequence (the cluster code sets it); nil for a standalone node.
    var replicatedSequence: () -> UInt64? = { nil }
    /// Digests computed since start (the rest of the requests were answered from `last`).
    private(set) var computations = 0

    /// The kept entry if it is still fresh enough at `nowNs`, else a new one from `compute`
    /// (given the wall-clock `wallMs` to take the digest at).
    mutating func entry(nowNs: Int64, wallMs: Int64, compute: (Int64) -> StateDigest) -> Entry {
        if let last, nowNs - last.computedNs < Self.keepNs(costNs: last.costNs) { return last }
        let started = Self.monotonicNanoseconds()
        let digest = compute(wallMs)
        let cost = max(0, Self.monotonicNanoseconds() - started)
        let entry = Entry(digest: digest, replicatedSequence: replicatedSequence(), at: wallMs, computedNs: nowNs, costNs: cost)
        last = entry
        computations += 1
        return entry
    }

    /// How long an entry whose computation took `costNs` is kept.
    static func keepNs(costNs: Int64) -> Int64 {
        max(minimumIntervalMs * 1_000_000, costNs.multipliedReportingOverflow(by: costFactor).partialValue)
    }

    static func monotonicNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) &* 1_000_000_000 &+ Int64(ts.tv_nsec)
    }
}
