import VigilCore
import VigilState

/// What one change is about: changes on one entity are ordered by their log; changes on two never
/// conflict.
enum ChangeEntity: Hashable {
    case pin(PinID)
    case stream(StreamID)
    case circle(CircleID)
    /// A kept answer (`answerKept`): never a message's own record (it travels after the change it
    /// answers, `ReplicatedLog.change`), so never the entity of a write.
    case keptAnswer

    init(_ record: JournalRecord) {
        switch record {
        case .pinPut(let pin): self = .pin(pin.id)
        case .pinRemove(let id), .pinVote(let id, _, _): self = .pin(id)
        case .panicStart(let start): self = .stream(start.id)
        case .panicEvent(let id, _), .panicInvite(let id, _), .panicRevoke(let id, _), .panicRemove(let id), .panicRekey(let id, _):
            self = .stream(id)
        case .circlePut(let circle): self = .circle(circle.id)
        case .circleRemove(let id): self = .circle(id)
        case .noticeSettled(let s): self = .circle(s.circle)
        case .noticeAcked(let a): self = .circle(a.circle)
        case .answerKept: self = .keptAnswer
        }
    }
}

/// The changes applied here that their log has not confirmed yet, oldest first, each with how to
/// take it back (`Undo`) and what it holds back until then: one list for both logs.
/// - The journal (`PendingChanges`): a turn's changes, whose replies and events wait in the
///   outbox (`Held` is their outbox range); all are taken back, newest first, if the turn could
///   not be recorded.
/// - The replicated stream (`SpeculativeWrites`): a node's writes awaiting the stream, each
///   holding its reply and events; those on one entity are taken back, newest first, when the
///   stream's order overtakes them, and each is settled when the stream hands it back.
///
/// Numbers only grow. The order and the per-entity index are kept here alone: a change is in the
/// index exactly while it is in the list (taken back or not) until it is settled.
struct UnconfirmedChanges<Held> {
    struct Change {
        let number: UInt64
        /// nil on the journal's list (a turn is taken back whole).
        let entity: ChangeEntity?
        /// nil only if a handler gave none: its held answer is withdrawn all the same.
        let undo: Undo?
        var held: Held
        /// Taken back already (its entity's log order overtook it), not settled yet.
        fileprivate(set) var takenBack = false
    }

    /// Oldest first; settled ones become nil until the front is compacted.
    private var slots: [Change?] = []
    private var head = 0
    private var live = 0
    private var byEntity: [ChangeEntity: [UInt64]] = [:]

    var count: Int { live }
    var isEmpty: Bool { live == 0 }

    /// A new change, numbered above every earlier one.
    mutating func append(_ number: UInt64, entity: ChangeEntity?, undo: Undo?, held: Held) {
        precondition(slots.last.flatMap { $0.map(\.number) }.map { $0 < number } ?? true, "numbers only grow")
        slots.append(Change(number: number, entity: entity, undo: undo, held: held))
        live += 1
        if let entity { byEntity[entity, default: []].append(number) }
    }

    subscript(number: UInt64) -> Change? {
        index(of: number).flatMap { slots[$0] }
    }

    /// Changes `number`'s held part in place; false if it is not in the list.
    @discardableResult
    mutating func modify(_ number: UInt64, _ body: (inout Held) -> Void) -> Bool {
        guard let i = index(of: number) else { return false }
        return update(i) { body(&$0.held) }
    }

    /// Whether `number` is the oldest unsettled change on `entity` and was not taken back.
    func isOldestInPlace(_ number: UInt64, on entity: ChangeEntity) -> Bool {
        guard byEntity[entity]?.first == number, let change = self[number] else { return false }
        return !change.takenBack
    }

    /// `number` confirmed, answered or given up: out of the list (nil if it was not in it).
    mutating func settle(_ number: UInt64) -> Change? {
        guard let i = index(of: number) else { return nil }
        var taken: Change?
        swap(&taken, &slots[i])
        guard let change = taken else { return nil }
        live -= 1
        if let entity = change.entity {
            byEntity[entity]?.removeAll { $0 == number }
            if byEntity[entity]?.isEmpty == true { byEntity[entity] = nil }
        }
        compact()
        return change
    }

    /// Every change on `entity` not taken back yet, taken back newest first: `body` gets each
    /// one's undo and held part (to empty it); they stay listed until settled.
    mutating func takeBack(on entity: ChangeEntity, _ body: (Undo?, inout Held) -> Void) {
        guard let numbers = byEntity[entity] else { return }
        for number in numbers.reversed() {
            guard let i = index(of: number), slots[i]?.takenBack == false else { continue }
            update(i) { change in
                change.takenBack = true
                body(change.undo, &change.held)
            }
        }
    }

    /// Every change not taken back yet, taken back newest first (they stay listed until settled
    /// or `removeAll`).
    mutating func takeBackAll(_ body: (Undo?, inout Held) -> Void) {
        for i in (head..<slots.count).reversed() where slots[i]?.takenBack == false {
            update(i) { change in
                change.takenBack = true
                body(change.undo, &change.held)
            }
        }
    }

    /// Every listed change, oldest first.
    func forEach(_ body: (Change) -> Void) {
        for i in head..<slots.count { if let change = slots[i] { body(change) } }
    }

    /// The oldest listed change.
    var oldest: Change? {
        for i in head..<slots.count { if let change = slots[i] { return change } }
        return nil
    }

    /// Every change forgotten, the storage kept.
    mutating func removeAll() {
        slots.removeAll(keepingCapacity: true)
        byEntity.removeAll(keepingCapacity: true)
        head = 0
        live = 0
    }

    /// Changes slot `i` in place: taken out while `body` runs, so that what it holds is not
    /// shared (and not copied when changed).
    @discardableResult
    private mutating func update(_ i: Int, _ body: (inout Change) -> Void) -> Bool {
        guard var change = slots[i] else { return false }
        slots[i] = nil
        body(&change)
        slots[i] = change
        return true
    }

    /// The slot of `number`: numbers grow along the list, so a binary search finds it.
    private func index(of number: UInt64) -> Int? {
        var low = head
        var high = slots.count
        while low < high {
            let mid = (low + high) / 2
            // A settled slot keeps no number: look at the nearest listed one to its right.
            var probe = mid
            while probe < high, slots[probe] == nil { probe += 1 }
            guard probe < high, let change = slots[probe] else { high = mid; continue }
            if change.number == number { return probe }
            if change.number < number { low = probe + 1 } else { high = mid }
        }
        return nil
    }

    /// Settled slots at the front dropped; the whole array rewritten when over half is settled.
    private mutating func compact() {
        while head < slots.count, slots[head] == nil { head += 1 }
        if head == slots.count {
            slots.removeAll(keepingCapacity: true)
            head = 0
        } else if slots.count - head > 2 * live + 16 || head > 1024 {
            slots.removeSubrange(0..<head)
            head = 0
            if slots.count > 2 * live + 16 { slots.removeAll { $0 == nil } }
        }
    }
}
