import VigilGeo

/// A change of a pin's reach in `pin.update`: a new `range_m`, or `"range_m": null` to take it away.
public enum PinRangeChange: Equatable, Sendable {
    case set(Int)
    case remove
}

/// The reach rule (Radar, docs/PROTOCOL.md "Pins with a reach"): a pin with a range is seen only
/// by a subscriber whose viewer position is within `range_m` of the pin, measured as a
/// great-circle distance on the same sphere as the areas (`GeoDistance`), the boundary included.
/// A subscriber that gave no viewer position sees no pin with a range. A pin without a range
/// follows the area rule alone and never pays for a distance (`SubscriptionIndex.forEachRecipient`).
///
/// Pure and separate from the area test: a pin must also be inside the subscription's area.
public enum PinReach {
    /// Whether a pin at `pin` with reach `rangeMeters` reaches a viewer at `viewer`.
    @inline(__always)
    public static func reaches(_ pin: GeoPoint, rangeMeters: Int, viewer: GeoPoint?) -> Bool {
        guard let viewer else { return false }
        return GeoDistance.meters(pin, viewer) <= Double(rangeMeters)
    }

    /// Whether a pin at `pin` with reach `rangeMeters` (nil: none, seen by all) is shown to `viewer`.
    @inline(__always)
    public static func shows(_ pin: GeoPoint, rangeMeters: Int?, to viewer: GeoPoint?) -> Bool {
        guard let rangeMeters else { return true }
        return reaches(pin, rangeMeters: rangeMeters, viewer: viewer)
    }
}

extension SubscriptionIndex {
    /// Calls `body` for every subscriber that sees `pin` (category bit `categoryBit`): those whose
    /// subscription holds its position and category and, for a pin with a range, whose viewer it
    /// reaches. A pin without a range takes `forEachSubscriber`'s path with one test of an
    /// optional per recipient. A ranged pin costs one subscription lookup and one distance per
    /// candidate the area accepts.
    @inline(__always)
    func forEachRecipient(of pin: Pin, categoryBit: Int, _ body: (SubscriberID) -> Void) {
        // One loop and one call of `body` for both kinds of pin (two call sites measured dearer:
        // the closure was no longer inlined into the loop).
        let range = pin.rangeMeters
        forEachSubscriber(at: pin.point, cell: pin.cell, categoryBit: categoryBit) { subscriber in
            if let range, !PinReach.reaches(pin.point, rangeMeters: range, viewer: subscriptions[subscriber]?.viewer) { return }
            body(subscriber)
        }
    }

    /// Every subscriber that sees `pin` (as `forEachRecipient` lists them), in an array allocated
    /// once at the size of the channels the pin falls in: appending one by one paid a uniqueness
    /// and capacity check per recipient and regrew the array about ten times for a thousand
    /// recipients (callgrind, fanout_compare: 462 → 421 and 441 → 406 instructions per delivery in
    /// two alternating pairs). The spare capacity when categories or areas filter most members out
    /// lives only until the delivery is sent.
    func recipients(of pin: Pin, categoryBit: Int) -> [SubscriberID] {
        recipients(of: pin, categoryBit: categoryBit, where: { _ in true }, else: { _ in })
    }

    /// `recipients(of:categoryBit:)` split in the same walk: those `keep` accepts, in an array
    /// allocated once as there, and the others handed to `rest` (for an edit: the subscribers
    /// that still see the pin, usually all of them, and those it left).
    @inline(__always)
    func recipients(of pin: Pin, categoryBit: Int, where keep: (SubscriberID) -> Bool, else rest: (SubscriberID) -> Void) -> [SubscriberID] {
        let bound = candidateCount(in: pin.cell)
        guard bound > 0 else { return [] }
        return [SubscriberID](unsafeUninitializedCapacity: bound) { buffer, count in
            forEachRecipient(of: pin, categoryBit: categoryBit) { subscriber in
                guard keep(subscriber) else { return rest(subscriber) }
                // Each channel entry is offered at most once, so `count` stays below `bound`; the
                // check is kept anyway (release builds do not check an unsafe buffer's index), so
                // a future change that broke this would stop here instead of writing past the end.
                precondition(count < buffer.count, "more recipients than channel entries")
                buffer[count] = subscriber
                count += 1
            }
        }
    }

    /// Whether `subscriber` sees `pin` (category bit `categoryBit`): area, category and reach.
    /// A pin without a range takes `wants`, today's path, exactly: reading the whole subscription
    /// out of the dictionary instead (to reach its viewer) copies it, retaining and releasing its
    /// cells, which made a move's fan-out 40% dearer when measured.
    @inline(__always)
    func sees(_ subscriber: SubscriberID, _ pin: Pin, categoryBit: Int) -> Bool {
        guard let range = pin.rangeMeters else { return wants(subscriber, pin.point, categoryBit: categoryBit) }
        guard let subscription = subscriptions[subscriber], subscription.wants(pin.point, categoryBit: categoryBit) else { return false }
        return PinReach.reaches(pin.point, rangeMeters: range, viewer: subscription.viewer)
    }
}
