import VigilCore
import VigilGeo

/// The view of one pin's history from one area (and viewer position, for pins with a range):
/// which of its changes a subscriber of that area hears about, and as what.
///
/// Change (transition) `i` takes the pin from version i-1 to version i; change 0 is the create,
/// from "no pin". A change *touches* the area when the pin is visible (exists, is inside and, with
/// a range, reaches the viewer) before or after it, and then the server owes the subscriber exactly one event:
///
/// | before  | after   | event |
/// | ---     | ---     | --- |
/// | outside | inside  | `added` |
/// | inside  | inside  | `updated` |
/// | inside  | outside | `removed(moved)` |
/// | inside  | removed | `removed(deleted)`, or `removed(flagged)` when a vote removed it |
struct PinTransitions {
    let versions: [PinVersion]
    let area: GeoArea
    /// The subscription's viewer position (nil: none, so pins with a range are never visible).
    var viewer: GeoPoint? = nil

    var count: Int { versions.count }

    func isInside(_ version: Int) -> Bool {
        version >= 0 && version < versions.count && versions[version].isInside(area, viewer: viewer)
    }

    /// The event change `i` owes a subscriber of `area`; nil when it does not touch the area.
    func expectedKind(_ i: Int) -> PinEventKind? {
        guard i >= 0, i < versions.count else { return nil }
        let before = isInside(i - 1)
        let after = isInside(i)
        switch (before, after) {
        case (false, true): return .added
        case (true, true): return .updated
        case (true, false):
            guard versions[i].deleted else { return .removed(.moved) }
            return isVote(i) ? .removed(.flagged) : .removed(.deleted)
        case (false, false): return nil
        }
    }

    /// Change `i` as a subscriber's event names it: the version its pin object shows is the
    /// change's own, except for `removed(deleted)`, whose object is the state before the delete.
    static func changeIndex(kind: PinEventKind, observedVersion: Int) -> Int {
        kind == .removed(.deleted) ? observedVersion + 1 : observedVersion
    }

    /// The change indexes in `range` that touch the area, ascending.
    func touching(in range: Range<Int>) -> [Int] {
        range.filter { expectedKind($0) != nil }
    }

    /// The first index whose op was sent strictly after `ns` (sends increase along versions).
    func firstSentAfter(_ ns: UInt64) -> Int {
        partition { versions[$0].sendNs > ns }
    }

    /// The number of versions sent at or before `ns`: those that may have been applied by then.
    func sentAtOrBefore(_ ns: UInt64) -> Int {
        firstSentAfter(ns)
    }

    /// The number of versions acknowledged strictly before `ns`: those certainly applied by then.
    func ackedBefore(_ ns: UInt64) -> Int {
        partition { versions[$0].ackNs >= ns }
    }

    /// The first index for which `isAfter` holds; `isAfter` must be false then true along the
    /// versions (true for all from some index on).
    private func partition(_ isAfter: (Int) -> Bool) -> Int {
        var low = 0
        var high = versions.count
        while low < high {
            let mid = (low + high) / 2
            if isAfter(mid) { high = mid } else { low = mid + 1 }
        }
        return low
    }

    // MARK: - Words for error messages

    private func isVote(_ i: Int) -> Bool {
        i > 0 && versions[i].votes > versions[i - 1].votes
    }

    /// "update into the area", "vote inside the area", ...: what change `i` was, for a person.
    func describe(_ i: Int) -> String {
        guard i >= 0, i < versions.count else { return "no such change" }
        let op: String
        if i == 0 {
            op = "create"
        } else if versions[i].deleted {
            op = isVote(i) ? "flagging vote" : "delete"
        } else {
            op = isVote(i) ? "vote" : "update"
        }
        switch expectedKind(i) {
        case .added?: return "\(op) into the area"
        case .removed(.moved)?: return "\(op) out of the area"
        case .updated?, .removed?: return "\(op) inside the area"
        case .expired?, nil: return "\(op) outside the area"
        }
    }

    static func name(_ kind: PinEventKind) -> String {
        switch kind {
        case .added: return "added"
        case .updated: return "updated"
        case .removed(let reason): return "removed(\(reason.rawValue))"
        case .expired: return "expired"
        }
    }
}
