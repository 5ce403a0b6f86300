/// The limits of the check-in circles (`checkin` in the config). Every collection the hub keeps
/// is bounded by one of these, or by the server's connections.
public struct CheckinSettings: Equatable, Sendable {
    /// Circles held at once; `checkin.create` beyond it gets `capacity_exceeded`.
    public var maxCircles: Int = 100_000
    /// Live member tokens per circle (revoked ones do not count).
    public var maxMembers: Int = 32
    /// Check-in requests each member may send a minute (also the burst).
    public var requestsPerMinute: Int = 6
    /// A circle nobody used for this long (no request, answer, home-safe, invitation or
    /// revocation) is removed, and its connected owner and members are told (`checkin.closed`).
    public var idleLifetimeMs: Int64 = 2_592_000_000
    /// The longest "home safe" (`checkin.home`'s `for_s`, or `until` from now).
    public var maxHomeMs: Int64 = 86_400_000
    /// Subscriptions (`checkin.register`) the owner and each member may hold in a circle: a
    /// phone, a tablet, a browser or two. Past it `too_many_subscriptions`; re-registering a
    /// destination already held replaces it and does not count again.
    public var maxSubscriptionsPerHolder: Int = 5
    /// A member's label (chosen by the owner at invitation) and an answer's note: at most this
    /// many characters and bytes of UTF-8 (8 a character, as for pin titles).
    public var labelMaxCharacters: Int = 40
    public var labelMaxBytes: Int = 320
    public var noteMaxCharacters: Int = 280
    public var noteMaxBytes: Int = 2_240

    public init(maxCircles: Int = 100_000, maxMembers: Int = 32, requestsPerMinute: Int = 6,
                idleLifetimeMs: Int64 = 2_592_000_000, maxHomeMs: Int64 = 86_400_000) {
        precondition(maxCircles >= 1 && maxMembers >= 1 && requestsPerMinute >= 1, "a circle holds and sends something")
        precondition(idleLifetimeMs > 0 && maxHomeMs > 0, "times are positive")
        self.maxCircles = maxCircles
        self.maxMembers = maxMembers
        self.requestsPerMinute = requestsPerMinute
        self.idleLifetimeMs = idleLifetimeMs
        self.maxHomeMs = maxHomeMs
    }

    /// The per-member request budget: `requestsPerMinute` a minute, as many at once.
    public var requestRate: TokenRate { .perMinute(requestsPerMinute, capacity: requestsPerMinute) }
}
