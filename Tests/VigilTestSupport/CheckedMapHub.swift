import VigilCore
import VigilGeo

/// A `MapHub` run in lockstep with a `MapHubOracle`: each operation is applied to both, and what
/// the hub answered and delivered is compared with what the oracle says it must.
///
/// The random walk in MapHubTests and the hub fuzz target share it, and differ only in where the
/// operations come from (a seeded generator, libFuzzer's bytes). Every method returns nil when
/// the hub did exactly what it should, else a description of the first difference. Each applies
/// the operation to the oracle before comparing, in a statement of its own: as an argument of
/// `compare` the mutation would come after `self` was read for the call, and `compare` would see
/// the oracle as it was.
public struct CheckedMapHub {
    public private(set) var hub: MapHub
    public private(set) var oracle: MapHubOracle
    /// Deliveries of the operation in progress (kept to reuse its storage).
    private var out: [PinDelivery] = []
    /// Operations checked so far: every 16th also checks the JSON every held pin keeps.
    private var operations = 0

    public init(settings: PinSettings) {
        hub = MapHub(settings: settings)
        oracle = MapHubOracle(settings: settings)
    }

    public mutating func subscribe(_ subscriber: MapHubOracle.SubscriberID, area: GeoArea, categories: UInt64?,
                                   viewer: GeoPoint? = nil) -> String? {
        let reply = hub.subscribe(subscriber, area: area, categories: categories, viewer: viewer)
        let expected = oracle.subscribe(subscriber, area: area, categories: categories, viewer: viewer)
        guard reply.truncated == expected.truncated, reply.pins == expected.pins else {
            return "subscribe \(subscriber) to \(area): replied \(reply.pins.map(\.id)) truncated \(reply.truncated), "
                + "expected \(expected.pins.map(\.id)) truncated \(expected.truncated)"
        }
        if let pin = reply.pins.first(where: { $0.json == nil || Self.staleJSON($0) }) {
            return "subscribe \(subscriber): pin \(pin.id) in the reply has \(pin.json == nil ? "no JSON" : "stale JSON")"
        }
        return sizes(after: "subscribe \(subscriber)")
    }

    public mutating func unsubscribe(_ subscriber: MapHubOracle.SubscriberID) -> String? {
        hub.unsubscribe(subscriber)
        oracle.unsubscribe(subscriber)
        return sizes(after: "unsubscribe \(subscriber)")
    }

    public mutating func create(_ draft: PinDraft, id: PinID, editDigest: TokenDigest, now: Int64) -> String? {
        out.removeAll(keepingCapacity: true)
        let result = hub.create(draft, id: id, editDigest: editDigest, now: now, out: &out)
        let expected = oracle.create(draft, id: id, editDigest: editDigest, now: now)
        return compare("create \(id) at \(draft.point)", result, expected)
    }

    public mutating func update(_ id: PinID, digest: TokenDigest, changes: PinChanges, now: Int64) -> String? {
        out.removeAll(keepingCapacity: true)
        let result = hub.update(id, digest: digest, changes: changes, now: now, out: &out)
        let expected = oracle.update(id, digest: digest, changes: changes, now: now)
        return compare("update \(id) with \(changes)", result, expected)
    }

    public mutating func delete(_ id: PinID, digest: TokenDigest) -> String? {
        out.removeAll(keepingCapacity: true)
        let result = hub.delete(id, digest: digest, out: &out)
        let expected = oracle.delete(id, digest: digest)
        return compare("delete \(id)", result, expected)
    }

    public mutating func vote(_ id: PinID, voter: UInt64, value: Int8) -> String? {
        out.removeAll(keepingCapacity: true)
        let result = hub.vote(id, voter: voter, value: value, out: &out)
        let expected = oracle.vote(id, voter: voter, value: value)
        guard result == expected.result else { return "vote \(value) by \(voter) on \(id): answered \(result), expected \(expected.result)" }
        if let pin = hub.store[id], Self.staleJSON(pin) { return "vote on \(id): the store keeps stale JSON" }
        return deliveries("vote on \(id)", expected: expected.notices) ?? sizes(after: "vote on \(id)")
    }

    public mutating func expire(now: Int64) -> String? {
        out.removeAll(keepingCapacity: true)
        let removed = hub.expire(now: now, out: &out)
        let expected = oracle.expire(now: now)
        if removed.count != expected.removed { return "expire at \(now): reported \(removed.count) pins removed, expected \(expected.removed)" }
        return deliveries("expire at \(now)", expected: expected.notices) ?? sizes(after: "expire at \(now)")
    }

    // MARK: comparing

    /// `operation` is only described when something differs: the fuzz target runs millions of
    /// operations that pass, and describing each (ids, points, changes) would be wasted work.
    private mutating func compare(_ operation: @autoclosure () -> String, _ result: Result<Pin, PinFailure>,
                         _ expected: (result: Result<Pin, PinFailure>, notices: [PinNotice])) -> String? {
        switch (result, expected.result) {
        case (.success(let pin), .success(let want)) where pin == want && pin.cell == want.cell && pin.json != nil && !Self.staleJSON(pin)
                                                          && !(hub.store[pin.id].map(Self.staleJSON) ?? false):
            break
        case (.failure(let failure), .failure(let want)) where failure == want:
            break
        default:
            return "\(operation()): answered \(result), expected \(expected.result)"
        }
        return deliveries(operation(), expected: expected.notices) ?? sizes(after: operation())
    }

    /// The operation's deliveries against the oracle's notices; no delivery may be addressed to nobody.
    private func deliveries(_ operation: @autoclosure () -> String, expected: [PinNotice]) -> String? {
        if out.contains(where: { $0.recipients.isEmpty }) { return "\(operation()): a delivery with no recipients" }
        if let d = out.first(where: { $0.pin.json == nil || Self.staleJSON($0.pin) }) {
            return "\(operation()): the \(d.kind) delivery of \(d.pin.id) has \(d.pin.json == nil ? "no JSON" : "stale JSON")"
        }
        guard let difference = PinNotice.difference(expected: expected, delivered: PinNotice.flatten(out)) else { return nil }
        return "\(operation()): \(difference)"
    }

    /// The hub holds as many pins and subscriptions as the oracle; every 16th operation, its
    /// cluster counts equal a recount and no pin it holds keeps JSON that differs from its fields (the pins an operation touches are
    /// checked every time, where it is compared).
    private mutating func sizes(after operation: @autoclosure () -> String) -> String? {
        operations += 1
        guard hub.store.count == oracle.pins.count, hub.subscriptions.count == oracle.subscriptions.count else {
            return "after \(operation()): hub holds \(hub.store.count) pins and \(hub.subscriptions.count) subscriptions, "
                + "expected \(oracle.pins.count) and \(oracle.subscriptions.count)"
        }
        if operations % 16 == 0, let stale = hub.store.pins.values.first(where: Self.staleJSON) {
            return "after \(operation()): the store keeps stale JSON for \(stale.id)"
        }
        // The cluster counts, kept change by change, against a recount of the pins held.
        if operations % 16 == 0, hub.store.clusterCountsByName() != hub.store.clusterCountsByName(recount: true) {
            return "after \(operation()): the cluster counts differ from a recount"
        }
        return nil
    }

    /// Whether `pin` keeps JSON (`Pin.json`, which replies and events copy as it is) that is not
    /// what its fields encode to now.
    public static func staleJSON(_ pin: Pin) -> Bool {
        guard let json = pin.json else { return false }
        return json != ServerMessages.pinJSON(pin)
    }
}
