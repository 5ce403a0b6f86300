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

    public init(historyEvents: Int = 1000, staleAfterMs: Int64 = 120_000, endedGraceMs: Int64 = 3_600_000,
                maxWatchTokens: Int = 32, maxStreams: Int = 100_000, maxWatchersOnStart: Int = 16) {
        precondition(historyEvents >= 1, "a stream keeps at least its last event")
        self.historyEvents = historyEvents
        self.staleAfterMs = staleAfterMs
        self.endedGraceMs = endedGraceMs
        self.maxWatchTokens = maxWatchTokens
        self.maxStreams = maxStreams
        self.maxWatchersOnStart = maxWatchersOnStart
    }
}
