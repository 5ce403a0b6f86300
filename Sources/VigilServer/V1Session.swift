import VigilCore

/// What one `/v1` connection's anonymous session holds: a number for its votes and its rate
/// limits. Nothing that identifies a person; the random session id of the welcome is not kept.
///
/// A value in `V1Application`'s table indexed by fd (no object per connection): 80 bytes.
struct V1Session {
    /// Unique per daemon and never reused (restored votes keep theirs): a voter's identity.
    let serial: UInt64
    /// Pin writes, panic starts and invitations (`pins.writes_per_minute`).
    var writes: TokenBucket
    /// Every message (`session.messages_per_second`): over it the connection is closed with 1008.
    var messages: TokenBucket
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
