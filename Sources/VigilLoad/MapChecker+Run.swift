import VigilCore

extension MapChecker {
    /// Checks one pin's events in one epoch against its touching changes (see `MapChecker`).
    mutating func checkRun(_ events: [MapEvent], _ changes: PinTransitions, _ epoch: MapEpoch, _ bounds: Bounds,
                           _ snapshot: SnapshotState, label: String) {
        // Changes certainly applied while the epoch was current.
        var certain = 0..<0
        if let ackLimit = bounds.certainAckBefore {
            let from = changes.firstSentAfter(epoch.replyNs)
            let to = changes.ackedBefore(ackLimit)
            if from < to { certain = from..<to }
        }
        let certainTouching = changes.touching(in: certain)
        result.certainChanges += UInt64(certainTouching.count)
        if events.isEmpty && certainTouching.isEmpty { return }

        var previous: Int?
        var first: Int?
        // The loss before the first event is already reported: do not count it again below.
        var startLost = false
        if case .present(let v0) = snapshot { previous = v0 }
        for event in events {
            guard let i = acceptedChange(event, changes, bounds, label: label) else { continue }
            if let p = previous, i <= p {
                if first == nil, case .present = snapshot {
                    wrongError("\(label): \(MapEventText.event(event)) is not newer than the snapshot's v\(p)")
                } else {
                    wrongError("\(label): \(MapEventText.event(event)) after v\(p) (duplicate or out of order)")
                }
                continue
            }
            if let p = previous {
                for skipped in changes.touching(in: (p + 1)..<i) {
                    lostError("\(label): lost \(MapEventText.change(skipped, changes))")
                }
            } else if changes.expectedKind(i) != .added, case .absent = snapshot {
                lostError("\(label): first event is \(MapEventText.event(event)) but the pin was not in the snapshot (its added was lost)")
                startLost = true
            }
            if first == nil { first = i }
            previous = i
        }

        // Certain changes outside the received run were lost. Those before the first event are
        // covered above when the snapshot fixes the start (the gap after v0) or it is unknown.
        for c in certainTouching {
            switch snapshot {
            case .present(let v0):
                // c <= v0 contradicts the snapshot's timing, reported there.
                if c > v0 && c > (previous ?? v0) { lostError("\(label): lost \(MapEventText.change(c, changes))") }
            case .absent, .unknown:
                if let f = first, let p = previous, c >= f && c <= p { continue }
                if startLost, let f = first, c < f { continue }
                lostError("\(label): lost \(MapEventText.change(c, changes))")
            }
        }
    }

    /// The change an event stands for, when it is a valid one to receive in this epoch; reports
    /// and returns nil otherwise.
    private mutating func acceptedChange(_ event: MapEvent, _ changes: PinTransitions, _ bounds: Bounds,
                                         label: String) -> Int? {
        if event.kind == .expired {
            wrongError("\(label): unexpected pin.expired (did a pin outlive its TTL during the run?)")
            return nil
        }
        guard event.observedVersion >= 0 else {
            wrongError("\(label): \(PinTransitions.name(event.kind)) event without a version stamp")
            return nil
        }
        let i = PinTransitions.changeIndex(kind: event.kind, observedVersion: event.observedVersion)
        guard i < changes.count else {
            wrongError("\(label): \(MapEventText.event(event)) names an unknown version")
            return nil
        }
        guard let expected = changes.expectedKind(i) else {
            wrongError("\(label): \(MapEventText.event(event)) but that \(changes.describe(i)) does not touch the area")
            return nil
        }
        guard expected == event.kind else {
            wrongError("\(label): got \(MapEventText.event(event)), expected \(PinTransitions.name(expected)) (\(changes.describe(i)))")
            return nil
        }
        if changes.versions[i].ackNs < bounds.appliedBefore {
            let before = appliedBeforeText
            wrongError("\(label): stale \(MapEventText.event(event)): acknowledged before \(before)")
            return nil
        }
        return i
    }
}

/// How events and changes are named in the checker's messages.
enum MapEventText {
    /// "updated v5": the kind and the change index.
    static func event(_ event: MapEvent) -> String {
        "\(PinTransitions.name(event.kind)) v\(PinTransitions.changeIndex(kind: event.kind, observedVersion: event.observedVersion))"
    }

    /// "updated v5 (vote inside the area)".
    static func change(_ i: Int, _ changes: PinTransitions) -> String {
        let kind = changes.expectedKind(i).map(PinTransitions.name) ?? "no event"
        return "\(kind) v\(i) (\(changes.describe(i)))"
    }
}
