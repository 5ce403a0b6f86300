import VigilCore

/// Durable state being rebuilt: a snapshot's pins and streams, with journal records applied on
/// top, before it becomes live hubs.
///
/// Pins are replayed into a `PinStore`, which becomes the map hub's store as it is: the snapshot's
/// pins are indexed once, in O(n), and never copied into a second million-entry dictionary.
/// Streams are replayed as plain values and armed in a hub at the end (their timers depend on
/// `now`). The same input gives the same image, whatever the order of dictionary iteration:
/// every rule below depends only on the record and the state it applies to.
///
/// Rules, chosen so that applying a record twice changes nothing:
/// - `pinPut` sets the pin (insert or replace; a pin with sequence 0 keeps the held one's).
/// - `pinVote` sets that voter's vote on the pin if held (the same vote again changes nothing; a
///   pin not held was removed later in the journal, or before a snapshot slice was taken). No
///   flag threshold is applied: the hub applied it when the vote was taken, with the threshold in
///   force then, and journaled a vote that flagged as the pin's removal (`JournalRecord.afterVote`),
///   so replay follows the hub without knowing the threshold; applying today's would remove pins
///   the hub kept. A cluster's stream carries a flagging vote as the vote (every node applies the
///   threshold, `MapHub+Replicated`), but the stream is applied to live hubs (`ReplicatedApply`),
///   never through an image: a node restores a snapshot and applies the stream after it.
/// - `pinRemove`, `panicRemove`: remove if held.
/// - `panicStart` of a stream held already is skipped.
/// - `panicEvent` applies the next seq, skips a seq already held, refuses a gap or an event after
///   the end (see `PanicStream.replay`).
/// - `panicInvite` adds a digest not yet live, `panicRevoke` removes it if live.
/// - `panicRekey` replaces an e2e stream's keys (the keys it holds already: a duplicate).
/// - `circlePut` sets the circle (it holds the whole state), `circleRemove` removes it if held.
/// A record that contradicts the state (an event for a stream never started, a gap) changes
/// nothing and is noted in `issues`: replay goes on, since the rest of the journal is still good.
public struct StateImage: Sendable {
    /// The pins, indexed as a live store (creation order and sequence numbers as recorded).
    public private(set) var pinStore = PinStore()
    public var streams: [StreamID: PanicStream] = [:]
    /// Check-in circles: each `circlePut` replaces the circle whole.
    public var circles: [CircleID: CheckinCircle] = [:]
    /// Notices' deliveries that are done (`noticeSettled`), by delivery.
    public var settlements: [DeliveryKey<SubscriptionID>: NoticeSettlement] = [:]
    /// Acknowledgements (`noticeAcked`), in the order recorded.
    public var acks: [NoticeAck] = []
    /// Answers kept for idempotency keys (`answerKept`), oldest first; the first one per lookup
    /// counts (`IdempotencyTable.insert` skips a later one).
    public var keptAnswers: [KeptAnswer] = []
    private var keptLookups: Set<[UInt8]> = []
    /// The first `maxIssuesKept` records that could not be applied, described for the log.
    public private(set) var issues: [String] = []
    /// All such records, including those past `maxIssuesKept`.
    public private(set) var issueCount = 0
    /// Records applied, and records that were already reflected (skipped as duplicates).
    public private(set) var appliedCount = 0
    public private(set) var duplicateCount = 0

    public static let maxIssuesKept = 100

    public init() {}

    public init(_ snapshot: StateSnapshot) {
        pinStore.restore(snapshot.pins)
        streams.reserveCapacity(snapshot.streams.count)
        for stream in snapshot.streams { streams[stream.id] = stream }
        for circle in snapshot.circles { circles[circle.id] = circle }
        for s in snapshot.settlements { settlements[s.key] = s }
        acks = snapshot.acks
        for a in snapshot.keptAnswers where keptLookups.insert(a.lookup).inserted { keptAnswers.append(a) }
    }

    /// The pins held, by id.
    public var pins: [PinID: Pin] { pinStore.pins }

    public mutating func apply(_ records: [JournalRecord]) {
        for record in records { apply(record) }
    }

    public mutating func apply(_ record: JournalRecord) {
        switch record {
        case .pinPut(var pin):
            let held = pinStore[pin.id]
            if pin.sequence == 0, let held { pin.sequence = held.sequence }
            if let held, held == pin, held.sequence == pin.sequence {
                duplicateCount += 1
                return
            }
            pinStore.restore([pin])
            appliedCount += 1
        case .pinRemove(let id):
            count(pinStore.remove(id) != nil)
        case .pinVote(let id, let voter, let value):
            // In place, no re-index: replaying a million votes costs a million dictionary updates.
            count(pinStore.setVote(id, voter: voter, value: value) == true)
        case .panicStart(let start):
            guard streams[start.id] == nil else { duplicateCount += 1; return }
            do {
                streams[start.id] = try start.stream()
                appliedCount += 1
            } catch {
                note("panicStart of stream \(start.id) refused: \(error)")
            }
        case .panicEvent(let id, let event):
            // Optional chaining mutates the stream in place (no copy, no force-unwrap).
            switch streams[id]?.replay(event) {
            case nil: note("event seq \(event.seq) for unknown stream \(id)")
            case .applied: appliedCount += 1
            case .alreadyApplied: duplicateCount += 1
            case .refused(let reason): note(reason)
            }
        case .panicInvite(let id, let digest):
            guard let added = streams[id]?.replayInvite(digest) else { return note("invitation for unknown stream \(id)") }
            count(added)
        case .panicRevoke(let id, let digest):
            // A revocation for a stream already gone is a no-op, as in the hub.
            count(streams[id]?.replayRevoke(digest) ?? false)
        case .panicRekey(let id, let keys):
            guard let replaced = streams[id]?.replayRekey(keys) else { return note("rekey for unknown stream \(id)") }
            count(replaced)
        case .panicRemove(let id):
            count(streams.removeValue(forKey: id) != nil)
        case .circlePut(let circle):
            count(circles.updateValue(circle, forKey: circle.id) != circle)
        case .circleRemove(let id):
            count(circles.removeValue(forKey: id) != nil)
        case .noticeSettled(let s):
            count(settlements.updateValue(s, forKey: s.key) != s)
        case .noticeAcked(let a):
            let held = acks.contains { $0.circle == a.circle && $0.notice == a.notice && $0.by == a.by }
            if !held { acks.append(a) }
            count(!held)
        case .answerKept(let a):
            let added = keptLookups.insert(a.lookup).inserted
            if added { keptAnswers.append(a) }
            count(added)
        }
    }

    /// The highest voter number on a held pin. The server's voter numbers restart from a counter
    /// after a restart: it should number new voters above this one, or a new voter could find (and
    /// silently change) an old one's vote.
    public var highestVoteSession: UInt64 {
        var highest: UInt64 = 0
        for pin in pinStore.pins.values {
            for session in pin.votes.keys where session > highest { highest = session }
        }
        return highest
    }

    /// Live hubs holding this state at `now`: pins past their expiry and ended streams past their
    /// grace are dropped (silently: nobody subscribes or watches yet), timers are re-armed.
    public func restore(pinSettings: PinSettings, panicSettings: PanicSettings, now: Int64) -> (map: MapHub, panic: PanicHub) {
        var map = MapHub(settings: pinSettings, store: pinStore)
        var nobody: [PinDelivery] = []
        map.expire(now: now, out: &nobody)
        var panic = PanicHub(settings: panicSettings)
        panic.restoreStreams(Array(streams.values), now: now)
        return (map, panic)
    }

    /// The circles as a live hub at `now` (see `CheckinHub.restoreCircles`).
    public func restoreCircles(settings: CheckinSettings, now: Int64) -> CheckinHub {
        var hub = CheckinHub(settings: settings)
        hub.restoreCircles(Array(circles.values), settlements: Array(settlements.values), acks: acks, now: now)
        return hub
    }

    /// The image as a snapshot (pins in creation order, streams and circles by id).
    public func snapshot(takenAt: Int64, journalSegment: UInt64, replicatedSequence: UInt64? = nil) -> StateSnapshot {
        StateSnapshot(takenAt: takenAt, journalSegment: journalSegment, pins: pinStore.exportPins(),
                      streams: streams.keys.sorted().compactMap { streams[$0] },
                      circles: circles.keys.sorted().compactMap { circles[$0] },
                      settlements: settlements.values.filter { circles[$0.circle] != nil }
                          .sorted { ($0.circle, $0.notice, $0.subscription) < ($1.circle, $1.notice, $1.subscription) },
                      acks: acks.filter { circles[$0.circle] != nil }.sorted { ($0.circle, $0.at) < ($1.circle, $1.at) },
                      replicatedSequence: replicatedSequence, keptAnswers: keptAnswers)
    }

    private mutating func count(_ changed: Bool) {
        if changed { appliedCount += 1 } else { duplicateCount += 1 }
    }

    private mutating func note(_ issue: String) {
        issueCount += 1
        if issues.count < Self.maxIssuesKept { issues.append(issue) }
    }
}
