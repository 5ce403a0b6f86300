import VigilCore
import VigilGeo

/// What one sampled map subscriber saw, split into subscription epochs, for `MapChecker`.
///
/// The connection layer calls it in the order things happen on that connection: requests when
/// they are sent, replies and events when they are read. The split rests on TCP ordering: the
/// server answers a `subscribe` before sending any event for the new area, and every event
/// generated before it processed the `subscribe` is already ahead of the reply in the stream. So
/// an event belongs to the epoch of the last reply received before it.
///
/// An event received while no subscription is current (before the first reply, after an
/// unsubscribe's reply) is a server error, counted in `strayEvents`.
public struct SubscriberLog: Sendable {
    enum Pending: Sendable {
        case subscribe(area: GeoArea, viewer: GeoPoint?, sentNs: UInt64)
        case unsubscribe(sentNs: UInt64)
    }

    /// The subscriber's number, used in error messages.
    public let subscriber: Int
    /// Closed epochs, then the current one (its `end` is `.open` until something ends it).
    public private(set) var epochs: [MapEpoch] = []
    /// Pin events that arrived with no current subscription.
    public private(set) var strayEvents = 0
    private var pending: [Pending] = []
    private var current = false

    public init(subscriber: Int) {
        self.subscriber = subscriber
    }

    /// A `subscribe` for `area` (from `viewer`, if it carries one) is being sent (take the time
    /// before writing it).
    public mutating func subscribeSent(area: GeoArea, viewer: GeoPoint? = nil, atNs: UInt64) {
        pending.append(.subscribe(area: area, viewer: viewer, sentNs: atNs))
    }

    /// An `unsubscribe` is being sent.
    public mutating func unsubscribeSent(atNs: UInt64) {
        pending.append(.unsubscribe(sentNs: atNs))
    }

    /// The oldest pending request's `ok` arrived. For a subscribe, `snapshot` is its pins (see
    /// `observedPins`) and `truncated` its flag; for an unsubscribe both are ignored.
    public mutating func replyReceived(atNs: UInt64, snapshot: [ObservedPin] = [], truncated: Bool = false) {
        guard !pending.isEmpty else { return }
        switch pending.removeFirst() {
        case .subscribe(let area, let viewer, let sentNs):
            closeCurrent(.request(sentNs: sentNs))
            epochs.append(MapEpoch(area: area, subscribeSentNs: sentNs, replyNs: atNs,
                                   snapshot: snapshot, truncated: truncated, viewer: viewer))
            current = true
        case .unsubscribe(let sentNs):
            closeCurrent(.request(sentNs: sentNs))
        }
    }

    /// The oldest pending request was refused (an error reply): the subscription is unchanged.
    public mutating func requestRefused() {
        if !pending.isEmpty { pending.removeFirst() }
    }

    /// A pin event arrived.
    public mutating func event(_ kind: PinEventKind, pin: PinID, observedVersion: Int) {
        guard current, !epochs.isEmpty else {
            strayEvents += 1
            return
        }
        epochs[epochs.count - 1].events.append(MapEvent(kind: kind, pin: pin, observedVersion: observedVersion))
    }

    /// A scanned event; one whose id is not a UUID cannot be a pin of this run and is dropped.
    public mutating func event(_ scanned: ScannedPinEvent) {
        guard let id = scanned.pin.id else { return }
        event(scanned.kind, pin: id, observedVersion: scanned.pin.observedVersion ?? -1)
    }

    /// The connection closed: the current epoch ends without certainty, pending requests are void.
    public mutating func connectionLost() {
        closeCurrent(.connectionLost)
        pending.removeAll()
    }

    /// The scanned pins of a subscribe reply as a snapshot (pins without a UUID id are dropped).
    public static func observedPins(_ pins: [ScannedPin]) -> [ObservedPin] {
        pins.compactMap { p in
            p.id.map { ObservedPin(pin: $0, observedVersion: p.observedVersion ?? -1) }
        }
    }

    private mutating func closeCurrent(_ end: EpochEnd) {
        if current, !epochs.isEmpty {
            epochs[epochs.count - 1].end = end
        }
        current = false
    }
}
