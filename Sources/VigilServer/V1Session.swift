import VigilCore

/// What one `/v1` connection's anonymous session holds: its rate limits. Nothing that identifies
/// a person; the random session id of the welcome is not kept, and budgets that must outlive a
/// reconnect (votes among them) are kept per address in `AddressBudgets`.
///
/// A value in `V1Application`'s table indexed by fd (no object per connection). It holds each
/// bucket's level only: the rates are the same for every session (configuration), so they live
/// once in `V1SessionRates` instead of three times per connection (an idle connection's session
/// went from 121 to 49 bytes, `benchmarks/idle_anatomy.sh`). The three levels are kept as their
/// anchors (Int64) and their thousandths of a token in 32 bits (a session's bursts are at most
/// 1,000,000 tokens, `V1SessionRates`), fields of one kind together so that nothing is padding:
/// 37 bytes, a slot of 40 in the table (three `TokenLevel`s made it 49 and 56).
struct V1Session {
    private var anchors: (writes: Int64, messages: Int64, subscribes: Int64)
    private var milli: (writes: Int32, messages: Int32, subscribes: Int32)
    /// A close was decided (the message limit); later messages in the same read are ignored.
    var closing = false

    /// Pin writes, panic starts and invitations (`pins.writes_per_minute`).
    var writes: TokenLevel {
        get { TokenLevel(parts: (Int64(milli.writes), anchors.writes)) }
        set { (milli.writes, anchors.writes) = Self.narrow(newValue) }
    }
    /// Every message (`session.messages_per_second`): over it the connection is closed with 1008.
    var messages: TokenLevel {
        get { TokenLevel(parts: (Int64(milli.messages), anchors.messages)) }
        set { (milli.messages, anchors.messages) = Self.narrow(newValue) }
    }
    /// Subscribes (`session.subscribes_per_second`): a panning map, not a scan loop.
    var subscribes: TokenLevel {
        get { TokenLevel(parts: (Int64(milli.subscribes), anchors.subscribes)) }
        set { (milli.subscribes, anchors.subscribes) = Self.narrow(newValue) }
    }

    /// A new session's full buckets.
    init(_ rates: V1SessionRates, nowMs: Int64) {
        anchors = (nowMs, nowMs, nowMs)
        milli = (0, 0, 0)
        writes = TokenLevel(full: rates.writes, nowMs: nowMs)
        messages = TokenLevel(full: rates.messages, nowMs: nowMs)
        subscribes = TokenLevel(full: rates.subscribes, nowMs: nowMs)
    }

    /// A level's thousandths fit 32 bits: they stay between 0 and the capacity's, which
    /// `V1SessionRates` holds below `Int32.max`.
    private static func narrow(_ level: TokenLevel) -> (Int32, Int64) {
        let parts = level.parts
        return (Int32(parts.milli), parts.anchorMs)
    }
}

/// The rates of every session's buckets, from the configuration.
struct V1SessionRates {
    let writes: TokenRate
    let messages: TokenRate
    let subscribes: TokenRate

    /// The most tokens a session's bucket may hold: its level is kept in thousandths in 32 bits
    /// (`V1Session`). The configuration's bounds (1,000,000 for every burst) are below it.
    static let maxCapacity = Int(Int32.max) / 1000

    init(writes: TokenRate, messages: TokenRate, subscribes: TokenRate) {
        precondition(max(writes.capacity, messages.capacity, subscribes.capacity) <= Self.maxCapacity,
                     "a session's burst is at most 2,147,483 tokens")
        self.writes = writes
        self.messages = messages
        self.subscribes = subscribes
    }
}

/// The sessions of open `/v1` connections, by fd (unique among open connections; a session is
/// removed when its connection closes, before the fd can be reused).
struct V1Sessions {
    private var slots: ContiguousArray<V1Session?> = []

    subscript(fd: Int32) -> V1Session? {
        get { Int(fd) < slots.count ? slots[Int(fd)] : nil }
        set {
            let i = Int(fd)
            if i >= slots.count {
                guard newValue != nil else { return }
                slots.append(contentsOf: repeatElement(nil, count: max(i + 1 - slots.count, slots.count / 2 + 64)))
            }
            slots[i] = newValue
        }
    }
}
