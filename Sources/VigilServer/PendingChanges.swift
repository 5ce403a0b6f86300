import VigilCore
import VigilState

/// How to take back one change (docs/DURABILITY.md, "When the disk fails"): what the handler that
/// made it knew of the state before. Each is small and holds no storage that the change then
/// mutates (that would make the change copy it: a pin's vote table, a stream's history).
enum Undo: Sendable {
    /// A pin created: remove it (and give its address budget the slot back).
    case pinCreated(PinID)
    /// A pin updated or deleted: put it back as it was.
    case pin(PinID, before: Pin)
    /// A vote: the voter's previous vote (nil: none), and the pin when the vote flagged it away.
    case vote(PinID, voter: UInt64, previous: Int8?, flagged: Pin?)
    /// A stream started: remove it (and give its address budget the slot back).
    case streamStarted(StreamID)
    /// A stream's update, status, end, invitation or revocation.
    case stream(PanicHub.Checkpoint)
    /// A check-in circle created (its checkpoint holds no circle) or changed.
    case circle(CheckinHub.Checkpoint)
    /// A member revoked: the circle, and the circle's streams with their watchers before the
    /// revocation cut the member's (`keepingWatchers`), so both come back together.
    case memberRevoked(CheckinHub.Checkpoint, streams: [PanicHub.Checkpoint])
}

/// The changes of this turn that are not recorded yet, each with its `Undo` and the outbox items
/// that report it (an `UnconfirmedChanges` list: the one the stream path uses too), so that a turn
/// whose records could not be written (`ChangeLog.commitTurn` false) is taken back before any of
/// it is sent: nobody hears of a change that a restart would not bring back. Kept only with a
/// change log.
struct PendingChanges {
    /// Each change's reply and deliveries in the outbox.
    private(set) var changes = UnconfirmedChanges<Range<Int>>()
    private var nextNumber: UInt64 = 1
    /// Replies to reads that came after a change in the same turn (a subscribe's pins, a watch's
    /// or resume's stream): they may show it, so they are withdrawn with it.
    private(set) var readers: [Range<Int>] = []

    /// After `operation` was applied, with the outbox range of what it produced.
    mutating func note(_ operation: ClientOperation, _ outcome: V1Application.Outcome, items: Range<Int>) {
        if outcome.record != nil {
            changes.append(nextNumber, entity: nil, undo: outcome.undo, held: items)
            nextNumber += 1
            return
        }
        guard !changes.isEmpty, Self.readsState(operation) else { return }
        readers.append(items)
    }

    /// Whether a read's reply may show a change made earlier in the same turn (a subscribe's
    /// pins or counts, a watch's or resume's stream, a circle's state): withdrawn with it.
    static func readsState(_ operation: ClientOperation) -> Bool {
        switch operation {
        case .subscribe, .subscribeClusters, .panicWatch, .panicWatchAsMember, .panicResume: return true
        case .checkin(let c): return c.readsState
        case .unsubscribe, .pinCreate, .pinUpdate, .pinDelete, .pinVote, .panicStart, .panicStartE2E, .panicUpdate,
             .panicUpdateSealed, .panicRekey, .panicStatus, .panicEnd, .panicUnwatch, .panicInvite, .panicRevoke, .panicTimer:
            return false
        }
    }

    /// A repeat answered from an answer kept in this turn (`answerFromKept`): withdrawn with it.
    mutating func noteReader(_ items: Range<Int>) {
        readers.append(items)
    }

    /// Every change taken back, newest first (`body` undoes it); then every outbox range to
    /// withdraw: the changes' and the readers'.
    mutating func takeBackAll(_ body: (Undo?) -> Void) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        changes.takeBackAll { undo, items in
            body(undo)
            ranges.append(items)
        }
        return ranges + readers
    }

    mutating func clear() {
        changes.removeAll()
        nextNumber = 1
        readers.removeAll(keepingCapacity: true)
    }
}
