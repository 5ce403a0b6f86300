import VigilCore

/// What one `/v1` connection's anonymous session holds: a number for its votes, a random id
/// shown to the client, and its rate limits. Nothing that identifies a person.
final class V1Session {
    /// Unique per daemon and never reused (restored votes keep theirs): a voter's identity.
    let serial: UInt64
    /// 128 random bits, base64url: the `session` of the welcome.
    let id: String
    /// Pin writes, panic starts and invitations (`pins.writes_per_minute`).
    var writes: TokenBucket
    /// Every message (`session.messages_per_second`): over it the connection is closed with 1008.
    var messages: TokenBucket
    /// A close was decided (the message limit); later messages in the same read are ignored.
    var closing = false

    init(serial: UInt64, id: String, writes: TokenBucket, messages: TokenBucket) {
        self.serial = serial
        self.id = id
        self.writes = writes
        self.messages = messages
    }
}
