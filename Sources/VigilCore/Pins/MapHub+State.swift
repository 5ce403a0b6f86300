/// Durable state: the map's pins out for a snapshot, and back in at startup.
///
/// Subscriptions are not state worth keeping: they belong to connections, which do not survive
/// a restart (clients subscribe again when they reconnect).
extension MapHub {
    /// Every live pin with its votes, in creation order. Cheap to call on a copy of the hub
    /// (copy-on-write), so a snapshot can be exported on a writer thread while the loop goes on.
    public func exportPins() -> [Pin] {
        store.exportPins()
    }

    /// Rebuilds the pins of a snapshot or journal replay, indexes and expiry included, keeping
    /// each pin's `sequence`. Produces no deliveries: nobody subscribes yet. Meant for a hub that
    /// holds no pins yet; see `PinStore.restore` for duplicates. Pins past their expiry are taken
    /// too: the next `expire(now:out:)` removes them (with no subscribers, silently).
    ///
    /// `settings.maxPins` is not applied: acknowledged pins are never dropped for a limit that
    /// was lowered meanwhile; creating new ones is refused until the store is back under it.
    public mutating func restorePins(_ pins: [Pin]) {
        store.restore(pins)
    }
}

extension MapHub {
    /// A hub over a store rebuilt elsewhere (a replayed `PinStore`), with no subscriptions. Lets
    /// startup build the million-pin dictionary and indexes once, in the store, instead of once
    /// for replay and again for the hub.
    public init(settings: PinSettings, store: PinStore) {
        self.init(settings: settings)
        self.store = store
        self.store.countClusters(precisions: settings.clusterPrecisionMin...settings.clusterPrecisionMax)
    }
}

extension MapHub {
    /// The ids of every pin, in no particular order: the list a snapshot taken in slices walks
    /// (see `SnapshotWriter` in VigilState), fetching each pin with `store[id]` when its slice
    /// comes. Copying a million ids takes milliseconds; copying the pins would copy their storage.
    public var pinIDs: [PinID] { Array(store.pins.keys) }
}
