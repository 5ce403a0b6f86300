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
public struct MapChecker: Sendable {
    public let history: PinHistory
    public internal(set) var result: MapCheckResult

    public init(history: PinHistory, maxErrors: Int = 20) {
        self.history = history
        self.result = MapCheckResult(maxErrors: maxErrors)
    }

    /// Checks one subscriber's epochs and adds the outcome to `result`.
    public mutating func check(_ log: SubscriberLog) {
        result.subscribers += 1
        if log.strayEvents > 0 {
            result.wrong += UInt64(log.strayEvents)
            result.errors.record("subscriber \(log.subscriber): \(log.strayEvents) pin events arrived with no current subscription")
        }
        for (index, epoch) in log.epochs.enumerated() {
            result.epochs += 1
            check(epoch, label: "subscriber \(log.subscriber) epoch \(index + 1)")
        }
    }

    /// Where the snapshot puts a pin, as far as the checker can rely on it.
    enum SnapshotState {
        case present(Int)
        case absent
        /// Absent from a truncated reply, or listed at an impossible version (already reported).
        case unknown
    }

    private mutating func check(_ epoch: MapEpoch, label: String) {
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
            let valid = checkSnapshotEntry(entry.observedVersion, changes, epoch, label: "\(label): pin \(entry.pin)")
            snapshot[entry.pin] = valid ? .present(entry.observedVersion) : .unknown
        }

        for (pin, track) in history.tracks where !track.abandoned {
            let changes = PinTransitions(versions: track.versions, area: epoch.area, viewer: epoch.viewer)
            let pinLabel = "\(label): pin \(pin)"
            var state = snapshot[pin] ?? (epoch.truncated ? .unknown : .absent)
            if case .absent = state, !epoch.truncated, mustBeInSnapshot(changes, epoch) {
                snapshotError("\(pinLabel): missing from the snapshot (inside the area at every version that may have been current)")
                state = .unknown
            }
            checkRun(eventsByPin[pin] ?? [], changes, epoch, state, label: pinLabel)
        }
    }

    /// A snapshot entry must show a version that is inside the area and may have been current
    /// when the subscribe was applied. Reports and returns false otherwise.
    private mutating func checkSnapshotEntry(_ v0: Int, _ changes: PinTransitions, _ epoch: MapEpoch, label: String) -> Bool {
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
        if v0 + 1 < changes.count, changes.versions[v0 + 1].ackNs < epoch.subscribeSentNs {
            snapshotError("\(label): snapshot shows stale v\(v0): v\(v0 + 1) was acknowledged before the subscribe was sent")
            return false
        }
        return true
    }

    /// True when every version that may have been current when the subscribe was applied (from
    /// the last one acknowledged before it was sent to the last one sent before its reply) is
    /// inside the area. False when the pin may not have existed yet.
    private func mustBeInSnapshot(_ changes: PinTransitions, _ epoch: MapEpoch) -> Bool {
        let certainlyApplied = changes.ackedBefore(epoch.subscribeSentNs)
        guard certainlyApplied > 0 else { return false }
        let possiblyApplied = changes.sentAtOrBefore(epoch.replyNs)
        for v in (certainlyApplied - 1)..<Swift.max(certainlyApplied, possiblyApplied) where !changes.isInside(v) {
            return false
        }
        return true
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
