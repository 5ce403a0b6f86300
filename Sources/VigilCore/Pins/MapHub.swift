import VigilGeo

/// The live map: pins and the subscriptions that watch them, as pure state transitions.
///
/// Each operation changes the state and appends the resulting deliveries (event + recipients) to
/// `out`, in the order the changes were applied. The hub never touches a socket: the server
/// encodes each delivery once and queues its bytes on every recipient's connection.
public struct MapHub: Sendable {
    public typealias SubscriberID = SubscriptionIndex.SubscriberID

    public let settings: PinSettings
    public internal(set) var store = PinStore()
    public internal(set) var subscriptions = SubscriptionIndex()
    /// Subscriptions to counts instead of pins (MapHub+Clusters.swift).
    public internal(set) var clusterSubscriptions = ClusterIndex()

    public init(settings: PinSettings) {
        self.settings = settings
        store.countClusters(precisions: settings.clusterPrecisionMin...settings.clusterPrecisionMax)
    }

    // MARK: subscriptions

    /// Subscribes (replacing any previous subscription) and returns the pins now inside. `viewer`
    /// is the subscriber's own position, for pins with a range (`PinReach`); without it those
    /// pins are not shown.
    public mutating func subscribe(_ subscriber: SubscriberID, area: GeoArea, categories: UInt64?,
                                   viewer: GeoPoint? = nil) -> (pins: [Pin], truncated: Bool) {
        let (precision, cells) = GeohashCover.choose(covering: area, budget: settings.coverCellBudget,
                                                     minPrecision: settings.cellPrecisionMin, maxPrecision: settings.cellPrecisionMax)
        let mask = categories ?? settings.allCategories
        unsubscribeClusters(subscriber)
        subscriptions.set(subscriber, .init(area: area, categories: mask, precision: precision, cells: cells, viewer: viewer))
        var reply = store.pins(in: area, cells: cells, precision: precision, categories: mask, settings: settings,
                               limit: settings.maxSubscribePins, viewer: viewer)
        // Pins restored at startup are encoded the first time someone is shown them; after that,
        // like every pin created or edited since, they are copied into the reply as bytes.
        for i in reply.pins.indices where reply.pins[i].json == nil {
            reply.pins[i] = encoded(reply.pins[i])
        }
        return reply
    }

    public mutating func unsubscribe(_ subscriber: SubscriberID) {
        subscriptions.remove(subscriber)
        unsubscribeClusters(subscriber)
    }

    // MARK: writes

    /// Creates a pin owned by whoever holds the token whose digest is `editDigest`.
    public mutating func create(_ draft: PinDraft, id: PinID, editDigest: TokenDigest, now: Int64, out: inout [PinDelivery]) -> Result<Pin, PinFailure> {
        guard store.count < settings.maxPins else { return .failure(.capacityExceeded) }
        var pin = Pin(id: id, point: draft.point, title: draft.title, description: draft.description,
                      category: draft.category, createdAt: now, expiresAt: now + Int64(draft.ttlSeconds) * 1000,
                      editDigest: editDigest)
        pin.rangeMeters = draft.rangeMeters
        let stored = encoded(store.insert(pin))
        deliver(.added, stored, out: &out)
        return .success(stored)
    }

    /// Applies an owner's edit. Subscribers that saw the pin and still do get `updated`; those it
    /// left get `removed(moved)`; those it entered get `added`.
    public mutating func update(_ id: PinID, digest: TokenDigest, changes: PinChanges, now: Int64, out: inout [PinDelivery]) -> Result<Pin, PinFailure> {
        guard let old = store[id], old.editDigest.matches(digest) else { return .failure(.forbidden) }
        var pin = old
        if changes.lat != nil || changes.lon != nil {
            pin.point = GeoPoint(lat: changes.lat ?? old.point.lat, lon: changes.lon ?? old.point.lon)
            pin.cell = Geohash.cell(pin.point, precision: Geohash.maxPrecision)
        }
        if let title = changes.title { pin.title = title }
        if let description = changes.description { pin.description = description }
        if let category = changes.category { pin.category = category }
        if let ttl = changes.ttlSeconds { pin.expiresAt = now + Int64(ttl) * 1000 }
        switch changes.range {
        case .set(let meters)?: pin.rangeMeters = meters
        case .remove?: pin.rangeMeters = nil
        case nil: break
        }
        pin.updatedAt = now
        store.replace(pin)
        pin = encoded(pin)
        deliverTransition(from: old, to: pin, out: &out)
        return .success(pin)
    }

    public mutating func delete(_ id: PinID, digest: TokenDigest, out: inout [PinDelivery]) -> Result<Pin, PinFailure> {
        guard let pin = store[id], pin.editDigest.matches(digest) else { return .failure(.forbidden) }
        store.remove(id)
        deliver(.removed(.deleted), pin, out: &out)
        return .success(pin)
    }

    /// Records `voter`'s vote (+1 or -1), replacing its earlier one. When `down - up` reaches
    /// the threshold the pin is removed for everyone (`flagged`). The voter is whatever number the
    /// server gives a source of votes (one per address, so reconnecting does not vote again).
    ///
    /// Voting the value the voter has already changes nothing and delivers nothing
    /// (`.unchanged`); a new voter on a pin with `maxVotersPerPin` voters is refused
    /// (`.tooManyVoters`), while its voters may still change theirs. A vote touches neither the
    /// pin's `updatedAt` nor its place in the indexes: it costs a dictionary update, not a re-index.
    public mutating func vote(_ id: PinID, voter: UInt64, value: Int8, out: inout [PinDelivery]) -> Result<VoteOutcome, PinFailure> {
        precondition(value == 1 || value == -1)
        // Read through a temporary, gone before the write below: a copy of the pin held across
        // it would share the vote table and make the write copy all of it.
        guard let held = store[id].map({ (voters: $0.votes.count, previous: $0.votes[voter]) }) else { return .failure(.notFound) }
        if held.previous == value, let pin = store[id] {
            return .success(VoteOutcome(change: .unchanged, pin: pin, voter: voter, value: value))
        }
        if held.previous == nil && held.voters >= settings.maxVotersPerPin { return .failure(.tooManyVoters) }
        store.setVote(id, voter: voter, value: value)
        guard let pin = store[id].map({ encoded($0) }) else { return .failure(.notFound) }
        if pin.down - pin.up >= settings.voteFlagThreshold {
            store.remove(id)
            deliver(.removed(.flagged), pin, out: &out)
            return .success(VoteOutcome(change: .flagged, pin: pin, voter: voter, value: value))
        }
        deliver(.updated, pin, out: &out)
        return .success(VoteOutcome(change: .counted, pin: pin, voter: voter, value: value))
    }

    /// Removes every pin due at `now` and tells its subscribers; returns the pins removed (all of
    /// them, also those nobody was told of: the server counts each against its creator's budget).
    @discardableResult
    public mutating func expire(now: Int64, out: inout [PinDelivery]) -> [Pin] {
        let expired = store.removeExpired(now: now)
        for pin in expired {
            deliver(.expired, pin, out: &out)
        }
        return expired
    }

    // MARK: fan-out

    /// `pin` with its JSON object (`Pin.json`), made now if it has none, and kept in the store
    /// when the store holds the pin. `pin` must be the pin as the store holds it (or held it last,
    /// for one just removed): every caller has just read or written it there.
    mutating func encoded(_ pin: Pin) -> Pin {
        guard pin.json == nil else { return pin }
        var pin = pin
        let json = ServerMessages.pinJSON(pin)
        pin.json = json
        store.keepJSON(json, for: pin.id)
        return pin
    }

    mutating func deliver(_ kind: PinEventKind, _ pin: Pin, out: inout [PinDelivery]) {
        guard let bit = settings.categoryIndex(pin.category) else { return }
        let recipients = subscriptions.recipients(of: pin, categoryBit: bit)
        if !recipients.isEmpty {
            out.append(PinDelivery(kind: kind, pin: encoded(pin), recipients: recipients))
        }
    }

    /// A pin whose category is not (or no longer) listed is seen by nobody: a pin restored from a
    /// snapshot may carry a category the operator has since removed. So an edit that gives it a
    /// listed category is an `added` for the subscribers that now see it (and the other way round
    /// a `removed(moved)`), not a change nobody hears of. The same holds for a pin's reach
    /// (`PinReach`): a move, or a new or removed `range_m`, is an `added` for the subscribers it
    /// now reaches and a `removed(moved)` for those it no longer does.
    func deliverTransition(from old: Pin, to new: Pin, out: inout [PinDelivery]) {
        let oldBit = settings.categoryIndex(old.category)
        let newBit = settings.categoryIndex(new.category)
        func sees(_ subscriber: SubscriberID, _ pin: Pin, _ bit: Int?) -> Bool {
            guard let bit else { return false }
            return subscriptions.sees(subscriber, pin, categoryBit: bit)
        }
        var removed: [SubscriberID] = []
        var added: [SubscriberID] = []
        // Those who saw it and still do (for most edits, all who saw it) in one array sized once.
        let updated = oldBit.map { oldBit in
            subscriptions.recipients(of: old, categoryBit: oldBit, where: { sees($0, new, newBit) }, else: { removed.append($0) })
        } ?? []
        if let newBit {
            subscriptions.forEachRecipient(of: new, categoryBit: newBit) { subscriber in
                if !sees(subscriber, old, oldBit) { added.append(subscriber) }
            }
        }
        if !removed.isEmpty { out.append(PinDelivery(kind: .removed(.moved), pin: new, recipients: removed)) }
        if !added.isEmpty { out.append(PinDelivery(kind: .added, pin: new, recipients: added)) }
        if !updated.isEmpty { out.append(PinDelivery(kind: .updated, pin: new, recipients: updated)) }
    }
}
