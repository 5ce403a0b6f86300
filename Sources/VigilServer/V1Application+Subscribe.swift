import VigilCore
import VigilGeo

/// `subscribe` and `unsubscribe` (docs/PROTOCOL.md, "Subscriptions").
extension V1Application {
    /// Replaces the connection's subscription; the reply lists the pins inside the area. Not journaled:
    /// subscriptions belong to connections, which a restart ends.
    /// Rate-limited per connection (at the dispatch) and per address, like a write: a subscribe
    /// scans the area (within the scan budget), so it is not free.
    /// `viewer` lives only in the hub's subscription (for the reach of pins with a range): it is
    /// neither journaled nor logged, and goes when the subscription does.
    func subscribe(_ caller: Caller, area: GeoArea, categories: UInt64?, viewer: GeoPoint? = nil) -> Outcome {
        if let refused = admit(budgets.admitSubscribe(caller.address, now: caller.monotonicMs), rate: .addressSubscribes) { return refused }
        let result = hub.subscribe(caller.fd, area: area, categories: categories, viewer: viewer)
        return Outcome(.subscribed(pins: result.pins, truncated: result.truncated))
    }

    func unsubscribe(_ me: Int32) -> Outcome {
        hub.unsubscribe(me)
        return Outcome(.ok)
    }
}
