/// Rebuilding digests from persisted bytes without an intermediate array per digest (a snapshot
/// of a million pins holds a million of them).
extension TokenDigest {
    /// The digest whose `bytes` are the four words, each big-endian, in order.
    public init(words: (UInt64, UInt64, UInt64, UInt64)) {
        self.words = words
    }
}
