import VigilCore
import VigilState

/// The changes of this turn that are not recorded yet, each with the state it replaced and the
/// outbox items that report it, so that a turn whose records could not be written
/// (`ChangeLog.commitTurn` false) is taken back before any of it is sent: nobody hears of a
/// change that a restart would not bring back (docs/DURABILITY.md, "When the disk fails").
///
/// Kept only with a change log; costs one dictionary read per state-changing request.
struct PendingChanges {
    /// The state a change replaced: nil when the change created the pin or stream.
    enum Before {
        case pin(PinID, Pin?)
        /// `revocation`: the change cut watchers off (a revoke), who get their watch back.
        case stream(StreamID, PanicStream?, revocation: Bool)
    }

    struct Change {
        let before: Before
        /// Its reply and deliveries in the outbox.
        let items: Range<Int>
    }

    private(set) var changes: [Change] = []
    /// Replies to reads that came after a change in the same turn (a subscribe's pins, a watch's
    /// or resume's stream): they may show it, so they are withdrawn with it.
    private(set) var readers: [Range<Int>] = []

    /// The state `operation` may replace, read before it runs. A creation's is known only from
    /// its record (`note`), and an operation that names no valid id changes nothing.
    static func before(_ operation: ClientOperation, map: MapHub, panic: PanicHub) -> Before? {
        switch operation {
        case .pinUpdate(let id?, _, _), .pinDelete(let id?, _), .pinVote(let id?, _):
            return .pin(id, map.store[id])
        case .panicUpdate(let id?, _, _), .panicStatus(let id?, _, _), .panicEnd(let id?, _, _), .panicInvite(let id?, _):
            return .stream(id, panic.stream(id), revocation: false)
        case .panicRevoke(let id?, _, _):
            return .stream(id, panic.stream(id), revocation: true)
        default:
            return nil
        }
    }

    /// After `operation` was applied: a change if it left a record, a reader if it may show an
    /// earlier change of the turn.
    mutating func note(_ operation: ClientOperation, before: Before?, record: JournalRecord?, items: Range<Int>) {
        if let record {
            switch record {
            case .pinPut(let pin) where before == nil:
                changes.append(Change(before: .pin(pin.id, nil), items: items))
            case .panicStart(let start):
                changes.append(Change(before: .stream(start.id, nil, revocation: false), items: items))
            default:
                if let before { changes.append(Change(before: before, items: items)) }
            }
            return
        }
        guard !changes.isEmpty else { return }
        switch operation {
        case .subscribe, .panicWatch, .panicResume: readers.append(items)
        default: break
        }
    }

    /// Every outbox range to withdraw: the changes' and the readers'.
    var withdrawn: [Range<Int>] { changes.map(\.items) + readers }

    mutating func clear() {
        changes.removeAll(keepingCapacity: true)
        readers.removeAll(keepingCapacity: true)
    }
}
