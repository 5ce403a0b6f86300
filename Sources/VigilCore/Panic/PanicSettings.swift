/// The limits of the panic hub. Every collection it keeps is bounded by one of these.
public struct PanicSettings: Equatable, Sendable {
    /// Events each stream keeps for replay to a reconnecting watcher (at least 1).
    public var historyEvents: Int = 1000
    /// Silence after the last location before watchers are told the stream is stale.
    public var staleAfterMs: Int64 = 120_000
    /// How long an ended stream stays readable (state, trail, replay) before it and its tokens go.
    public var endedGraceMs: Int64 = 3_600_000
    /// Live watch tokens per stream (one per contact).
    public var maxWatchTokens: Int = 32
    /// Streams held at once, active and in grace.
    public var maxStreams: Int = 100_000
    /// Watch tokens a `start` may ask for.
    public var maxWatchersOnStart: Int = 16
    /// A stream's note: at most this many characters and this many bytes of UTF-8 (8 a
    /// character, the densest real text; see `PinSettings.titleMaxBytes`).
    public var noteMaxCharacters: Int = 280
    public var noteMaxBytes: Int = 2_240
    /// An active stream whose owner has sent nothing (no location, status change or end) for this
    /// long is ended by `tick` with reason `abandoned`, so that streams started and left behind
    /// cannot hold the stream capacity for ever. A day: a phone that is on sends a location far
    /// more often, and one that is off for a day has left its contacts with its last place anyway.
    public var abandonAfterMs: Int64 = 86_400_000
    /// The share of `maxStreams` kept for starts the caller vouches for (`start`'s
    /// `reserveEligible`): once `unreservedStreams` are held, only those are admitted.
    public var reservedShare: Double = 0.2
    /// The longest safety timer (`due_in_s`, or `due_at` from now). Below `abandonAfterMs`, so a
    /// timer always comes due before its stream could be abandoned.
    public var maxTimerMs: Int64 = 43_200_000
    /// The largest sealed value of an end-to-end encrypted stream (a sealed location or a member's
    /// key box), in bytes after base64url decoding: nonce, ciphertext and tag. 1,024 leaves 996
    /// bytes of padded plaintext: a full fix (about 130 bytes of JSON) and a note of some 860
    /// bytes of UTF-8, 280 characters of most scripts. A larger value is refused with `sealed_too_large`.
    public var sealedMaxBytes: Int = 1_024

    public init(historyEvents: Int = 1000, staleAfterMs: Int64 = 120_000, endedGraceMs: Int64 = 3_600_000,
                maxWatchTokens: Int = 32, maxStreams: Int = 100_000, maxWatchersOnStart: Int = 16,
                abandonAfterMs: Int64 = 86_400_000, reservedShare: Double = 0.2, maxTimerMs: Int64 = 43_200_000,
                sealedMaxBytes: Int = 1_024) {
        precondition(historyEvents >= 1, "a stream keeps at least its last event")
        precondition(abandonAfterMs > 0, "a stream is abandoned after some time, not at once")
        precondition(reservedShare >= 0 && reservedShare <= 1, "the reserved share is a fraction of maxStreams")
        precondition(sealedMaxBytes >= SealedBytes.minimumBytes, "a sealed value holds at least a nonce and a tag")
        self.historyEvents = historyEvents
        self.staleAfterMs = staleAfterMs
        self.endedGraceMs = endedGraceMs
        self.maxWatchTokens = maxWatchTokens
        self.maxStreams = maxStreams
        self.maxWatchersOnStart = maxWatchersOnStart
        self.abandonAfterMs = abandonAfterMs
        self.reservedShare = reservedShare
        self.maxTimerMs = maxTimerMs
        self.sealedMaxBytes = sealedMaxBytes
    }

    /// Streams held (active and in grace) up to which any start is admitted: `maxStreams` less
    /// the reserved share, rounded so that the reserve is never smaller than the share asks.
    public var unreservedStreams: Int {
        let reserved = (Double(maxStreams) * reservedShare).rounded(.up)
        return max(0, maxStreams - Int(min(reserved, Double(maxStreams))))
    }
}
