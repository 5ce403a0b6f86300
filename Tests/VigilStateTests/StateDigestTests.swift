import Testing
import VigilGeo
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// The state digest: equal for equal durable state however it was built, different for any
/// difference in a durable field, blind to what is not state (connections, caches, the silence
/// notice) and to what has expired by its `now`.
@Suite struct StateDigestTests {
    static let now: Int64 = 1_700_000_025_000   // before the sample circle's home safe lapses
    static let rules = StateDigest.Rules(now: now, endedGraceMs: 3_600_000, circleIdleLifetimeMs: 2_592_000_000)

    static func digest(pins: [Pin] = [], streams: [PanicStream] = [], circles: [CheckinCircle] = [],
                       rules: StateDigest.Rules = rules) -> StateDigest {
        StateDigest.of(snapshot: StateSnapshot(takenAt: 1, journalSegment: 1, pins: pins, streams: streams, circles: circles), rules: rules)
    }

    /// The sample snapshot's pins and streams, with a circle, all alive at `now`.
    static func state() throws -> (pins: [Pin], streams: [PanicStream], circles: [CheckinCircle]) {
        let sample = SnapshotCodecTests.sample(seed: 5)
        let pins = sample.pins.map { pin in
            var p = pin
            p.expiresAt = now + 3_600_000
            return p
        }
        return (pins, sample.streams, [try CircleStateTests.circle(seed: 5, subscribed: true)])
    }

    // MARK: every durable field counts

    /// Each variant changes one durable field of one entity: every one must give a digest unlike
    /// the original's and unlike every other variant's.
    static func expectAllDistinct(_ variants: [(String, StateDigest)], from original: StateDigest,
                                  sourceLocation: SourceLocation = #_sourceLocation) {
        var seen: [String: String] = [original.hex: "the original"]
        for (name, digest) in variants {
            if let other = seen[digest.hex] {
                Issue.record("changing \(name) gives the same digest as \(other)", sourceLocation: sourceLocation)
            }
            seen[digest.hex] = name
        }
    }

    @Test func everyFieldOfAPinChangesTheDigest() throws {
        let (pins, streams, circles) = try Self.state()
        let original = Self.digest(pins: pins, streams: streams, circles: circles)
        let target = try #require(pins.firstIndex { !$0.votes.isEmpty })
        func variant(_ name: String, _ change: (inout Pin) -> Void) -> (String, StateDigest) {
            var changed = pins
            change(&changed[target])
            #expect(changed[target] != pins[target] || changed[target].sequence != pins[target].sequence, "\(name) changed nothing")
            return (name, Self.digest(pins: changed, streams: streams, circles: circles))
        }
        let voter = try #require(pins[target].votes.keys.min())
        let variants = [
            variant("lat") { $0.point = GeoPoint(lat: $0.point.lat + 1e-9, lon: $0.point.lon) },
            variant("lon") { $0.point = GeoPoint(lat: $0.point.lat, lon: $0.point.lon + 1e-9) },
            variant("title") { $0.title += "!" },
            variant("description") { $0.description += "." },
            variant("category") { $0.category = $0.category == "help" ? "hazard" : "help" },
            variant("created_at") { $0.createdAt -= 1 },
            variant("updated_at") { $0.updatedAt += 1 },
            variant("expires_at") { $0.expiresAt += 1 },
            variant("sequence") { $0.sequence += 1000 },
            variant("a new vote") { $0.setVote(999_999_999, 1) },
            variant("a vote changed") { $0.setVote(voter, -$0.votes[voter]!) },
            variant("a vote withdrawn") { $0.restoreVote(voter, to: nil) },
            variant("range_m set") { $0.rangeMeters = 500 },
            variant("edit digest") { pin in
                var other = Pin(id: pin.id, point: pin.point, title: pin.title, description: pin.description, category: pin.category,
                                createdAt: pin.createdAt, expiresAt: pin.expiresAt, editDigest: TestSecrets(seed: 77).digest(ofToken: "other"))
                other.updatedAt = pin.updatedAt
                other.votes = pin.votes
                other.up = pin.up
                other.down = pin.down
                other.sequence = pin.sequence
                pin = other
            },
            ("the pin removed", Self.digest(pins: pins.filter { $0.id != pins[target].id }, streams: streams, circles: circles)),
        ]
        Self.expectAllDistinct(variants, from: original)
        var ranged = pins
        ranged[target].rangeMeters = 500
        let withRange = Self.digest(pins: ranged, streams: streams, circles: circles)
        ranged[target].rangeMeters = 501
        #expect(Self.digest(pins: ranged, streams: streams, circles: circles) != withRange, "range_m 500 → 501")
    }

    /// A stream's persisted parts, to rebuild it with one of them changed (`restored` checks them).
    struct Parts {
        var status: PanicStatus, startedAt: Int64, updatedAt: Int64, seq: UInt64
        var lastLocation: PanicLocation, lastLocationAt: Int64, note: String?
        var ended: (reason: PanicEndReason, at: Int64)?, history: [PanicEvent], historyCapacity: Int
        var ownerDigest: TokenDigest, watchTokens: [TokenDigest], staleNotified: Bool, dueAt: Int64?, missedCheckInAt: Int64?
        var missedCheckInSentAt: Int64?, circle: CircleID?

        init(_ s: PanicStream) {
            status = s.status; startedAt = s.startedAt; updatedAt = s.updatedAt; seq = s.seq
            lastLocation = s.last.clearLocation!; lastLocationAt = s.last.at; note = s.note
            ended = s.ended.map { ($0.reason, $0.at) }; history = s.history.all; historyCapacity = s.history.capacity
            ownerDigest = s.ownerTokenDigest; watchTokens = s.watchTokenDigests; staleNotified = s.isStaleNotified
            dueAt = s.dueAt; missedCheckInAt = s.missedCheckInAt; missedCheckInSentAt = s.missedCheckInSentAt; circle = s.circle
        }

        func stream(_ id: StreamID) throws -> PanicStream {
            try PanicStream.restored(id: id, status: status, startedAt: startedAt, updatedAt: updatedAt, seq: seq, lastLocation: lastLocation,
                                     lastLocationAt: lastLocationAt, note: note, ended: ended, history: history, historyCapacity: historyCapacity,
                                     ownerDigest: ownerDigest, watchTokens: watchTokens, staleNotified: staleNotified, dueAt: dueAt,
                                     missedCheckInAt: missedCheckInAt, missedCheckInSentAt: missedCheckInSentAt, circle: circle)
        }
    }

    @Test func everyFieldOfAStreamChangesTheDigest() throws {
        let (pins, streams, circles) = try Self.state()
        let original = Self.digest(pins: pins, streams: streams, circles: circles)
        let timed = try #require(streams.firstIndex { $0.dueAt != nil })
        let ended = try #require(streams.firstIndex { $0.ended != nil && $0.watchTokenDigests.count >= 2 })
        let escalated = try #require(streams.firstIndex { $0.missedCheckInAt != nil })
        func variant(_ name: String, of index: Int, _ change: (inout Parts) -> Void) throws -> (String, StateDigest) {
            var parts = Parts(streams[index])
            change(&parts)
            var changed = streams
            changed[index] = try parts.stream(streams[index].id)
            return (name, Self.digest(pins: pins, streams: changed, circles: circles))
        }
        let other = TestSecrets(seed: 78)
        var variants = [
            try variant("status", of: timed) { $0.status = $0.status == .red ? .amber : .red },
            try variant("started_at", of: timed) { $0.startedAt -= 1 },
            try variant("updated_at", of: timed) { $0.updatedAt += 1 },
            try variant("last location", of: timed) { $0.lastLocation.lat += 1e-9 },
            try variant("last location's accuracy", of: timed) { $0.lastLocation.accuracyM = ($0.lastLocation.accuracyM ?? 0) + 1 },
            try variant("last location's time", of: timed) { $0.lastLocationAt += 1 },
            try variant("note", of: timed) { $0.note = ($0.note ?? "") + "." },
            try variant("no note", of: timed) { $0.note = nil },
            try variant("the timer's deadline", of: timed) { $0.dueAt! += 1 },
            try variant("no timer", of: timed) { $0.dueAt = nil },
            try variant("history capacity", of: timed) { $0.historyCapacity += 1 },
            try variant("an event of the history", of: timed) { parts in
                parts.history[0] = PanicEvent(seq: parts.history[0].seq, at: parts.history[0].at + 1, kind: parts.history[0].kind)
            },
            try variant("owner digest", of: timed) { $0.ownerDigest = other.digest(ofToken: "owner") },
            try variant("a watch token added", of: timed) { $0.watchTokens.append(other.digest(ofToken: "w")) },
            try variant("a watch token revoked", of: ended) { $0.watchTokens.removeFirst() },
            try variant("watch tokens in another order", of: ended) { $0.watchTokens.reverse() },
            try variant("the end's reason", of: ended) { parts in
                let reason: PanicEndReason = parts.ended!.reason == .safe ? .cancelled : .safe
                parts.ended!.reason = reason
                let last = parts.history.count - 1
                parts.history[last] = PanicEvent(seq: parts.history[last].seq, at: parts.history[last].at, kind: .ended(reason))
            },
            try variant("the escalation's time", of: escalated) { $0.missedCheckInAt! += 1 },
            try variant("the escalation's sent_at", of: escalated) { $0.missedCheckInSentAt! += 1 },
            try variant("a circle", of: timed) { $0.circle = CircleID(high: 1, low: 2) },
            try variant("another circle", of: timed) { $0.circle = CircleID(high: 1, low: 3) },
            ("the stream removed", Self.digest(pins: pins, streams: streams.filter { $0.id != streams[timed].id }, circles: circles)),
        ]
        // One more event: seq, history and the last location move together, as `record` moves them.
        var longer = streams
        _ = longer[timed].record(.location(PanicLocation(lat: 1, lon: 2)), now: Self.now - 10)
        variants.append(("one more event", Self.digest(pins: pins, streams: longer, circles: circles)))
        Self.expectAllDistinct(variants, from: original)
    }

    @Test func everyFieldOfACircleChangesTheDigest() throws {
        let (pins, streams, circles) = try Self.state()
        let c = circles[0]
        let original = Self.digest(pins: pins, streams: streams, circles: circles)
        #expect(c.members.count == 2 && c.requests.count == 1 && c.answer != nil && c.home != nil)
        func variant(_ name: String, createdAt: Int64? = nil, activeAt: Int64? = nil, owner: TokenDigest? = nil,
                     members: [CheckinMember]? = nil, nextMember: UInt32? = nil, requests: [CheckinAsk]? = nil,
                     answer: CheckinAnswer?? = .none, home: CheckinHome?? = .none,
                     subscriptions: [CheckinSubscription]? = nil) -> (String, StateDigest) {
            let changed = CheckinCircle(id: c.id, createdAt: createdAt ?? c.createdAt, activeAt: activeAt ?? c.activeAt,
                                        ownerDigest: owner ?? c.ownerTokenDigest, members: members ?? c.members,
                                        nextMember: nextMember ?? c.nextMember, requests: requests ?? c.requests,
                                        answer: answer ?? c.answer, home: home ?? c.home, subscriptions: subscriptions ?? c.subscriptions)
            #expect(changed != c, "\(name) changed nothing")
            return (name, Self.digest(pins: pins, streams: streams, circles: [changed]))
        }
        let m = c.members[0], ask = c.requests[0], answer = try #require(c.answer), home = try #require(c.home), s = c.subscriptions[0]
        #expect(c.subscriptions.count == 3)
        let other = TestSecrets(seed: 79)
        let variants = [
            variant("created_at", createdAt: c.createdAt - 1),
            variant("active_at", activeAt: c.activeAt + 1),
            variant("owner digest", owner: other.digest(ofToken: "o")),
            variant("a member revoked", members: Array(c.members.dropFirst())),
            variant("a member's label", members: [CheckinMember(id: m.id, label: "Dad", addedAt: m.addedAt, digest: m.tokenDigest)] + c.members.dropFirst()),
            variant("a member's time", members: [CheckinMember(id: m.id, label: m.label, addedAt: m.addedAt + 1, digest: m.tokenDigest)] + c.members.dropFirst()),
            variant("a member's token", members: [CheckinMember(id: m.id, label: m.label, addedAt: m.addedAt, digest: other.digest(ofToken: "m"))] + c.members.dropFirst()),
            variant("next member number", nextMember: c.nextMember + 1),
            variant("no request", requests: []),
            variant("a request's time", requests: [CheckinAsk(member: ask.member, label: ask.label, at: ask.at + 1)]),
            variant("no answer", answer: .some(nil)),
            variant("the answer's note", answer: .some(CheckinAnswer(at: answer.at, note: "late", answered: answer.answered))),
            variant("the answer's time", answer: .some(CheckinAnswer(at: answer.at + 1, note: answer.note, answered: answer.answered))),
            variant("no home safe", home: .some(nil)),
            variant("home safe until later", home: .some(CheckinHome(at: home.at, until: home.until + 1))),
            variant("no subscriptions", subscriptions: []),
            variant("a subscription removed", subscriptions: Array(c.subscriptions.dropFirst())),
            variant("subscriptions in another order", subscriptions: c.subscriptions.reversed()),
            variant("a subscription's id", subscriptions: [CheckinSubscription(id: SubscriptionID(high: 1, low: 2), holder: s.holder, target: s.target,
                                                                              addedAt: s.addedAt)] + c.subscriptions.dropFirst()),
            variant("a subscription's time", subscriptions: [CheckinSubscription(id: s.id, holder: s.holder, target: s.target,
                                                                                addedAt: s.addedAt + 1)] + c.subscriptions.dropFirst()),
            variant("a subscription's holder", subscriptions: [CheckinSubscription(id: s.id, holder: .member(2), target: s.target,
                                                                                  addedAt: s.addedAt)] + c.subscriptions.dropFirst()),
            variant("a subscription's keys", subscriptions: [CheckinSubscription(id: s.id, holder: s.holder,
                                                                                target: CircleStateTests.pushTarget(other, "https://push.example/owner"),
                                                                                addedAt: s.addedAt)] + c.subscriptions.dropFirst()),
            variant("a relay handle", subscriptions: c.subscriptions.dropLast() + [CheckinSubscription(id: c.subscriptions[2].id, holder: .member(1),
                                                                                                      target: .relay(handle: "fcm:other"), addedAt: s.addedAt)]),
            ("the circle removed", Self.digest(pins: pins, streams: streams, circles: [])),
        ]
        Self.expectAllDistinct(variants, from: original)
    }

    // MARK: what is not state

    @Test func connectionsCachesAndTheSilenceNoticeAreNotState() throws {
        let (pins, streams, circles) = try Self.state()
        let original = Self.digest(pins: pins, streams: streams, circles: circles)
        var cached = pins
        cached[0].json = Array(#"{"cached":true}"#.utf8)
        var attached = streams
        attached[0].owner = 7
        attached[0].watchers[8] = attached[0].watchTokenDigests.first!
        attached[1].staleNotified.toggle()
        attached[1].staleArmed.toggle()
        #expect(Self.digest(pins: cached, streams: attached, circles: circles) == original)
        // Nor when the snapshot was taken, or which segment or stream sequence it names.
        let snapshot = StateSnapshot(takenAt: 99, journalSegment: 12, pins: pins, streams: streams, circles: circles, replicatedSequence: 5)
        #expect(StateDigest.of(snapshot: snapshot, rules: Self.rules) == original)
    }

    // MARK: time

    @Test func whatHasExpiredByNowIsLeftOut() throws {
        let (pins, streams, circles) = try Self.state()
        let base = Self.digest(pins: pins, streams: streams, circles: circles)
        let grace = Self.rules.endedGraceMs
        // A pin expiring exactly at `now` is gone (as `removeExpired` sweeps `expiresAt <= now`); one ms later it is not.
        var expiring = pins[0]
        expiring.expiresAt = Self.now
        #expect(Self.digest(pins: pins + [expiring], streams: streams, circles: circles) == base)
        expiring.expiresAt = Self.now + 1
        #expect(Self.digest(pins: pins + [expiring], streams: streams, circles: circles).pins == pins.count + 1)
        // An ended stream whose grace ends at `now` is gone.
        let endedStream = Fixtures.stream(TestSecrets(seed: 90), events: 2, capacity: 8, end: .safe, start: Self.now - grace - 10)
        let endAt = try #require(endedStream.ended?.at)
        let atGrace = StateDigest.Rules(now: endAt + grace, endedGraceMs: grace, circleIdleLifetimeMs: Self.rules.circleIdleLifetimeMs)
        let before = StateDigest.Rules(now: endAt + grace - 1, endedGraceMs: grace, circleIdleLifetimeMs: Self.rules.circleIdleLifetimeMs)
        #expect(Self.digest(streams: [endedStream], rules: atGrace).streams == 0)
        #expect(Self.digest(streams: [endedStream], rules: before).streams == 1)
        // A circle idle for its whole lifetime is gone; a home safe past its time reads as none.
        let c = circles[0]
        let home = try #require(c.home)
        let idle = StateDigest.Rules(now: c.activeAt + Self.rules.circleIdleLifetimeMs, endedGraceMs: grace,
                                     circleIdleLifetimeMs: Self.rules.circleIdleLifetimeMs)
        #expect(Self.digest(circles: [c], rules: idle).circles == 0)
        let lapsed = StateDigest.Rules(now: home.until, endedGraceMs: grace, circleIdleLifetimeMs: Self.rules.circleIdleLifetimeMs)
        let homeless = CheckinCircle(id: c.id, createdAt: c.createdAt, activeAt: c.activeAt, ownerDigest: c.ownerTokenDigest, members: c.members,
                                     nextMember: c.nextMember, requests: c.requests, answer: c.answer, home: nil, subscriptions: c.subscriptions)
        #expect(Self.digest(circles: [c], rules: lapsed) == Self.digest(circles: [homeless], rules: lapsed))
        let stillHome = StateDigest.Rules(now: home.until - 1, endedGraceMs: grace, circleIdleLifetimeMs: Self.rules.circleIdleLifetimeMs)
        #expect(Self.digest(circles: [c], rules: stillHome) != Self.digest(circles: [homeless], rules: stillHome))
    }

    // MARK: however it was built

    /// The same pins, streams and circles put into hubs in other orders, into dictionaries
    /// that held other entries before: the same digest as the snapshot's.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func theOrderOfInsertionDoesNotMatter(seed: UInt64) throws {
        let (pins, streams, circles) = try Self.state()
        let s = TestSecrets(seed: 500 + seed)
        let extra = (1...200).map { Fixtures.pin(s, sequence: 10_000 + UInt64($0)) }
        let expected = Self.digest(pins: pins, streams: streams, circles: circles)
        var map = MapHub(settings: PinSettings())
        // Grown past the state's size first, then cut back: another capacity, another iteration order.
        map.restorePins(extra + Self.shuffled(pins, s))
        for pin in extra { _ = map.store.remove(pin.id) }
        var panic = PanicHub(settings: PanicSettings())
        panic.restoreStreams(Self.shuffled(streams, s), now: Self.now)
        var checkin = CheckinHub(settings: CheckinSettings())
        checkin.restoreCircles(circles, now: Self.now)
        #expect(StateDigest.of(map: map, panic: panic, checkin: checkin, rules: Self.rules) == expected)
        #expect(StateDigest.of(image: StateImage(StateSnapshot(takenAt: 0, journalSegment: 0, pins: pins.reversed(), streams: streams.reversed(),
                                                               circles: circles)), rules: Self.rules) == expected)
    }

    static func shuffled<T>(_ xs: [T], _ s: TestSecrets) -> [T] {
        var out = xs
        for i in stride(from: out.count - 1, to: 0, by: -1) { out.swapAt(i, s.roll(i + 1)) }
        return out
    }

    @Test func aSnapshotRoundTripKeepsTheDigest() throws {
        let (pins, streams, circles) = try Self.state()
        let snapshot = StateSnapshot(takenAt: 3, journalSegment: 4, pins: pins, streams: streams, circles: circles, replicatedSequence: 1234)
        let decoded = try SnapshotCodec.decode(SnapshotCodec.encode(snapshot))
        #expect(StateDigest.of(snapshot: decoded, rules: Self.rules) == StateDigest.of(snapshot: snapshot, rules: Self.rules))
    }

    /// Live hubs driven by random operations (without the tick that sweeps what expired) and the
    /// state restored from their snapshot and journal give the same digest at the same `now`.
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func snapshotPlusJournalHasTheLiveHubsDigest(seed: UInt64) throws {
        let run = StateReplayTests.drive(seed: seed, operations: 500, snapshotAt: 150 + Int(seed) * 20)
        let rules = StateDigest.Rules(now: run.now, panic: StateReplayTests.panicSettings, checkin: CheckinSettings())
        let live = StateDigest.of(map: run.map, panic: run.panic, checkin: CheckinHub(settings: CheckinSettings()), rules: rules)
        let restored = try StateReplayTests.restore(snapshot: run.snapshot, journal: run.after, now: run.now)
        #expect(live.pins > 0 && live.streams > 0)
        #expect(StateDigest.of(image: restored.image, rules: rules) == live)
        #expect(StateDigest.of(map: restored.map, panic: restored.panic, checkin: CheckinHub(settings: CheckinSettings()), rules: rules) == live)
        // The live hubs' own sweep of expired pins and of ended streams past their grace changes
        // nothing either; an event their tick makes (an abandonment, an escalation) is a change.
        var map = run.map, panic = run.panic
        var pinOut: [PinDelivery] = [], panicOut: [PanicDelivery] = []
        map.expire(now: run.now, out: &pinOut)
        let ticked = panic.tick(now: run.now, out: &panicOut)
        let after = StateDigest.of(map: map, panic: panic, checkin: CheckinHub(settings: CheckinSettings()), rules: rules)
        #expect((after == live) == ticked.isEmpty, "\(ticked.count) events made by the tick")
    }

    /// `vigild state inspect`'s last line: the digest of what the directory restores to, the one
    /// the restored hubs have, read without changing a byte (a torn tail stays).
    @Test func theInspectorsStateLineHasTheRestoredHubsDigest() throws {
        let (tmp, _, _) = try StateInspectorTests().sampleDirectory(segment: 42)
        let journal = tmp.read("journal-000000000000002a.vgj")
        tmp.write("journal-000000000000002a.vgj", journal + [9, 0, 0, 0, 1])
        let rules = StateDigest.Rules(now: 1_700_000_001_000, panic: PanicSettings(), checkin: CheckinSettings())
        var lines: [String] = []
        try StateInspector.inspect(path: tmp.path, entries: false, state: rules) { lines.append($0) }
        let last = try #require(lines.last)
        let line = try #require(try JSONParser.parse(Array(last.utf8)).object)
        #expect(tmp.read("journal-000000000000002a.vgj").count == journal.count + 5, "read-only")
        let restored = try StateDirectory(path: tmp.path).recover(pinSettings: PinSettings(), panicSettings: PanicSettings(), now: rules.now)
        let expected = StateDigest.of(map: restored.map, panic: restored.panic, checkin: restored.checkin, rules: rules)
        #expect(line["type"]?.string == "state" && line["digest"]?.string == expected.hex)
        #expect(line["pins"]?.int64 == Int64(expected.pins) && line["streams"]?.int64 == Int64(expected.streams) && expected.pins > 0)
        #expect(line["at"]?.int64 == rules.now && line["snapshot"]?.string == "snapshot-000000000000002a.vgs")
        #expect(line["journal_records"]?.int64 == Int64(JournalCodecTests.sampleRecords().count) && line["issues"]?.int64 != nil)
        // Without `state`, no such line (the inspector's other users see what they saw before).
        lines = []
        try StateInspector.inspect(path: tmp.path, entries: false) { lines.append($0) }
        #expect(!lines.contains { $0.contains(#""type":"state""#) })
    }

    // MARK: the value itself

    /// A fixed state's digest, written down: a change to what is hashed (the snapshot's field
    /// encodings included) shows here, and must come with a new `versionTag`, so that digests of
    /// two builds that hash differently never look alike.
    @Test func aKnownStateHasAKnownDigest() throws {
        let (pins, streams, circles) = try Self.state()
        let digest = Self.digest(pins: pins, streams: streams, circles: circles)
        #expect(digest.hex == "efc083128c575c66e10e980a1fa8bf8656321a17a56ccef5fd5246c35fa169ac", "\(digest.hex)")
        #expect(digest.hex.count == 64 && digest.pins == 6 && digest.streams == 7 && digest.circles == 1)
        #expect(Self.digest().hex != Self.digest(pins: [pins[0]]).hex)
    }
}
