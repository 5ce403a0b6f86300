import VigilCore
import VigilGeo

/// `subscribe` and `unsubscribe` (docs/PROTOCOL.md, "Subscriptions").
extension V1Application {
    /// Replaces the connection's subscription; the reply lists the pins inside the area. Not journaled:
    /// subscriptions belong to connections, which a restart ends.
    func subscribe(_ me: Int32, area: GeoArea, categories: UInt64?) -> Outcome {
        let result = hub.subscribe(me, area: area, categories: categories)
        return Outcome(.subscribed(pins: result.pins, truncated: result.truncated))
    }

    func unsubscribe(_ me: Int32) -> Outcome {
        hub.unsubscribe(me)
        return Outcome(.ok)
    }
}
