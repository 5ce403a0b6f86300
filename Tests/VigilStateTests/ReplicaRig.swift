import Testing
import VigilGeo
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// One node's hubs, as V1Application holds them.
struct ReplicaNode {
    static let pinSettings: PinSettings = {
        var s = PinSettings()
        s.voteFlagThreshold = 2
        s.maxVotersPerPin = 4
        s.maxPins = 30
        return s
    }()
    static let panicSettings = PanicSettings(historyEvents: 5, staleAfterMs: 20_000, endedGraceMs: 60_000, maxWatchTokens: 3,
                                             maxStreams: 6, maxWatchersOnStart: 2, abandonAfterMs: 120_000, reservedShare: 0,
                                             maxTimerMs: 100_000)
    static let checkinSettings = CheckinSettings(maxCircles: 5, maxMembers: 3, requestsPerMinute: 2, idleLifetimeMs: 200_000, maxHomeMs: 60_000)

    var map = MapHub(settings: Self.pinSettings)
    var panic = PanicHub(settings: Self.panicSettings)
    var checkin = CheckinHub(settings: Self.checkinSettings)

    /// The durable state, as a snapshot's bytes: equal bytes, equal state.
    var stateBytes: [UInt8] {
        SnapshotCodec.encode(StateSnapshot(takenAt: 0, journalSegment: 0, pins: map.exportPins(), streams: panic.exportStreams(),
                                           circles: checkin.exportCircles()))
    }

    /// Everything one step delivered.
    struct Out {
        var pins: [PinDelivery] = []
        var panic: [PanicDelivery] = []
        var checkin: [CheckinDelivery] = []
        var isEmpty: Bool { pins.isEmpty && panic.isEmpty && checkin.isEmpty }
    }

    mutating func apply(_ record: JournalRecord, base: UInt64?, owner: WatcherID?, out: inout Out) -> ReplicatedOutcome {
        ReplicatedApply.apply(record, base: base, owner: owner, map: &map, panic: &panic, checkin: &checkin,
                              pins: &out.pins, panicOut: &out.panic, checkinOut: &out.checkin)
    }
}

/// Deliveries in a form that compares: kind, payload and recipients.
enum DeliveryText {
    static func pins(_ out: [PinDelivery]) -> [String] {
        out.map { d in
            let p = d.pin
            return "\(d.kind) \(p.id) \(p.point) \(p.title)|\(p.description)|\(p.category) \(p.updatedAt) \(p.expiresAt) "
                + "\(p.up)/\(p.down) \(p.rangeMeters.map(String.init) ?? "-") \(d.recipients)"
        }
    }

    static func panic(_ out: [PanicDelivery]) -> [String] { out.map { "\($0.stream) \($0.kind) \($0.recipients)" } }
    static func checkin(_ out: [CheckinDelivery]) -> [String] { out.map { "\($0.circle) \($0.kind) \($0.recipients)" } }

    /// Whether two steps delivered the same, in the same order (`ordered`) or as multisets.
    static func expectSame(_ a: ReplicaNode.Out, _ b: ReplicaNode.Out, ordered: Bool, _ what: @autoclosure () -> String,
                           sourceLocation: SourceLocation = #_sourceLocation) {
        func norm(_ x: [String]) -> [String] { ordered ? x : x.sorted() }
        #expect(norm(pins(a.pins)) == norm(pins(b.pins)), "\(what())", sourceLocation: sourceLocation)
        #expect(norm(panic(a.panic)) == norm(panic(b.panic)), "\(what())", sourceLocation: sourceLocation)
        #expect(norm(checkin(a.checkin)) == norm(checkin(b.checkin)), "\(what())", sourceLocation: sourceLocation)
    }
}
