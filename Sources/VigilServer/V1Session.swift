import VigilCore

/// What one `/v1` connection's anonymous session holds: its rate limits. Nothing that identifies
/// a person; the random session id of the welcome is not kept, and budgets that must outlive a
/// reconnect (votes among them) are kept per address in `AddressBudgets`.
///
/// A value in `V1Application`'s table indexed by fd (no object per connection). It holds each
/// bucket's level only: the rates are the same for every session (configuration), so they live
/// once in `V1SessionRates` instead of three times per connection (an idle connection's session
/// went from 121 to 49 bytes, `benchmarks/idle_anatomy.sh`).
struct V1Session {
    /// Pin writes, panic starts and invitations (`pins.writes_per_minute`).
    var writes: TokenLevel
    /// Every message (`session.messages_per_second`): over it the connection is closed with 1008.
    var messages: TokenLevel
    /// Subscribes (`session.subscribes_per_second`): a panning map, not a scan loop.
    var subscribes: TokenLevel
    /// A close was decided (the message limit); later messages in the same read are ignored.
    var closing = false

    /// A new session's full buckets.
    init(_ rates: V1SessionRates, nowMs: Int64) {
        writes = TokenLevel(full: rates.writes, nowMs: nowMs)
        messages = TokenLevel(full: rates.messages, nowMs: nowMs)
        subscribes = TokenLevel(full: rates.subscribes, nowMs: nowMs)
    }
}

/// The rates of every session's buckets, from the configuration.
struct V1SessionRates {
    let writes: TokenRate
    let messages: TokenRate
    let subscribes: TokenRate
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
