import VigilCore
import VigilGeo

/// Verifies, after a run, that every sampled map subscriber got exactly the events and snapshots
/// the protocol promises, given everything the publishers did (`PinHistory`).
///
/// Time is only known as intervals: an op was applied between its send and its ack, a
/// `subscribe` between its send and its reply. For epoch k (reply ρ, subscribe sent σ) and one
/// pin, the changes the server applied while epoch k was current form a contiguous range of the
/// pin's changes (the server applies a pin's ops in order), so what the subscriber receives for
/// the pin is a contiguous run of the changes that touch the area (`PinTransitions`). The check:
///
/// - each event names a real change that touches the area, with the right kind, not acknowledged
///   before the subscribe was sent (it would belong to the snapshot, not to the epoch);
/// - consecutive events are consecutive touching changes: a skipped one is lost, a repeat or a
///   step back is wrong;
/// - with the pin in the snapshot at version v0, the run starts right after v0 (v0 inside the
///   area, and possible in time: sent before the reply, superseded no earlier than the
///   subscribe); without it, the run starts with `added`;
/// - a change sent after the reply and acknowledged before the epoch ended (`EpochEnd`) was
///   certainly applied inside the epoch: when it touches the area it must be in the run;
/// - the snapshot holds every pin that was inside the area at all versions that may have been
///   current when the subscribe was applied (from the last acknowledged before σ to the last
///   sent before ρ), unless the reply was truncated.
///
/// Anything racy at the edges (an op in flight during a subscribe) may go either way and is not
/// an error. Run it with every publisher stopped and every ack in.
///
/// **Several nodes** (`AckScope.severalNodes`). Above, "acknowledged before the subscribe was
/// sent" means "applied before the server read the subscribe": true on one node, which answers
/// `ok` after applying a change and queueing its events. In a cluster the writer's node answers
/// once the change is in the replicated log, and the subscriber's node applies it when it gets
/// there, before or after that `ok`. What still holds is the log's one order: every node applies
/// every change in it, and a change acknowledged before another was *sent* comes earlier in it.
/// So the subscriber's own deliveries are the clock: once its node has shown it change X (an
/// event, or a snapshot entry), every change acknowledged before X was sent has been applied
/// there too. The bounds become:
///
/// - applied before the subscribe: acknowledged before the send of a change this connection saw
///   in an earlier epoch or in this reply's snapshot (instead of before the subscribe was sent);
/// - certain in the epoch: sent after the reply and acknowledged before the send of the latest
///   change received in the epoch (instead of before the next request was sent). The load client
///   ends a run with a barrier (`MapScenario`: a pin of its own created after every ack, awaited
///   as an event), which makes every change of the run certain in the last epoch.
///
/// Loss (a skipped change between two received ones, or a certain one missing), duplicates,
/// steps back, wrong kinds and changes outside the area are found as on one node.
public struct MapChecker: Sendable {
    /// What a write's `ok` says about the node a subscriber is on.
    public enum AckScope: Sendable, Equatable {
        /// One node: the `ok` went out after the change was applied where the subscriber is.
        case oneNode
        /// Several nodes applying one replicated log in its order: the `ok` says only that the
        /// change is in the log; the subscriber's node may apply it before or after the `ok`.
        case severalNodes
    }

    public let history: PinHistory
    public let scope: AckScope
    public internal(set) var result: MapCheckResult

    public init(history: PinHistory, maxErrors: Int = 20, scope: AckScope = .oneNode) {
        self.history = history
        self.scope = scope
        self.result = MapCheckResult(maxErrors: maxErrors)
    }

    /// What the checker takes as known about one epoch's timing.
    struct Bounds {
        /// Changes acknowledged strictly before this were applied on the subscriber's node before
        /// its subscribe was (0: none known).
        var appliedBefore: UInt64
        /// Changes sent after the reply and acknowledged strictly before this were applied while
        /// the epoch was current, and their events received in it (nil: none certain).
        var certainAckBefore: UInt64?
    }

    /// Checks one subscriber's epochs and adds the outcome to `result`.
    public mutating func check(_ log: SubscriberLog) {
        result.subscribers += 1
        if log.strayEvents > 0 {
            result.wrong += UInt64(log.strayEvents)
            result.errors.record("subscriber \(log.subscriber): \(log.strayEvents) pin events arrived with no current subscription")
        }
        // severalNodes: the latest send of a change this connection has seen applied.
        var seen: UInt64 = 0
        for (index, epoch) in log.epochs.enumerated() {
            result.epochs += 1
            let bounds: Bounds
            switch scope {
            case .oneNode:
                bounds = Bounds(appliedBefore: epoch.subscribeSentNs, certainAckBefore: epoch.certainAckBefore)
            case .severalNodes:
                let snapshotSeen = latestSend(epoch.snapshot.lazy.map { ($0.pin, $0.observedVersion) })
                let eventsSeen = latestSend(epoch.events.lazy.map { ($0.pin, PinTransitions.changeIndex(kind: $0.kind, observedVersion: $0.observedVersion)) })
                bounds = Bounds(appliedBefore: Swift.max(seen, snapshotSeen), certainAckBefore: eventsSeen > 0 ? eventsSeen : nil)
                // A new connection may be on another node, which knows nothing of what this one saw.
                seen = epoch.end == .connectionLost ? 0 : Swift.max(seen, snapshotSeen, eventsSeen)
            }
            check(epoch, bounds, label: "subscriber \(log.subscriber) epoch \(index + 1)")
        }
    }

    /// The latest send time of the known versions among (pin, version index) pairs: once a node
    /// has shown one, it has applied every change acknowledged before that send. 0 for none.
    private func latestSend<S: Sequence>(_ seen: S) -> UInt64 where S.Element == (PinID, Int) {
        var latest: UInt64 = 0
        for (pin, version) in seen {
            guard let track = history.tracks[pin], !track.abandoned, version >= 0, version < track.versions.count else { continue }
            latest = Swift.max(latest, track.versions[version].sendNs)
        }
        return latest
    }

    /// Where the snapshot puts a pin, as far as the checker can rely on it.
    enum SnapshotState {
        case present(Int)
        case absent
        /// Absent from a truncated reply, or listed at an impossible version (already reported).
        case unknown
    }

    private mutating func check(_ epoch: MapEpoch, _ bounds: Bounds, label: String) {
        var eventsByPin: [PinID: [MapEvent]] = [:]
        for event in epoch.events {
            guard let track = history.tracks[event.pin] else {
                result.foreign += 1
                continue
            }
            if track.abandoned {
                result.unchecked += 1
                continue
            }
            result.eventsChecked += 1
            eventsByPin[event.pin, default: []].append(event)
        }

        var snapshot: [PinID: SnapshotState] = [:]
        for entry in epoch.snapshot {
            guard let track = history.tracks[entry.pin] else {
                result.foreign += 1
                continue
            }
            if track.abandoned {
                result.unchecked += 1
                continue
            }
            result.snapshotPins += 1
            if snapshot[entry.pin] != nil {
                snapshotError("\(label): pin \(entry.pin): listed twice in the snapshot")
                continue
            }
            let changes = PinTransitions(versions: track.versions, area: epoch.area, viewer: epoch.viewer)
            let valid = checkSnapshotEntry(entry.observedVersion, changes, epoch, bounds, label: "\(label): pin \(entry.pin)")
            snapshot[entry.pin] = valid ? .present(entry.observedVersion) : .unknown
        }

        for (pin, track) in history.tracks where !track.abandoned {
            let changes = PinTransitions(versions: track.versions, area: epoch.area, viewer: epoch.viewer)
            let pinLabel = "\(label): pin \(pin)"
            var state = snapshot[pin] ?? (epoch.truncated ? .unknown : .absent)
            if case .absent = state, !epoch.truncated, mustBeInSnapshot(changes, epoch, bounds) {
                snapshotError("\(pinLabel): missing from the snapshot (inside the area at every version that may have been current)")
                state = .unknown
            }
            checkRun(eventsByPin[pin] ?? [], changes, epoch, bounds, state, label: pinLabel)
        }
    }

    /// A snapshot entry must show a version that is inside the area and may have been current
    /// when the subscribe was applied. Reports and returns false otherwise.
    private mutating func checkSnapshotEntry(_ v0: Int, _ changes: PinTransitions, _ epoch: MapEpoch, _ bounds: Bounds,
                                             label: String) -> Bool {
        guard v0 >= 0, v0 < changes.count else {
            snapshotError("\(label): snapshot shows unknown version v\(v0)")
            return false
        }
        let version = changes.versions[v0]
        if version.deleted {
            snapshotError("\(label): snapshot shows v\(v0), a removed pin")
            return false
        }
        if !changes.isInside(v0) {
            snapshotError("\(label): snapshot shows v\(v0), which is outside the area or out of the viewer's reach")
            return false
        }
        if version.sendNs > epoch.replyNs {
            snapshotError("\(label): snapshot shows v\(v0), whose op was sent after the reply")
            return false
        }
        if v0 + 1 < changes.count, changes.versions[v0 + 1].ackNs < bounds.appliedBefore {
            let appliedBeforeText = appliedBeforeText
            snapshotError("\(label): snapshot shows stale v\(v0): v\(v0 + 1) was acknowledged before \(appliedBeforeText)")
            return false
        }
        return true
    }

    /// True when every version that may have been current when the subscribe was applied (from
    /// the last one certainly applied before it, `Bounds.appliedBefore`, to the last one sent
    /// before its reply) is inside the area. False when the pin may not have existed yet.
    private func mustBeInSnapshot(_ changes: PinTransitions, _ epoch: MapEpoch, _ bounds: Bounds) -> Bool {
        let certainlyApplied = changes.ackedBefore(bounds.appliedBefore)
        guard certainlyApplied > 0 else { return false }
        let possiblyApplied = changes.sentAtOrBefore(epoch.replyNs)
        for v in (certainlyApplied - 1)..<Swift.max(certainlyApplied, possiblyApplied) where !changes.isInside(v) {
            return false
        }
        return true
    }

    /// How error messages name `Bounds.appliedBefore`.
    var appliedBeforeText: String {
        scope == .oneNode ? "the subscribe was sent" : "a change the subscriber's node had already shown it was sent"
    }

    mutating func lostError(_ message: @autoclosure () -> String) {
        result.lost += 1
        result.errors.record(message())
    }

    mutating func wrongError(_ message: @autoclosure () -> String) {
        result.wrong += 1
        result.errors.record(message())
    }

    private mutating func snapshotError(_ message: @autoclosure () -> String) {
        result.snapshotErrors += 1
        result.errors.record(message())
    }
}
