import VigilCore
import VigilGeo

/// One subscriber told one thing about one pin: the unit `MapHubOracle` counts deliveries in.
///
/// The hub groups recipients into `PinDelivery` values; the oracle reasons per subscriber. Both are
/// brought to lists of notices and compared as multisets, so the check is exact about who heard
/// what, and about hearing it once, but not about how the hub grouped or ordered its deliveries.
public struct PinNotice: Equatable, CustomStringConvertible {
    public let subscriber: SubscriptionIndex.SubscriberID
    public let kind: PinEventKind
    /// The pin as the subscriber must see it: after the change, or as it was when it went away.
    public let pin: Pin

    public init(subscriber: SubscriptionIndex.SubscriberID, kind: PinEventKind, pin: Pin) {
        self.subscriber = subscriber
        self.kind = kind
        self.pin = pin
    }

    public var description: String {
        "\(kind) of pin \(pin.id) at (\(pin.point.lat), \(pin.point.lon)) [\(pin.category)] to \(subscriber)"
    }

    /// One notice per recipient of each delivery.
    public static func flatten(_ deliveries: [PinDelivery]) -> [PinNotice] {
        deliveries.flatMap { delivery in
            delivery.recipients.map { PinNotice(subscriber: $0, kind: delivery.kind, pin: delivery.pin) }
        }
    }

    /// Nil when `delivered` holds exactly the notices of `expected`, each as often (pins compared
    /// with `==` and by cell, since `==` ignores the cell); else what is missing and what is extra.
    public static func difference(expected: [PinNotice], delivered: [PinNotice]) -> String? {
        var extra = delivered
        var missing: [PinNotice] = []
        for notice in expected {
            if let at = extra.firstIndex(where: { $0 == notice && $0.pin.cell == notice.pin.cell }) {
                extra.remove(at: at)
            } else {
                missing.append(notice)
            }
        }
        guard !missing.isEmpty || !extra.isEmpty else { return nil }
        return "missing: \(missing.prefix(5)), extra: \(extra.prefix(5))"
    }
}
