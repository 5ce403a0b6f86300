/// The per-address budgets an operator configures (see `AddressBudgets` for what each trades).
///
/// The defaults assume the worst honest case: a mobile carrier's shared address (CGNAT) with a few
/// thousand phones behind it, some of them panning maps at once, and a local emergency in which
/// dozens of them press the panic button in the same hour. Each is far above what that needs and
/// far below what it takes to fill the server from one address.
public struct AddressBudgetSettings: Equatable, Sendable {
    /// Panic streams started per address: a burst of 200, then 600 an hour (one every 6 s).
    /// Generous on purpose: refusing a person in danger is the worst mistake this server can
    /// make, and the stream capacity is also guarded by `maxOpenStreams`, abandonment and the
    /// reserved share (`PanicSettings`).
    public var panicStarts = TokenRate.perHour(600, capacity: 200)
    /// Streams open (started, not yet ended) per address at once. 1,000 behind one address would
    /// be a quarter of a large CGNAT pool in danger at the same time; at this limit one address
    /// holds 1 % of the default 100,000 streams.
    public var maxOpenStreams = 1_000
    /// Pins created per address: a burst of 300, then 1,200 an hour.
    public var pinCreates = TokenRate.perHour(1_200, capacity: 300)
    /// Live pins per address: 10,000, 1 % of the default store, so that filling the map takes a
    /// hundred addresses, while a shared address of a community app's users is not refused.
    public var maxLivePins = 10_000
    /// Subscribes per address: a burst of 1,000, then 200 a second (a map that pans subscribes
    /// about once a second, so 200 people panning at once behind one address). Each subscribe
    /// costs at most its scan budget (`PinSettings.subscribeScanFactor`).
    public var subscribes = TokenRate.perSecond(200, capacity: 1_000)
    /// Check-in circles created per address: a burst of 20, then 60 an hour. A circle is a
    /// family's or a group of friends' (created once, used for weeks), so this is far above what
    /// the people behind a shared address create, and the server's `checkin.max_circles` is
    /// filled from one address only after days.
    public var circleCreates = TokenRate.perHour(60, capacity: 20)
    /// How long an address keeps its voter number after its last vote, so that a reconnect, or a
    /// pause, does not make it a new voter on the pins it voted on. A day: the longest a pin
    /// lives without an edit.
    public var voterMemoryMs: Int64 = 86_400_000
    /// Addresses tracked at once (about 150 bytes each, plus 40 per open stream or live pin). When
    /// the table is full of addresses that still hold something, a new address is not tracked:
    /// its panic starts and subscribes are admitted (the server-wide limits still hold), its pin
    /// creates and votes are refused (`AddressLimit.trackedAddresses`).
    public var maxTrackedAddresses = 250_000

    public init() {}
}
