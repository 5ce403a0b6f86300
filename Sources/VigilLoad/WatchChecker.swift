/// Checks one watcher's view of one panic stream: every seq exactly once, in order, nothing after
/// the end (docs/PROTOCOL.md, "Watching").
///
/// The contract it holds the server to:
/// - the `ok` reply to `panic.watch` carries `state.seq` = S, the stream's current seq;
/// - without `since`, the next event is S+1;
/// - with `since` = s and no `gap`, the events s+1...S are replayed right after the reply, then
///   the live ones follow: the next event is s+1 either way;
/// - with `"gap":true` nothing is replayed and the next event is S+1. The skipped seqs are
///   *announced*, so they are counted (`announcedGaps`, `skippedByGaps`), not reported as lost;
/// - each seq event (`panic.location`, `panic.status`, `panic.ended`) must be the expected seq.
///   A lower one is a duplicate, a higher one a loss of the seqs between (both errors);
/// - nothing with a seq may follow `panic.ended`;
/// - a watcher that stopped reading (`toleratesConflation`) may see seqs skipped before any event
///   but `panic.ended`: the server replaced its unsent locations by the newest (docs/PROTOCOL.md,
///   "Slow watchers"). Those skips are counted (`conflations`, `conflatedSeqs`); a lower seq is
///   still a duplicate, and a skip right before the end is still a loss (the newest location is
///   never replaced, so the end always follows it).
/// `panic.stale` and `panic.watchers` carry no seq: the caller does not pass them here.
///
/// A value per (watcher, stream), fed on the loop thread; no clock, no I/O.
public struct WatchChecker: Sendable {
    /// Prefix of every error message, e.g. "watcher 17 stream oq8j...".
    public let label: String
    /// The seq the next event must carry; nil while not watching (before the first `ok`, or after
    /// `watchEnded()`).
    public private(set) var nextExpected: UInt64?
    /// Seq of the stream's `panic.ended`, once seen (or announced by an ended `state`).
    public private(set) var endedAt: UInt64?
    /// Seq events received (right or wrong).
    public private(set) var events: UInt64 = 0
    /// Events whose seq was lower than expected.
    public private(set) var duplicates: UInt64 = 0
    /// Seqs skipped without a `gap` announcement.
    public private(set) var lost: UInt64 = 0
    /// Seq events that arrived after `panic.ended`.
    public private(set) var afterEnd: UInt64 = 0
    /// Watch replies with `"gap":true`.
    public private(set) var announcedGaps: UInt64 = 0
    /// Seqs the announced gaps skipped (S - since, summed).
    public private(set) var skippedByGaps: UInt64 = 0
    /// Whether skipped seqs are the server's conflation rather than losses.
    public let toleratesConflation: Bool
    /// Forward jumps taken as conflation, and the seqs they skipped.
    public private(set) var conflations: UInt64 = 0
    public private(set) var conflatedSeqs: UInt64 = 0
    public private(set) var errors: CheckErrors
    /// The highest seq this watcher has accounted for, kept across `watchEnded()` so that a
    /// reconnect can be checked against it.
    private var highWater: UInt64?

    public init(label: String, maxErrors: Int = 8, toleratesConflation: Bool = false) {
        self.label = label
        self.toleratesConflation = toleratesConflation
        self.errors = CheckErrors(limit: maxErrors)
    }

    /// The last seq this watcher has (what to send as `since` when it watches again); nil before
    /// the first accepted watch.
    public var lastSeq: UInt64? { highWater }

    /// The `ok` reply to `panic.watch` arrived. `stateSeq` is `state.seq`, `since` what the request
    /// sent, `gap` the reply's `gap` flag, `stateEnded` whether `state` has `ended`.
    public mutating func watchAccepted(stateSeq: UInt64, since: UInt64?, gap: Bool, stateEnded: Bool = false) {
        if let previous = highWater, stateSeq < previous {
            errors.record("\(label): stream seq went backwards: state.seq \(stateSeq) after seq \(previous)")
        }
        if let since, since > stateSeq {
            // The server should have answered invalid_since; take its state as the truth.
            errors.record("\(label): watch reply state.seq \(stateSeq) is below since \(since)")
            nextExpected = stateSeq &+ 1
        } else if gap {
            announcedGaps += 1
            if let since { skippedByGaps += stateSeq - since }
            nextExpected = stateSeq &+ 1
        } else if let since {
            // s+1...S are replayed before anything live, so the order is still one by one.
            nextExpected = since &+ 1
        } else {
            nextExpected = stateSeq &+ 1
        }
        if stateEnded { endedAt = stateSeq }
        highWater = nextExpected.map { $0 &- 1 }
    }

    /// One event with a seq. `ended` is true for `panic.ended`.
    public mutating func event(seq: UInt64, ended: Bool) {
        events += 1
        guard let expected = nextExpected else {
            errors.record("\(label): seq \(seq) arrived while not watching")
            return
        }
        if let end = endedAt, seq > end {
            afterEnd += 1
            errors.record("\(label): seq \(seq) after the stream ended at seq \(end)")
            return
        }
        if seq < expected {
            duplicates += 1
            errors.record("\(label): duplicate seq \(seq) (expected \(expected))")
            return
        }
        if seq > expected && toleratesConflation && !ended {
            conflations += 1
            conflatedSeqs += seq - expected
        } else if seq > expected {
            lost += seq - expected
            let missing = seq - expected == 1 ? "seq \(expected)" : "seqs \(expected)...\(seq - 1)"
            errors.record("\(label): lost \(missing) (got seq \(seq))")
        }
        nextExpected = seq &+ 1
        highWater = seq
        if ended { endedAt = seq }
    }

    /// The watch is over (unwatched, revoked, or the connection closed): any seq event before the
    /// next accepted watch is an error. `lastSeq` is kept for the `since` of the next watch.
    public mutating func watchEnded() {
        nextExpected = nil
    }
}

/// The sum over many `WatchChecker`s, for the report.
public struct WatchTotals: Sendable {
    public private(set) var watchers = 0
    public private(set) var events: UInt64 = 0
    public private(set) var duplicates: UInt64 = 0
    public private(set) var lost: UInt64 = 0
    public private(set) var afterEnd: UInt64 = 0
    public private(set) var announcedGaps: UInt64 = 0
    public private(set) var skippedByGaps: UInt64 = 0
    public private(set) var conflations: UInt64 = 0
    public private(set) var conflatedSeqs: UInt64 = 0
    public private(set) var errors: CheckErrors

    public init(maxErrors: Int = 20) {
        errors = CheckErrors(limit: maxErrors)
    }

    public mutating func add(_ checker: WatchChecker) {
        watchers += 1
        events += checker.events
        duplicates += checker.duplicates
        lost += checker.lost
        afterEnd += checker.afterEnd
        announcedGaps += checker.announcedGaps
        skippedByGaps += checker.skippedByGaps
        conflations += checker.conflations
        conflatedSeqs += checker.conflatedSeqs
        errors.merge(checker.errors)
    }

    public func summary(name: String = "panic seq") -> CheckSummary {
        CheckSummary(name: name, checked: watchers, errors: errors, counters: [
            ("events", events), ("duplicates", duplicates), ("lost", lost), ("after end", afterEnd),
            ("announced gaps", announcedGaps), ("skipped by gaps", skippedByGaps),
            ("conflations", conflations), ("conflated seqs", conflatedSeqs),
        ])
    }
}
