import Testing
import VigilGeo
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// Each precondition of `ReplicatedApply`, and two writers racing: both validated against the same
/// state, their records applied in one order on two replicas give the same state on both, the
/// second record a conflict everywhere.
@Suite struct ReplicatedApplyRuleTests {
    static let t0: Int64 = 1_700_000_000_000

    /// A writer holding one pin, with a subscriber (1) that sees it.
    static func nodeWithPin(_ secrets: TestSecrets) throws -> (ReplicaNode, Pin) {
        var node = ReplicaNode()
        _ = node.map.subscribe(1, area: .box(GeoBox(south: 0, west: 0, north: 1, east: 1)), categories: nil)
        var out: [PinDelivery] = []
        let draft = PinDraft(point: GeoPoint(lat: 0.5, lon: 0.5), title: "t", description: "", category: "general", ttlSeconds: 600)
        let pin = try node.map.create(draft, id: PinID(random: secrets.randomBytes(16)), editDigest: secrets.digest(ofToken: "edit"),
                                      now: t0, out: &out).get()
        return (node, pin)
    }

    static func apply(_ node: inout ReplicaNode, _ record: JournalRecord, base: UInt64? = nil, owner: WatcherID? = nil) -> (ReplicatedOutcome, ReplicaNode.Out) {
        var out = ReplicaNode.Out()
        let outcome = node.apply(record, base: base, owner: owner, out: &out)
        return (outcome, out)
    }

    @Test func pinRules() throws {
        let secrets = TestSecrets(seed: 1)
        let (writer, pin) = try Self.nodeWithPin(secrets)
        var r = ReplicaNode()
        _ = r.map.subscribe(1, area: .box(GeoBox(south: 0, west: 0, north: 1, east: 1)), categories: nil)
        #expect(Self.apply(&r, .pinPut(pin)).0 == .applied)
        let (again, out) = Self.apply(&r, .pinPut(pin))
        #expect(again == .duplicate && out.isEmpty)

        var other = pin
        other.title = "another"
        #expect(Self.apply(&r, .pinPut(other)).0 == .conflict("the pin exists already"))
        other.updatedAt = Self.t0 + 5
        #expect(Self.apply(&r, .pinPut(other), base: UInt64(Self.t0 - 1)).0 == .conflict("the pin changed since"))
        var stranger = other
        stranger = Pin(id: PinID(random: secrets.randomBytes(16)), point: pin.point, title: "x", description: "", category: "general",
                       createdAt: Self.t0, expiresAt: Self.t0 + 1_000, editDigest: pin.editDigest)
        #expect(Self.apply(&r, .pinPut(stranger), base: UInt64(Self.t0)).0 == .conflict("the pin is gone"))

        // An edit made when the held pin had expired (a node whose clock got there first dropped it).
        var late = pin
        late.updatedAt = pin.expiresAt
        late.title = "late"
        #expect(Self.apply(&r, .pinPut(late), base: UInt64(pin.updatedAt)).0 == .conflict("the pin has expired"))

        // Votes: absent pin, a new voter past the limit, the same vote again.
        #expect(Self.apply(&r, .pinVote(stranger.id, voter: 1, value: 1)).0 == .conflict("the pin is gone"))
        for voter in 1...4 as ClosedRange<UInt64> { #expect(Self.apply(&r, .pinVote(pin.id, voter: voter, value: 1)).0 == .applied) }
        #expect(Self.apply(&r, .pinVote(pin.id, voter: 5, value: 1)).0 == .conflict("the pin has its maximum of voters"))
        let (same, sameOut) = Self.apply(&r, .pinVote(pin.id, voter: 2, value: 1))
        #expect(same == .duplicate && sameOut.isEmpty)
        #expect(Self.apply(&r, .pinVote(pin.id, voter: 2, value: 0)).0 == .conflict("a vote is +1 or -1"))

        // An edit validated before those votes keeps them: votes move only by their own records.
        var edited = pin
        edited.title = "edited"
        edited.updatedAt = Self.t0 + 10
        let (applied, editOut) = Self.apply(&r, .pinPut(edited), base: UInt64(pin.updatedAt))
        #expect(applied == .applied && editOut.pins.map(\.kind) == [.updated])
        #expect(r.map.store[pin.id]?.title == "edited" && r.map.store[pin.id]?.up == 4 && r.map.store[pin.id]?.votes.count == 4)
        #expect(editOut.pins.first?.pin.up == 4)

        // Removal, then again.
        let (removed, removedOut) = Self.apply(&r, .pinRemove(pin.id))
        #expect(removed == .applied && removedOut.pins.map(\.kind) == [.removed(.deleted)] && removedOut.pins[0].recipients == [1])
        #expect(Self.apply(&r, .pinRemove(pin.id)).0 == .duplicate)
        _ = writer
    }

    /// Capacity is the writer's to check: a node's count depends on its own expiry clock, so a
    /// node at the limit must not refuse a create that a node whose clock removed a pin took.
    @Test func aCreatePastCapacityStillApplies() throws {
        var settings = PinSettings()
        settings.maxPins = 1
        var map = MapHub(settings: settings)
        var out: [PinDelivery] = []
        let secrets = TestSecrets(seed: 2)
        func pin() -> Pin {
            Pin(id: PinID(random: secrets.randomBytes(16)), point: GeoPoint(lat: 1, lon: 1), title: "p", description: "", category: "general",
                createdAt: Self.t0, expiresAt: Self.t0 + 60_000, editDigest: secrets.digest(ofToken: "e"))
        }
        #expect(map.applyReplicatedPut(pin(), base: nil, out: &out) == .applied)
        #expect(map.applyReplicatedPut(pin(), base: nil, out: &out) == .applied)
        #expect(map.store.count == 2)
    }

    /// An edit made near the pin's expiry is refused on every node, also where the pin is still
    /// held: a node whose clock is a little ahead has expired it already.
    @Test func anEditNearExpiryIsAConflictEverywhere() throws {
        let secrets = TestSecrets(seed: 12)
        let (writer, pin) = try Self.nodeWithPin(secrets)
        var ahead = writer
        var out: [PinDelivery] = []
        ahead.map.expire(now: pin.expiresAt, out: &out)
        #expect(ahead.map.store[pin.id] == nil)
        for (offset, expected) in [(ReplicatedTiming.deadlineMarginMs, ReplicatedOutcome.conflict("the pin has expired")),
                                   (ReplicatedTiming.deadlineMarginMs + 1, .applied)] {
            var edit = pin
            edit.title = "edited"
            edit.updatedAt = pin.expiresAt - offset
            var held = writer
            #expect(Self.apply(&held, .pinPut(edit), base: UInt64(pin.updatedAt)).0 == expected)
            #expect(Self.apply(&ahead, .pinPut(edit), base: UInt64(pin.updatedAt)).0 == .conflict("the pin is gone"))
        }
    }

    /// Two writers edit one pin, both against `updatedAt` t0; replicas apply A then B, or B then A.
    @Test func racingPinEditsConverge() throws {
        let secrets = TestSecrets(seed: 3)
        let (writer, pin) = try Self.nodeWithPin(secrets)
        var w1 = writer, w2 = writer
        var out: [PinDelivery] = []
        let a = try w1.map.update(pin.id, digest: secrets.digest(ofToken: "edit"), changes: PinChanges(title: "A"), now: Self.t0 + 1, out: &out).get()
        let b = try w2.map.update(pin.id, digest: secrets.digest(ofToken: "edit"), changes: PinChanges(lat: 2), now: Self.t0 + 2, out: &out).get()
        let base = UInt64(bitPattern: pin.updatedAt)
        for (first, second) in [(a, b), (b, a)] {
            var x = writer, y = writer
            for node in [0, 1] {
                var n = node == 0 ? x : y
                #expect(Self.apply(&n, .pinPut(first), base: base).0 == .applied)
                let (outcome, o) = Self.apply(&n, .pinPut(second), base: base)
                #expect(outcome == .conflict("the pin changed since") && o.isEmpty)
                if node == 0 { x = n } else { y = n }
            }
            #expect(x.stateBytes == y.stateBytes)
            #expect(x.map.store[pin.id] == first)
        }
    }

    /// A stream with a watcher (7) and an owner connection (3).
    static func nodeWithStream(_ secrets: TestSecrets) throws -> (ReplicaNode, StreamID, ownerToken: String, watchTokens: [String]) {
        var node = ReplicaNode()
        var out: [PanicDelivery] = []
        let started = try node.panic.start(owner: 3, status: .amber, location: PanicLocation(lat: 1, lon: 1), note: nil, watchers: 2,
                                           secrets: secrets, now: t0, out: &out).get()
        _ = try node.panic.watch(started.stream.id, watcher: 7, watchToken: started.watchTokens[0], since: nil, secrets: secrets, out: &out).get()
        return (node, started.stream.id, started.ownerToken, started.watchTokens)
    }

    @Test func racingStreamEventsConverge() throws {
        let secrets = TestSecrets(seed: 4)
        let (writer, id, owner, tokens) = try Self.nodeWithStream(secrets)
        var w1 = writer, w2 = writer
        var out: [PanicDelivery] = []
        _ = try w1.panic.update(id, by: 3, ownerToken: nil, location: PanicLocation(lat: 2, lon: 2), secrets: secrets, now: Self.t0 + 1, out: &out).get()
        _ = try w2.panic.end(id, by: 9, ownerToken: owner, reason: .safe, secrets: secrets, now: Self.t0 + 2, out: &out).get()
        let e1 = try #require(w1.panic.stream(id)?.latestEvent), e2 = try #require(w2.panic.stream(id)?.latestEvent)
        #expect(e1.seq == 2 && e2.seq == 2)
        var x = writer, y = writer
        for n in [0, 1] {
            var node = n == 0 ? x : y
            let (first, firstOut) = Self.apply(&node, .panicEvent(id, e1))
            #expect(first == .applied && firstOut.panic.map(\.recipients) == [[7]])
            let (second, secondOut) = Self.apply(&node, .panicEvent(id, e2))
            #expect(second == .conflict("the stream moved on") && secondOut.isEmpty)
            #expect(Self.apply(&node, .panicEvent(id, e1)).0 == .duplicate)
            if n == 0 { x = node } else { y = node }
        }
        #expect(x.stateBytes == y.stateBytes && x.stateBytes == w1.stateBytes)

        // A gap, an unknown stream, and events after the end.
        var gap = e1
        gap.seq = 4
        #expect(Self.apply(&x, .panicEvent(id, gap)).0 == .conflict("the stream moved on"))
        let unknown = StreamID(random: secrets.randomBytes(16))
        #expect(Self.apply(&x, .panicEvent(unknown, e1)).0 == .conflict("the stream is gone"))
        #expect(Self.apply(&x, .panicInvite(unknown, secrets.digest(ofToken: "n"))).0 == .conflict("the stream is gone"))
        #expect(Self.apply(&x, .panicRevoke(unknown, secrets.digest(ofToken: tokens[0]))).0 == .duplicate)
        #expect(Self.apply(&x, .panicRemove(unknown)).0 == .duplicate)

        // Invitations: up to maxWatchTokens (3), not twice, not after the end.
        #expect(Self.apply(&x, .panicInvite(id, secrets.digest(ofToken: tokens[1]))).0 == .duplicate)
        #expect(Self.apply(&x, .panicInvite(id, secrets.digest(ofToken: "third"))).0 == .applied)
        #expect(Self.apply(&x, .panicInvite(id, secrets.digest(ofToken: "fourth"))).0 == .conflict("the stream has its maximum of watch tokens"))
        // Revocation cuts the watcher using the token, and tells the owner the new count.
        let (revoked, revokedOut) = Self.apply(&x, .panicRevoke(id, secrets.digest(ofToken: tokens[0])))
        #expect(revoked == .applied && revokedOut.panic.map(\.kind) == [.revoked, .watchers(count: 0)])
        #expect(revokedOut.panic.map(\.recipients) == [[7], [3]] && x.panic.watcherCount(id) == 0)
        #expect(Self.apply(&x, .panicRevoke(id, secrets.digest(ofToken: tokens[0]))).0 == .duplicate)

        let end = PanicEvent(seq: 3, at: Self.t0 + 5, kind: .ended(.safe))
        #expect(Self.apply(&x, .panicEvent(id, end)).0 == .applied)
        #expect(Self.apply(&x, .panicEvent(id, PanicEvent(seq: 4, at: Self.t0 + 6, kind: .status(.red)))).0 == .conflict("the stream has ended"))
        #expect(Self.apply(&x, .panicInvite(id, secrets.digest(ofToken: "late"))).0 == .conflict("the stream has ended"))
        #expect(Self.apply(&x, .panicRemove(id)).0 == .applied && x.panic.stream(id) == nil)
    }

    @Test func aStartTwiceIsADuplicateAndOwnedOnlyWhereAnOwnerIsGiven() throws {
        let secrets = TestSecrets(seed: 5)
        let (writer, id, _, _) = try Self.nodeWithStream(secrets)
        let record = JournalRecord.panicStart(try #require(writer.panic.stream(id)))
        var mine = ReplicaNode(), theirs = ReplicaNode()
        #expect(Self.apply(&mine, record, owner: 3).0 == .applied)
        #expect(Self.apply(&theirs, record).0 == .applied)
        #expect(Self.apply(&mine, record, owner: 3).0 == .duplicate)
        #expect(mine.panic.stream(id)?.owner == 3 && theirs.panic.stream(id)?.owner == nil)
        #expect(mine.panic.owning[3] == [id] && theirs.panic.owning.isEmpty)
        #expect(mine.stateBytes == theirs.stateBytes)
    }

    /// A circle with the owner's connection (1) and member 1's (2) listening.
    static func nodeWithCircle(_ secrets: TestSecrets) throws -> (ReplicaNode, CheckinCircle, owner: String, members: [String]) {
        var node = ReplicaNode()
        let created = try node.checkin.create(owner: 1, labels: ["a", nil], secrets: secrets, now: t0).get()
        _ = try node.checkin.join(created.circle.id, by: 2, memberToken: created.memberTokens[0], secrets: secrets).get()
        return (node, created.circle, created.ownerToken, created.memberTokens)
    }

    @Test func racingCircleChangesConverge() throws {
        let secrets = TestSecrets(seed: 6)
        let (writer, circle, owner, members) = try Self.nodeWithCircle(secrets)
        let id = circle.id, base = circle.revision
        var w1 = writer, w2 = writer
        var out: [CheckinDelivery] = []
        let asked = try w1.checkin.request(id, memberToken: members[1], secrets: secrets, now: Self.t0 + 1, out: &out).get().circle
        let answered = try w2.checkin.answer(id, ownerToken: owner, note: nil, secrets: secrets, now: Self.t0 + 2, out: &out).get()
        for (first, second) in [(asked, answered), (answered, asked)] {
            var x = writer, y = writer
            for n in [0, 1] {
                var node = n == 0 ? x : y
                #expect(Self.apply(&node, .circlePut(first), base: base).0 == .applied)
                let (outcome, o) = Self.apply(&node, .circlePut(second), base: base)
                #expect(outcome == .conflict("the circle changed since") && o.isEmpty)
                #expect(Self.apply(&node, .circlePut(first), base: base).0 == .duplicate)
                if n == 0 { x = node } else { y = node }
            }
            #expect(x.stateBytes == y.stateBytes && x.checkin.circle(id) == first)
        }

        var x = writer
        #expect(Self.apply(&x, .circlePut(circle)).0 == .duplicate)
        #expect(Self.apply(&x, .circlePut(asked)).0 == .conflict("the circle exists already"))
        #expect(Self.apply(&x, .circlePut(asked), base: base &+ 1).0 == .conflict("the circle changed since"))
        // A revocation read from the difference: the member's connection is told and stops listening.
        var w3 = writer
        let revoked = try #require(try w3.checkin.revoke(id, ownerToken: owner, member: 1, secrets: secrets, now: Self.t0 + 3, out: &out).get())
        let (applied, revokedOut) = Self.apply(&x, .circlePut(revoked), base: base)
        #expect(applied == .applied && revokedOut.checkin.map(\.kind) == [.revoked(member: 1)] && revokedOut.checkin[0].recipients == [2])
        #expect(x.checkin.listenerCount(id) == 1)
        let (closed, closedOut) = Self.apply(&x, .circleRemove(id))
        #expect(closed == .applied && closedOut.checkin.map(\.kind) == [.closed(.closed)] && closedOut.checkin[0].recipients == [1])
        #expect(Self.apply(&x, .circleRemove(id)).0 == .duplicate)
        #expect(Self.apply(&x, .circlePut(asked), base: base).0 == .conflict("the circle is gone"))
    }

    @Test func aCircleCreatePastCapacityStillApplies() throws {
        let secrets = TestSecrets(seed: 7)
        var hub = CheckinHub(settings: CheckinSettings(maxCircles: 1))
        var out: [CheckinDelivery] = []
        let (_, one, _, _) = try Self.nodeWithCircle(secrets)
        let (_, two, _, _) = try Self.nodeWithCircle(secrets)
        #expect(hub.applyReplicatedPut(one, base: nil, owner: 4, out: &out) == .applied && hub.listenerCount(one.id) == 1)
        #expect(hub.applyReplicatedPut(two, base: nil, owner: nil, out: &out) == .applied && hub.listenerCount(two.id) == 0)
        #expect(hub.count == 2)
    }

    /// Home safe lapses on each node's clock. A writer that had not lapsed it yet carries it in its
    /// next record; a node that has must not bring it back (nor tell its lapse twice), and both
    /// agree on whether the record applies, since the revision leaves home safe out.
    @Test func aLapsedHomeIsNotBroughtBack() throws {
        let secrets = TestSecrets(seed: 8)
        let (node, circle, owner, members) = try Self.nodeWithCircle(secrets)
        var writer = node
        var out: [CheckinDelivery] = []
        let withHome = try #require(try writer.checkin.setHome(circle.id, ownerToken: owner, change: .forSeconds(10), secrets: secrets,
                                                               now: Self.t0 + 1, out: &out).get())
        var lapsed = writer
        var ticked: [CheckinDelivery] = []
        _ = lapsed.checkin.tick(now: Self.t0 + 20_000, out: &ticked)
        #expect(ticked.map(\.kind) == [.home(withHome.home, lapsed: true)] && lapsed.checkin.circle(circle.id)?.home == nil)
        #expect(lapsed.checkin.circle(circle.id)?.revision == withHome.revision)

        // The writer asks (its clock behind), still holding home safe.
        let asked = try writer.checkin.request(circle.id, memberToken: members[0], secrets: secrets, now: Self.t0 + 15_000, out: &out).get().circle
        #expect(asked.home != nil)
        let (outcome, o) = Self.apply(&lapsed, .circlePut(asked), base: withHome.revision)
        #expect(outcome == .applied && o.checkin.map(\.kind) == [.requested(asked.requests[0])])
        #expect(lapsed.checkin.circle(circle.id)?.home == nil)
        var again: [CheckinDelivery] = []
        _ = lapsed.checkin.tick(now: Self.t0 + 30_000, out: &again)
        #expect(again.isEmpty)
    }

    /// Home safe set in the millisecond of the circle's last change leaves its revision as it was;
    /// it is still a change, not a duplicate of the circle held.
    @Test func aHomeChangeThatLeavesTheRevisionStillApplies() throws {
        let secrets = TestSecrets(seed: 10)
        let (node, circle, owner, _) = try Self.nodeWithCircle(secrets)
        var writer = node, replica = node
        var out: [CheckinDelivery] = []
        let changed = try #require(try writer.checkin.setHome(circle.id, ownerToken: owner, change: .forSeconds(30), secrets: secrets,
                                                              now: Self.t0, out: &out).get())
        #expect(changed.revision == circle.revision && changed.home != nil)
        let (outcome, o) = Self.apply(&replica, .circlePut(changed), base: circle.revision)
        #expect(outcome == .applied && o.checkin.map(\.kind) == [.home(changed.home, lapsed: false)])
        #expect(Self.apply(&replica, .circlePut(changed), base: circle.revision).0 == .duplicate)
        #expect(replica.stateBytes == writer.stateBytes)
    }

    @Test func aCirclesRevisionIsTheSameEverywhereAndMovesWithEveryChange() throws {
        let secrets = TestSecrets(seed: 9)
        let (node, circle, owner, members) = try Self.nodeWithCircle(secrets)
        // Fixed input, fixed number: what another process (another node) computes too. The number
        // was computed apart from this code (FNV-1a 64 over the same bytes, in Python).
        let fixed = CheckinCircle(id: CircleID(high: 1, low: 2), createdAt: 3, activeAt: 4, ownerDigest: TokenDigest(bytes: Array(repeating: 5, count: 32)),
                                  members: [CheckinMember(id: 1, label: "ü", addedAt: 6, digest: TokenDigest(bytes: Array(repeating: 7, count: 32)))],
                                  nextMember: 2, requests: [CheckinAsk(member: 1, label: "ü", at: 8)],
                                  answer: CheckinAnswer(at: 9, note: nil, answered: []), home: CheckinHome(at: 10, until: 11))
        #expect(fixed.revision == 0xB561_35A5_9672_8A07)
        var changed = fixed
        changed.home = nil
        #expect(changed.revision == fixed.revision)
        var seen: Set<UInt64> = [circle.revision]
        var w = node
        var out: [CheckinDelivery] = []
        var now = Self.t0
        func step(_ c: CheckinCircle?) throws {
            let c = try #require(c)
            #expect(seen.insert(c.revision).inserted)
        }
        now += 1; try step(try w.checkin.invite(circle.id, ownerToken: owner, label: nil, secrets: secrets, now: now).get().circle)
        now += 1; try step(try w.checkin.request(circle.id, memberToken: members[0], secrets: secrets, now: now, out: &out).get().circle)
        now += 1; try step(try w.checkin.answer(circle.id, ownerToken: owner, note: "ok", secrets: secrets, now: now, out: &out).get())
        now += 1; try step(try w.checkin.revoke(circle.id, ownerToken: owner, member: 2, secrets: secrets, now: now, out: &out).get())
        now += 1; try step(try w.checkin.setHome(circle.id, ownerToken: owner, change: .forSeconds(5), secrets: secrets, now: now, out: &out).get())
    }
}
