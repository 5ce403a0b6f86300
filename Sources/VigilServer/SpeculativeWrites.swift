import VigilReplication
import VigilCore
import VigilState

/// A node's writes applied here at once (speculatively) and held, their replies and events, until
/// the replicated stream hands them back (docs/CLUSTER.md, "The replicated log"): a value with
/// private state whose events return actions. `V1Application+Replication.swift` carries them out;
/// nothing else changes this state.
///
/// Events: a write held (`hold`), its publish failed (`publishFailed`), the tick (`tick`:
/// deadlines and attempts due), a record of the stream (`streamed`, then `settled` for one of ours
/// applied like anyone's), connections opened, closed or changing what they follow, all taken back
/// (`takeBackAll`, before the final snapshot) and everything forgotten (`reset`, a restored
/// snapshot). Actions: publish, take back, reply, answer a waiting repeat, keep an answer.
///
/// When a record of the stream comes:
/// - it is this node's write, the oldest unsettled one on its entity, and still in place: it is
///   confirmed; the held reply and events go out (minus recipients it is no longer meant for).
/// - anything else: every write of ours on that entity is taken back (newest first), then the
///   record is applied with its precondition (`ReplicatedApply`) exactly as every other node does;
///   a write of ours applied that way is answered with the real outcome (`ok` or `conflict`).
struct SpeculativeWrites {
    /// What the node does for an event, in order.
    enum Action {
        /// Publish (or publish again, same message id) held write `number`.
        case publish(UInt64, Publication)
        /// Put a change back as it was before.
        case takeBack(Undo)
        /// A writer's (or a waiting repeat's error) reply.
        case reply(Int32, ref: JSONValue?, Reply)
        /// A repeat of an idempotent write that waited for it: the write's answer, as a repeat.
        case repeated(Int32, ref: JSONValue?, members: [UInt8])
        /// Keep a write's answer for its idempotency key (`address`: its writer's budget).
        case keep(KeptAnswer, address: AddressKey?)
        /// A publish went out again (counted in the log's metrics).
        case countRepublished
    }

    /// A held write's message, as published (and published again).
    struct Publication {
        let record: JournalRecord
        let kept: KeptAnswer?
        let subject: String
        let messageID: String
        let base: UInt64?
    }

    /// A write of this node applied here and not yet seen in the stream.
    struct Held {
        let fd: Int32
        let ref: JSONValue?
        let reply: Reply
        /// Its events, sent when it is confirmed (dropped when it is taken back).
        var deliveries: Deliveries
        /// The connection's identity when it was made (`ConnectionEpochs.isSame`).
        let epoch: ConnectionEpochs.Mark
        /// The writer's connection, for a start or a creation applied from the stream: it owns
        /// the stream or circle then.
        let owner: Int32?
        /// When it was published (monotonic): an answer still owed after the deadline is given up.
        let atMs: Int64
        let publication: Publication
        /// When the last attempt went out, and when the next one is due (`HeldWritePolicy`).
        var sentAtMs: Int64
        var republishAtMs: Int64? = nil
        /// Its idempotency key's answer on its way with it, and the repeats waiting for it.
        var idem: InFlightAnswer? = nil
    }

    /// What `streamed` found.
    enum Streamed {
        /// Our write, confirmed: its actions and events are out.
        case confirmed
        /// Apply the record like anyone's, after the take-backs in the actions; `own` is our write
        /// it is (settled now: answer it with `settled`), and `ownerFD` its writer's connection if
        /// still the same one.
        case apply(own: Held?, ownerFD: Int32?)
    }

    struct Counts {
        var confirmed = 0
        var conflicts = 0
        var takenBack = 0
        var expired = 0
        var applied = 0
    }

    private var list = UnconfirmedChanges<Held>()
    /// Writes with an idempotency key awaiting the stream: lookup → write number.
    private var inFlight: [[UInt8]: UInt64] = [:]
    private var epochs = ConnectionEpochs()
    /// Emptied delivery lists, their capacity kept, for the next held write.
    private var spare: [Deliveries] = []
    private(set) var counts = Counts()

    var pendingCount: Int { list.count }
    var isEmpty: Bool { list.isEmpty }
    var spareDeliveryCount: Int { spare.count }
    var changedConnectionCount: Int { epochs.changedCount }
    /// When the next attempt of `number` is due (nil: none scheduled, or not held).
    func republishAt(_ number: UInt64) -> Int64? { list[number]?.held.republishAtMs }
    /// The numbers of the held writes, oldest first.
    var numbers: [UInt64] {
        var all: [UInt64] = []
        list.forEach { all.append($0.number) }
        return all
    }

    // MARK: connections

    mutating func opened(_ fd: Int32) { epochs.opened(fd) }

    mutating func closed(_ fd: Int32) {
        epochs.closed(fd, listing: !list.isEmpty)
        pruneIfLong()
    }

    /// `fd` subscribed, unsubscribed, watched, unwatched, resumed, opened, joined or left: its
    /// reply showed every write in place, so their held events are no longer for it.
    mutating func membershipChanged(_ fd: Int32) {
        epochs.membershipChanged(fd, listing: !list.isEmpty)
        pruneIfLong()
    }

    /// The changed connections' list keeps only what changed since the oldest held write.
    private mutating func pruneIfLong() {
        guard epochs.changedCount > epochs.pruneAbove else { return }
        epochs.pruneChanged(oldest: list.oldest?.held.epoch)
    }

    // MARK: writes

    /// Write `number` applied here: held with its reply and the events in `events` (taken out;
    /// `events` gets emptied lists of an earlier write, their capacity kept). Publish it.
    mutating func hold(_ number: UInt64, entity: ChangeEntity, undo: Undo?, fd: Int32, ref: JSONValue?, reply: Reply,
                       events: inout Deliveries, owner: Int32?, publication: Publication, idem: InFlightAnswer?,
                       nowMs: Int64) -> Action {
        var deliveries = spare.popLast() ?? Deliveries()
        swap(&deliveries, &events)
        list.append(number, entity: entity, undo: undo,
                    held: Held(fd: fd, ref: ref, reply: reply, deliveries: deliveries, epoch: epochs.mark, owner: owner,
                               atMs: nowMs, publication: publication, sentAtMs: nowMs, idem: idem))
        if let idem { inFlight[idem.lookup] = number }
        return .publish(number, publication)
    }

    /// A publish of `number` failed: attempt again later, wait for the deadline, or give it up.
    mutating func publishFailed(_ number: UInt64, _ error: JetStreamError, nowMs: Int64, ackTimeoutMs: Int64,
                                deadlineMs: Int64, retryAfterMs: Int64, into actions: inout [Action]) {
        guard let held = list[number]?.held else { return }
        switch HeldWritePolicy.failed(error, madeAtMs: held.atMs, sentAtMs: held.sentAtMs, nowMs: nowMs,
                                      ackTimeoutMs: ackTimeoutMs, deadlineMs: deadlineMs) {
        case .republish(let at):
            list.modify(number) { $0.republishAtMs = at }
        case .awaitDeadline:
            break
        case .giveUp:
            giveUp(number, retryAfterMs: retryAfterMs, into: &actions)
        }
    }

    /// The tick: writes the stream has not handed back within the deadline given up (`unavailable`),
    /// then attempts that are due published again (same message id), oldest first.
    mutating func tick(nowMs: Int64, deadlineMs: Int64, retryAfterMs: Int64, into actions: inout [Action]) {
        var expired: [UInt64] = []
        var due: [UInt64] = []
        list.forEach { change in
            if HeldWritePolicy.expired(madeAtMs: change.held.atMs, nowMs: nowMs, deadlineMs: deadlineMs) {
                expired.append(change.number)
            } else if (change.held.republishAtMs ?? .max) <= nowMs {
                due.append(change.number)
            }
        }
        for number in expired {
            counts.expired += 1
            giveUp(number, retryAfterMs: retryAfterMs, into: &actions)
        }
        for number in due {
            guard let publication = list[number]?.held.publication else { continue }
            list.modify(number) {
                $0.republishAtMs = nil
                $0.sentAtMs = nowMs
            }
            actions.append(.countRepublished)
            actions.append(.publish(number, publication))
        }
    }

    /// A write the stream did not take, or has not handed back in time: taken back with those made
    /// on top of it, answered `unavailable`. (If the stream has it after all, it is applied later
    /// like anyone else's.)
    private mutating func giveUp(_ number: UInt64, retryAfterMs: Int64, into actions: inout [Action]) {
        guard let entity = list[number]?.entity else { return }
        takeBack(entity, into: &actions)
        guard let change = settle(number) else { return }
        answer(change.held, .error(.unavailable(retryAfterMs: retryAfterMs)), into: &actions)
    }

    // MARK: the stream

    /// A record of the stream on `entity`; `number` is the write number in its message id when
    /// this node published it. On `.confirmed` the actions answer it and `deliveries` holds its
    /// events (send them, then `recycle`); on `.apply` the actions take back what must go first.
    mutating func streamed(_ number: UInt64?, entity: ChangeEntity, kept: KeptAnswer?, into actions: inout [Action],
                           deliveries: inout Deliveries) -> Streamed {
        var own: Held?
        if let number, let epoch = list[number]?.held.epoch {
            let confirmed = list.isOldestInPlace(number, on: entity)
            // Marked while the write is listed: settling the last one forgets what changed.
            let anyStale = confirmed && epochs.markStale(since: epoch)
            if confirmed, var held = settle(number)?.held {
                counts.confirmed += 1
                swap(&deliveries, &held.deliveries)
                if anyStale { epochs.forgetStale(&deliveries) }
                if let kept { actions.append(.keep(kept, address: held.idem?.address)) }
                answer(held, held.reply, into: &actions)
                return .confirmed
            }
            own = settle(number)?.held
        }
        takeBack(entity, into: &actions)
        counts.applied += 1
        let ownerFD = own.flatMap { held in held.owner.flatMap { epochs.isSame($0, as: held.epoch) ? $0 : nil } }
        return .apply(own: own, ownerFD: ownerFD)
    }

    /// Our write `own`, applied from the stream like anyone's with `outcome`: its answer.
    mutating func settled(_ own: Held, _ outcome: ReplicatedOutcome, into actions: inout [Action]) {
        switch outcome {
        case .applied, .duplicate:
            answer(own, own.reply, into: &actions)
        case .conflict(let why):
            counts.conflicts += 1
            answer(own, .error(RequestError("conflict", "another change came first: \(why); read the current state and try again")),
                   into: &actions)
        }
    }

    /// Every write not yet confirmed, taken back (before the final snapshot: it must hold only what
    /// the stream holds; those that made it are applied from the stream after the restart).
    mutating func takeBackAll(into actions: inout [Action]) {
        var spareLists = spare
        var taken = 0
        list.takeBackAll { undo, held in
            if let undo { actions.append(.takeBack(undo)) }
            Self.recycle(&held.deliveries, into: &spareLists)
            taken += 1
        }
        spare = spareLists
        counts.takenBack += taken
    }

    /// A restored snapshot replaced the state: every held write and waiting repeat forgotten.
    mutating func reset() {
        list.removeAll()
        inFlight.removeAll()
        epochs.pruneChanged(oldest: nil)
    }

    /// Emptied lists kept for a later write (`deliveries` is left empty).
    mutating func recycle(_ deliveries: inout Deliveries) {
        Self.recycle(&deliveries, into: &spare)
    }

    // MARK: idempotency

    enum Wait {
        /// No write with this key is on its way here.
        case none
        /// One is, for another request: `idem_conflict`.
        case conflict
        /// The repeat waits for that write's answer.
        case waiting
    }

    /// A repeat of an idempotent write (`lookup`, `requestDigest`) from `fd`.
    mutating func wait(lookup: [UInt8], requestDigest: [UInt8], fd: Int32, ref: JSONValue?) -> Wait {
        guard let number = inFlight[lookup], let idem = list[number]?.held.idem else { return .none }
        guard idem.kept.requestDigest == requestDigest else { return .conflict }
        let mark = epochs.mark
        list.modify(number) { $0.idem?.waiters.append(.init(fd: fd, ref: ref, epoch: mark)) }
        return .waiting
    }

    // MARK: private

    private mutating func settle(_ number: UInt64) -> UnconfirmedChanges<Held>.Change? {
        guard let change = list.settle(number) else { return nil }
        if list.isEmpty { epochs.pruneChanged(oldest: nil) }
        return change
    }

    /// Every write of ours on `entity` not taken back yet, newest first.
    private mutating func takeBack(_ entity: ChangeEntity, into actions: inout [Action]) {
        var spareLists = spare
        var taken = 0
        list.takeBack(on: entity) { undo, held in
            if let undo { actions.append(.takeBack(undo)) }
            Self.recycle(&held.deliveries, into: &spareLists)
            taken += 1
        }
        spare = spareLists
        counts.takenBack += taken
    }

    /// The writer's reply (unless its connection is gone, or its fd now someone else's), and the
    /// waiting repeats' answers.
    private mutating func answer(_ held: Held, _ reply: Reply, into actions: inout [Action]) {
        if let idem = held.idem {
            if inFlight[idem.lookup] != nil { inFlight[idem.lookup] = nil }
            for w in idem.waiters where epochs.isSame(w.fd, as: w.epoch) {
                actions.append(reply.isError ? .reply(w.fd, ref: w.ref, reply) : .repeated(w.fd, ref: w.ref, members: idem.members))
            }
        }
        guard epochs.isSame(held.fd, as: held.epoch) else { return }
        actions.append(.reply(held.fd, ref: held.ref, reply))
    }

    private static func recycle(_ deliveries: inout Deliveries, into spare: inout [Deliveries]) {
        var lists = Deliveries()
        swap(&lists, &deliveries)
        guard spare.count < 16 else { return }
        lists.pins.removeAll(keepingCapacity: true)
        lists.panic.removeAll(keepingCapacity: true)
        lists.checkin.removeAll(keepingCapacity: true)
        spare.append(lists)
    }
}

/// Which connection an fd is, and what it follows, across the time a write is held: a recipient or
/// writer whose fd was closed (and perhaps reused) since, or that changed what it follows since
/// (its reply showed the write already), is not the one a held event or answer was meant for.
/// Memory: a few bytes per fd, on cluster nodes only.
struct ConnectionEpochs {
    /// The identity of every connection at one moment: the serial then and the closes so far.
    struct Mark {
        let serial: UInt64
        let closes: UInt64
    }

    /// Serial of the connection on each fd (grown on demand).
    private var serials: [UInt64] = []
    private var nextSerial: UInt64 = 1
    private var closes: UInt64 = 0
    /// Per fd, the serial of its last change of what it follows.
    private var memberships: [UInt64] = []
    /// The fds that changed what they follow, or closed, while writes were held: each once
    /// (`listed`), pruned of those every held write is still meant for. At a confirmation only
    /// these can be recipients no longer meant (`markStale`).
    private var changed: [Int32] = []
    private var listed: [Bool] = []
    private(set) var pruneAbove = 64
    /// Marks the stale recipients of the write being confirmed: `staleMarks[fd] == staleStamp`.
    private var staleMarks: [UInt64] = []
    private var staleStamp: UInt64 = 0

    var mark: Mark { Mark(serial: nextSerial, closes: closes) }
    var changedCount: Int { changed.count }

    mutating func opened(_ fd: Int32) {
        let i = Int(fd)
        Self.grow(&serials, to: i, with: 0)
        serials[i] = nextSerial
        nextSerial += 1
        if i < memberships.count { memberships[i] = 0 }
    }

    mutating func membershipChanged(_ fd: Int32, listing: Bool) {
        let i = Int(fd)
        Self.grow(&memberships, to: i, with: 0)
        memberships[i] = nextSerial
        nextSerial += 1
        if listing { list(fd) }
    }

    mutating func closed(_ fd: Int32, listing: Bool) {
        closes += 1
        if Int(fd) < serials.count { serials[Int(fd)] = 0 }
        if listing { list(fd) }
    }

    /// Whether `fd` is still the connection that was open at `mark`.
    func isSame(_ fd: Int32, as mark: Mark) -> Bool {
        if mark.closes == closes { return true }
        let i = Int(fd)
        return i >= 0 && i < serials.count && serials[i] != 0 && serials[i] < mark.serial
    }

    /// Whether a held event of a write made at `mark` is still for `fd`: the same connection,
    /// following the same things.
    func isStillMeant(_ fd: Int32, since mark: Mark) -> Bool {
        guard isSame(fd, as: mark) else { return false }
        let i = Int(fd)
        return i >= memberships.count || memberships[i] < mark.serial
    }

    /// Drops the listed fds that a write made at `oldest` (the oldest held one) is still meant
    /// for (every one when nothing is held): what is meant for the oldest is meant for every
    /// later one.
    mutating func pruneChanged(oldest: Mark?) {
        if let oldest {
            var kept: [Int32] = []
            for fd in changed {
                if isStillMeant(fd, since: oldest) { listed[Int(fd)] = false } else { kept.append(fd) }
            }
            changed = kept
        } else {
            for fd in changed { listed[Int(fd)] = false }
            changed.removeAll(keepingCapacity: true)
        }
        pruneAbove = max(64, changed.count * 2)
    }

    /// Marks the listed fds that a write made at `mark` is no longer meant for; false when there
    /// are none. O(changed), whatever the number of recipients.
    mutating func markStale(since mark: Mark) -> Bool {
        staleStamp += 1
        var any = false
        for fd in changed where !isStillMeant(fd, since: mark) {
            let i = Int(fd)
            Self.grow(&staleMarks, to: i, with: 0)
            staleMarks[i] = staleStamp
            any = true
        }
        return any
    }

    /// Drops from `deliveries` the recipients the last `markStale` marked (the lists are the
    /// write's own, changed in place).
    func forgetStale(_ deliveries: inout Deliveries) {
        let stale = { (fd: Int32) -> Bool in
            let i = Int(fd)
            return i >= 0 && i < staleMarks.count && staleMarks[i] == staleStamp
        }
        for i in deliveries.pins.indices { deliveries.pins[i].recipients.removeAll(where: stale) }
        for i in deliveries.panic.indices { deliveries.panic[i].recipients.removeAll(where: stale) }
        for i in deliveries.checkin.indices { deliveries.checkin[i].recipients.removeAll(where: stale) }
        deliveries.pins.removeAll { $0.recipients.isEmpty }
        deliveries.panic.removeAll { $0.recipients.isEmpty }
        deliveries.checkin.removeAll { $0.recipients.isEmpty }
    }

    /// Lists `fd` among the changed ones (once).
    private mutating func list(_ fd: Int32) {
        guard fd >= 0 else { return }
        let i = Int(fd)
        Self.grow(&listed, to: i, with: false)
        guard !listed[i] else { return }
        listed[i] = true
        changed.append(fd)
    }

    private static func grow<T>(_ array: inout [T], to index: Int, with value: T) {
        if index >= array.count { array.append(contentsOf: repeatElement(value, count: max(index + 1 - array.count, 64))) }
    }
}
