import Foundation

/// The client's map subscription: its pin set (or cells), kept by replies and events.
final class MapRecord {
    let order: Int
    /// Its last request (a restore skips a record whose request still waits to be sent).
    var lastRequest: RequestRecord?
    var fields: JSONObject
    let clusters: Bool
    var pins: [String: Pin] = [:]
    var cells: [String: ClusterCell] = [:]
    var precision: Int?
    var truncated = false
    let pinEvents: AsyncStream<MapEvent>.Continuation?
    let clusterEvents: AsyncStream<ClustersEvent>.Continuation?

    init(order: Int, fields: JSONObject, pinEvents: AsyncStream<MapEvent>.Continuation) {
        self.order = order
        self.fields = fields
        self.clusters = false
        self.pinEvents = pinEvents
        self.clusterEvents = nil
    }

    init(order: Int, fields: JSONObject, clusterEvents: AsyncStream<ClustersEvent>.Continuation) {
        self.order = order
        self.fields = fields
        self.clusters = true
        self.pinEvents = nil
        self.clusterEvents = clusterEvents
    }

    func finish() {
        pinEvents?.finish()
        clusterEvents?.finish()
    }

    func fail(_ e: VigilError) {
        pinEvents?.yield(.error(e))
        clusterEvents?.yield(.error(e))
    }

    /// A subscribe reply: the full set, reconciled with the one held.
    func apply(_ reply: JSONObject, resubscribed: Bool) -> VigilError? {
        if clusters {
            guard let view = try? JSONValue.object(reply).decode(ClustersView.self) else {
                return VigilError(code: VigilError.Code.badMessage, message: "a clusters reply could not be read")
            }
            precision = view.precision
            cells = Dictionary(view.clusters.map { ($0.cell, $0) }, uniquingKeysWith: { _, b in b })
            clusterEvents?.yield(.snapshot(view, resubscribed: resubscribed))
            return nil
        }
        guard let list = try? (reply["pins"] ?? .array([])).decode([Pin].self) else {
            return VigilError(code: VigilError.Code.badMessage, message: "a subscribe reply's pins could not be read")
        }
        truncated = reply["truncated"]?.boolValue ?? false
        var next: [String: Pin] = [:]
        for p in list { next[p.id] = p }
        for (id, pin) in pins.sorted(by: { $0.key < $1.key }) where next[id] == nil {
            pins[id] = nil
            pinEvents?.yield(.removed(pin, reason: .reconciled))
        }
        for pin in list {
            let old = pins[pin.id]
            pins[pin.id] = pin
            if old == nil { pinEvents?.yield(.added(pin)) } else if old != pin { pinEvents?.yield(.updated(pin)) }
        }
        pinEvents?.yield(.synced(count: list.count, truncated: truncated, resubscribed: resubscribed))
        return nil
    }

    func event(_ type: String, _ msg: JSONObject) {
        if type == "clusters.changed" {
            guard clusters else { return }
            guard let p = msg["precision"]?.intValue, let cs = try? (msg["cells"] ?? .array([])).decode([ClusterCell].self) else {
                fail(VigilError(code: VigilError.Code.badMessage, message: "clusters.changed could not be read", reply: msg))
                return
            }
            precision = p
            for c in cs { cells[c.cell] = c.count == 0 ? nil : c }
            clusterEvents?.yield(.changed(precision: p, cells: cs))
            return
        }
        guard !clusters else { return }
        guard let pin = try? msg["pin"]?.decode(Pin.self) else {
            fail(VigilError(code: VigilError.Code.badMessage, message: "\(type) without a readable pin", reply: msg))
            return
        }
        switch type {
        case "pin.added", "pin.updated":
            let had = pins[pin.id] != nil
            pins[pin.id] = pin
            pinEvents?.yield(had ? .updated(pin) : .added(pin))
        case "pin.removed", "pin.expired":
            guard pins.removeValue(forKey: pin.id) != nil else { return }
            let reason = type == "pin.expired" ? PinRemoval.expired : PinRemoval(msg["reason"]?.stringValue ?? "deleted")
            pinEvents?.yield(.removed(pin, reason: reason))
        default:
            break
        }
    }
}

/// A map subscription (`subscribe`): its ``events`` and its current pins, restored and
/// reconciled after each reconnect.
public struct VigilMap: Sendable {
    /// The client.
    public let client: VigilClient
    let order: Int
    /// The pin set's changes, in order: one consumer.
    public let events: AsyncStream<MapEvent>

    /// The pins held now.
    public func pins() async -> [Pin] { await client.mapPins(order) }

    /// Moves the subscription (a pan, or a viewer that walked): the reply's full set is
    /// reconciled with the one held (pins that left are ``PinRemoval/reconciled``).
    public func update(area: Area, categories: [String]? = nil, viewer: Coordinate? = nil) async throws(VigilError) {
        try await client.moveSubscription(order, fields: VigilClient.subscribeFields(area, categories, viewer, clusters: false))
    }

    /// Ends the subscription.
    public func unsubscribe() async throws(VigilError) { try await client.unsubscribe() }
}

/// A clusters view (`subscribe` with `"view":"clusters"`).
public struct VigilClusters: Sendable {
    /// The client.
    public let client: VigilClient
    let order: Int
    /// The snapshots and changes, in order: one consumer.
    public let events: AsyncStream<ClustersEvent>

    /// The non-empty cells held now, and their precision.
    public func cells() async -> (precision: Int?, cells: [ClusterCell]) { await client.clusterCells(order) }

    /// Moves the view (a zoom or pan).
    public func update(area: Area, categories: [String]? = nil) async throws(VigilError) {
        try await client.moveSubscription(order, fields: VigilClient.subscribeFields(area, categories, nil, clusters: true))
    }

    /// Ends the view.
    public func unsubscribe() async throws(VigilError) { try await client.unsubscribe() }
}

extension VigilClient {
    static func subscribeFields(_ area: Area, _ categories: [String]?, _ viewer: Coordinate?, clusters: Bool) -> JSONObject {
        var f: JSONObject = ["area": area.json]
        if let categories { f["categories"] = .array(categories.map { .string($0) }) }
        if let viewer { f["viewer"] = ["lat": .number(viewer.lat), "lon": .number(viewer.lon)] }
        if clusters { f["view"] = "clusters" }
        return f
    }

    /// Subscribes to the pins of `area` (of `categories`; with `viewer`, the pins with a reach
    /// that reach it too), replacing the previous subscription. The subscription is sent again
    /// after each reconnect, and its pin set reconciled from the new reply.
    ///
    /// A subscribe whose connection went before the reply is not an error: it is sent again
    /// with the reconnect, and the events say when it is answered.
    public func subscribe(area: Area, categories: [String]? = nil, viewer: Coordinate? = nil) async throws(VigilError) -> VigilMap {
        let (stream, cont) = AsyncStream<MapEvent>.makeStream()
        let rec = MapRecord(order: nextID, fields: VigilClient.subscribeFields(area, categories, viewer, clusters: false), pinEvents: cont)
        nextID += 1
        try await startSubscription(rec)
        return VigilMap(client: self, order: rec.order, events: stream)
    }

    /// Subscribes to the counts per cell of `area` (a zoomed-out map), replacing the previous subscription.
    public func subscribeClusters(area: Area, categories: [String]? = nil) async throws(VigilError) -> VigilClusters {
        let (stream, cont) = AsyncStream<ClustersEvent>.makeStream()
        let rec = MapRecord(order: nextID, fields: VigilClient.subscribeFields(area, categories, nil, clusters: true), clusterEvents: cont)
        nextID += 1
        try await startSubscription(rec)
        return VigilClusters(client: self, order: rec.order, events: stream)
    }

    func startSubscription(_ rec: MapRecord) async throws(VigilError) {
        if state == .closed { throw closedError("subscribe") }
        map?.finish()
        map = rec
        do {
            try await sendSubscribe(rec, resubscribed: false)
        } catch {
            if error.code == VigilError.Code.disconnected, state != .closed { return }
            if map === rec { map = nil }
            rec.finish()
            throw error
        }
    }

    func sendSubscribe(_ rec: MapRecord, resubscribed: Bool) async throws(VigilError) {
        _ = try await withRateLimit("subscribe") { () async throws(VigilError) -> JSONObject in
            try await self.result(of: self.startSubscribe(rec, resubscribed: resubscribed))
        }
    }

    func startSubscribe(_ rec: MapRecord, resubscribed: Bool) throws(VigilError) -> RequestRecord {
        let fields = rec.fields
        let r = try start("subscribe", fields, timeout: options.requestTimeout, onReply: { reply in
            guard self.map === rec, rec.fields == fields else { return nil }
            return rec.apply(reply, resubscribed: resubscribed)
        })
        rec.lastRequest = r
        return r
    }

    func resubscribe(_ rec: MapRecord) {
        background({ () throws(VigilError) -> RequestRecord in try self.startSubscribe(rec, resubscribed: true) }) { error in
            guard let error, VigilClient.reportable(error), self.map === rec else { return }
            if error.code == VigilError.Code.rateLimited {
                // Waited out and retried as any subscribe.
                let wait = max(.zero, error.retryAfter ?? .seconds(1))
                let deadline = self.clock.now + wait
                self.emit(.rateLimited(op: "subscribe", retryAfter: wait))
                Task {
                    do { try await self.clock.sleep(until: deadline) } catch { return }
                    do throws(VigilError) {
                        try await self.sendSubscribe(rec, resubscribed: true)
                    } catch {
                        if VigilClient.reportable(error), self.map === rec { rec.fail(error) }
                    }
                }
                return
            }
            rec.fail(error)
        }
    }

    func moveSubscription(_ order: Int, fields: JSONObject) async throws(VigilError) {
        guard let rec = map, rec.order == order else {
            throw VigilError(code: "not_subscribed", message: "this subscription was replaced or ended", op: "subscribe")
        }
        rec.fields = fields
        do {
            try await sendSubscribe(rec, resubscribed: false)
        } catch {
            if error.code == VigilError.Code.disconnected, state != .closed { return }
            throw error
        }
    }

    func mapPins(_ order: Int) -> [Pin] {
        guard let rec = map, rec.order == order else { return [] }
        return rec.pins.values.sorted { $0.createdAt > $1.createdAt }
    }

    func clusterCells(_ order: Int) -> (precision: Int?, cells: [ClusterCell]) {
        guard let rec = map, rec.order == order else { return (nil, []) }
        return (rec.precision, rec.cells.values.sorted { $0.cell < $1.cell })
    }

    /// Ends the map subscription (pins or clusters).
    public func unsubscribe() async throws(VigilError) {
        map?.finish()
        map = nil
        if state == .open { _ = try await request("unsubscribe") }
    }

    // MARK: pins

    /// Creates a pin; returns it with its edit token.
    public func createPin(_ pin: NewPin, timeout: Duration? = nil) async throws(VigilError) -> CreatedPin {
        let reply = try await request("pin.create", ["pin": pin.json], timeout: timeout)
        return try VigilClient.read(CreatedPin.self, .object(reply), "pin.create")
    }

    /// Edits a pin (`changes`: any of `lat`, `lon`, `title`, `description`, `category`,
    /// `ttl_s`, `range_m`, with `range_m` `null` to remove the reach); returns it.
    public func updatePin(id: String, editToken: String, changes: JSONObject, timeout: Duration? = nil) async throws(VigilError) -> Pin {
        let reply = try await request("pin.update", ["id": .string(id), "edit_token": .string(editToken), "changes": .object(changes)], timeout: timeout)
        return try VigilClient.read(Pin.self, reply["pin"] ?? .null, "pin.update")
    }

    /// Deletes a pin.
    public func deletePin(id: String, editToken: String, timeout: Duration? = nil) async throws(VigilError) {
        _ = try await request("pin.delete", ["id": .string(id), "edit_token": .string(editToken)], timeout: timeout)
    }

    /// Votes on a pin (`up`: +1, else −1); returns it with its new counts.
    public func vote(pin id: String, up: Bool, timeout: Duration? = nil) async throws(VigilError) -> Pin {
        let reply = try await request("pin.vote", ["id": .string(id), "value": up ? 1 : -1], timeout: timeout)
        return try VigilClient.read(Pin.self, reply["pin"] ?? .null, "pin.vote")
    }

    static func read<T: Decodable>(_ type: T.Type, _ value: JSONValue, _ op: String) throws(VigilError) -> T {
        do {
            return try value.decode(T.self)
        } catch {
            throw VigilError(code: VigilError.Code.badMessage, message: "\(op): the reply could not be read (\(error))", op: op)
        }
    }
}
