/// The pin rules an operator configures (`pins:` and `session:` in the config file).
public struct PinSettings: Equatable, Sendable {
    public var defaultTTLSeconds = 14_400
    public var minTTLSeconds = 60
    public var maxTTLSeconds = 86_400
    public var categories = ["general", "sighting", "hazard", "help", "social"]
    public var voteFlagThreshold = 5
    /// Voters kept per pin: what bounds a pin's vote table (9 bytes a voter in a snapshot, ~20 in
    /// memory). A pin with this many voters takes changes of their votes but no new voter.
    public var maxVotersPerPin = 1_000
    public var writesPerMinute = 30
    public var writeBurst = 30
    public var maxPins = 1_000_000
    public var maxSubscribePins = 10_000
    /// A subscribe looks at no more than this many times its pin limit (at least 4,096 pins)
    /// before it answers, truncated if need be (see `PinStore.pins(in:...)`): what bounds the
    /// loop time a world-sized area with a selective category filter can cost.
    public var subscribeScanFactor = 4
    /// Subscriptions are covered by cells of one precision in this range (1 = 5,000 km, 7 = 150 m).
    public var cellPrecisionMin = 1
    public var cellPrecisionMax = 7
    /// The most cells one subscription may cover; a larger area is covered by coarser cells.
    public var coverCellBudget = 32
    /// Cluster subscriptions (`"view":"clusters"`): counts are kept for every precision in
    /// `clusterPrecisionMin...clusterPrecisionMax`, and a subscription uses the finest of them
    /// whose cover needs at most `clusterCellBudget` cells. `clusters.changed` goes to a
    /// subscriber at most once per `clusterIntervalMs`.
    public var clusterPrecisionMin = 1
    public var clusterPrecisionMax = 6
    public var clusterCellBudget = 512
    public var clusterIntervalMs = 1_000
    public var titleMaxCharacters = 80
    public var descriptionMaxCharacters = 1_000
    /// UTF-8 caps beside the character limits: one character (an extended grapheme cluster) can
    /// be any number of combining marks, so 80 characters alone do not bound the bytes a pin
    /// costs in memory, in snapshots and in every subscriber's reply. 8 bytes a character leaves
    /// room for the densest real text (an emoji with a skin tone or a flag is 8 bytes; Hindi or
    /// Tamil text averages 5–6, since Unicode 15.1 counts a conjunct such as "क्ष", 9 bytes, as one
    /// character), so only stacked marks or long emoji sequences reach it. 4 a character would
    /// refuse 80 skin-toned emoji and long Hindi titles.
    public var titleMaxBytes = 640
    public var descriptionMaxBytes = 8_000
    /// The largest `range_m` a pin may carry (Radar's reach): a product limit, how far a message
    /// may carry. It bounds no cost: a ranged pin's fan-out walks the channels of its position
    /// like any pin's, and tests the reach of the candidates its area gives.
    public var maxRangeMeters = 50_000

    public init() {}

    /// Index of a category in `categories`, used as its bit in category masks (at most 64 categories).
    public func categoryIndex(_ name: String) -> Int? {
        categories.firstIndex(of: name)
    }

    /// The mask of every configured category.
    public var allCategories: UInt64 {
        categories.count >= 64 ? ~0 : (1 << UInt64(categories.count)) - 1
    }
}
