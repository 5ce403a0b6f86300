import VigilCore

/// What one `/v1` connection's anonymous session holds: its rate limits. Nothing that identifies
/// a person; the random session id of the welcome is not kept, and budgets that must outlive a
/// reconnect (votes among them) are kept per address in `AddressBudgets`.
///
/// A value in `V1Application`'s table indexed by fd (no object per connection).
struct V1Session {
    /// Pin writes, panic starts and invitations (`pins.writes_per_minute`).
    var writes: TokenBucket
    /// Every message (`session.messages_per_second`): over it the connection is closed with 1008.
    var messages: TokenBucket
    /// Subscribes (`session.subscribes_per_second`): a panning map, not a scan loop.
    var subscribes: TokenBucket
    /// A close was decided (the message limit); later messages in the same read are ignored.
    var closing = false
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
