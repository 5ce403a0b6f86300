import VigilCore
import VigilWire

/// Everything one loop turn will send on `/v1`, in the order it was produced.
///
/// Handlers never send: a reply, the events of a change, a close decided by a policy are all
/// appended here, and the end-of-turn fan-out (`V1Application.fanOut`) walks the list once. One
/// list for all kinds keeps each client's order exact: an event produced before a request was
/// answered reaches that client before the answer, as if it had been sent at once.
///
/// Recipients are named by fd. That is safe within a turn: a connection dropped during the turn
/// is forgotten by the hubs before its fd is released, and its fd is closed only after the
/// flush (`EventLoop` step 5), so no newcomer can take the number while this list names it.
struct Outbox {
    enum Item {
        /// The welcome of a new session.
        case welcome(Int32, session: String)
        /// The answer to a request.
        case reply(Int32, ref: JSONValue?, Reply)
        /// A pin event and its recipients.
        case pins(PinDelivery)
        /// A panic event or notice and its recipients.
        case panic(PanicDelivery)
        /// A check-in circle's news and its recipients.
        case checkin(CheckinDelivery)
        /// A close the server decided (after what was queued for the client before it).
        case close(Int32, CloseCode, reason: String)
        /// A watch was answered just before: the replay of `seqs` to the watcher starts here
        /// (nil: none, and any replay of that stream still in progress to it ends).
        case replay(Int32, StreamID, seqs: ClosedRange<UInt64>?)
    }

    private var items: [Item] = []
    /// The storage of the batch walked last, kept for the next swap (no allocation per turn).
    private var spare: [Item] = []

    var isEmpty: Bool { items.isEmpty }

    mutating func append(_ item: Item) {
        items.append(item)
    }

    /// Moves a handler's deliveries here, after its reply (the scratch lists are emptied, their
    /// capacity kept).
    mutating func append(deliveries: inout Deliveries) {
        for d in deliveries.pins { items.append(.pins(d)) }
        for d in deliveries.panic { items.append(.panic(d)) }
        for d in deliveries.checkin { items.append(.checkin(d)) }
        for r in deliveries.replays { items.append(.replay(r.fd, r.stream, seqs: r.seqs)) }
        deliveries.replays.removeAll(keepingCapacity: true)
        deliveries.pins.removeAll(keepingCapacity: true)
        deliveries.panic.removeAll(keepingCapacity: true)
        deliveries.checkin.removeAll(keepingCapacity: true)
    }

    /// Items appended so far this turn (positions for `withdraw`).
    var count: Int { items.count }

    /// Takes back what requests of this turn produced (each a range of positions: its reply,
    /// then its deliveries), because the changes they report were not recorded: each reply
    /// becomes `answer`, each delivery is dropped. Nothing has been sent yet (see `takeBatch`).
    mutating func withdraw(_ ranges: [Range<Int>], answer: RequestError) {
        guard !ranges.isEmpty else { return }
        var withdrawn = [Bool](repeating: false, count: items.count)
        for range in ranges { for i in range { withdrawn[i] = true } }
        var kept: [Item] = []
        kept.reserveCapacity(items.count)
        for (i, item) in items.enumerated() {
            guard withdrawn[i] else { kept.append(item); continue }
            if case .reply(let fd, let ref, _) = item { kept.append(.reply(fd, ref: ref, .error(answer))) }
        }
        items = kept
    }

    /// Takes the whole list out; what is appended afterwards forms the next batch.
    mutating func takeBatch() -> [Item] {
        var batch = spare
        spare = []
        swap(&batch, &items)
        return batch
    }

    /// Returns a walked batch's storage for reuse.
    mutating func recycle(_ batch: inout [Item]) {
        batch.removeAll(keepingCapacity: true)
        if spare.capacity < batch.capacity { swap(&spare, &batch) }
    }
}

/// The deliveries one operation produced, gathered by the hubs (`out:` parameters) and moved to
/// the outbox once the operation's reply is there.
struct Deliveries {
    var pins: [PinDelivery] = []
    var panic: [PanicDelivery] = []
    var checkin: [CheckinDelivery] = []
    /// Answered watches: each replay starts after everything above (`Outbox.Item.replay`).
    var replays: [(fd: Int32, stream: StreamID, seqs: ClosedRange<UInt64>?)] = []
}
