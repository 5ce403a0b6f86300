import Testing
import VigilGeo
@testable import VigilCore
import VigilTestSupport

@Suite struct MapHubTests {
    let secrets = TestSecrets()

    func draft(_ lat: Double, _ lon: Double, _ title: String = "t", category: String = "general", ttl: Int = 3600) -> PinDraft {
        PinDraft(point: GeoPoint(lat: lat, lon: lon), title: title, description: "", category: category, ttlSeconds: ttl)
    }

    func box(_ s: Double, _ w: Double, _ n: Double, _ e: Double) -> GeoArea {
        .box(GeoBox(south: s, west: w, north: n, east: e))
    }

    @discardableResult
    func create(_ hub: inout MapHub, _ d: PinDraft, token: String = "tok", now: Int64 = 1_000, out: inout [PinDelivery]) -> Pin {
        try! hub.create(d, id: PinID(random: secrets.randomBytes(16)), editDigest: secrets.digest(ofToken: token), now: now, out: &out).get()
    }

    @Test func createReachesExactlyTheSubscribersWhoseAreaHoldsThePin() {
        var hub = MapHub(settings: PinSettings())
        _ = hub.subscribe(1, area: box(52.0, 13.0, 53.0, 14.0), categories: nil)
        _ = hub.subscribe(2, area: box(52.5, 13.5, 54.0, 15.0), categories: nil)
        _ = hub.subscribe(3, area: box(-10, -10, 10, 10), categories: nil)
        var out: [PinDelivery] = []
        create(&hub, draft(52.2, 13.2), out: &out)   // 1 only
        create(&hub, draft(52.7, 13.7), out: &out)   // 1 and 2
        create(&hub, draft(53.5, 14.5), out: &out)   // 2 only
        create(&hub, draft(40.0, 40.0), out: &out)   // nobody: no delivery at all
        #expect(out.map { Set($0.recipients) } == [[1], [1, 2], [2]])
        #expect(out.allSatisfy { $0.kind == .added })
    }

    @Test func subscribeReturnsPinsExactlyInsideNotMerelyInACoveringCell() {
        var hub = MapHub(settings: PinSettings())
        var out: [PinDelivery] = []
        let inside = create(&hub, draft(52.5000, 13.4000), out: &out)
        create(&hub, draft(52.5000, 13.4101), out: &out)  // 700 m east, same coarse cell
        let (pins, truncated) = hub.subscribe(1, area: box(52.49, 13.39, 52.51, 13.41), categories: nil)
        #expect(pins.map(\.id) == [inside.id])
        #expect(!truncated)
        // Events are filtered the same way: just outside the east edge, then just inside.
        out.removeAll()
        create(&hub, draft(52.505, 13.4102), out: &out)
        #expect(out.isEmpty)
        create(&hub, draft(52.505, 13.4098), out: &out)
        #expect(out.map(\.recipients) == [[1]])
    }

    @Test func circlesAreExact() {
        var hub = MapHub(settings: PinSettings())
        _ = hub.subscribe(7, area: .circle(center: GeoPoint(lat: 48.8566, lon: 2.3522), radiusMeters: 1_000), categories: nil)
        var out: [PinDelivery] = []
        create(&hub, draft(48.8566 + 0.0089, 2.3522), out: &out)  // ~990 m north
        create(&hub, draft(48.8566 + 0.0092, 2.3522), out: &out)  // ~1,023 m north
        #expect(out.count == 1)
        #expect(GeoDistance.meters(GeoPoint(lat: 48.8566, lon: 2.3522), out[0].pin.point) <= 1_000)
    }

    @Test func antimeridianAndWholeWorld() {
        var hub = MapHub(settings: PinSettings())
        _ = hub.subscribe(1, area: box(60, 170, 70, -170), categories: nil)
        _ = hub.subscribe(2, area: box(-90, -180, 90, 180), categories: nil)
        var out: [PinDelivery] = []
        create(&hub, draft(65, 179.5), out: &out)
        create(&hub, draft(65, -179.5), out: &out)
        create(&hub, draft(65, 0), out: &out)
        create(&hub, draft(-89.9, -179.99), out: &out)
        #expect(out.map { Set($0.recipients) } == [[1, 2], [1, 2], [2], [2]])
        #expect(hub.subscribe(3, area: box(60, 170, 70, -170), categories: nil).pins.count == 2)
        #expect(hub.subscribe(4, area: box(-90, -180, 90, 180), categories: nil).pins.count == 4)
    }

    @Test func movesBecomeAddedUpdatedAndRemovedPerSubscriber() {
        var hub = MapHub(settings: PinSettings())
        _ = hub.subscribe(1, area: box(0, 0, 1, 1), categories: nil)      // west square
        _ = hub.subscribe(2, area: box(0, 1, 1, 2), categories: nil)      // east square
        _ = hub.subscribe(3, area: box(0, 0, 1, 2), categories: nil)      // both
        var out: [PinDelivery] = []
        let pin = create(&hub, draft(0.5, 0.5), out: &out)
        out.removeAll()
        _ = hub.update(pin.id, digest: secrets.digest(ofToken: "tok"), changes: PinChanges(lon: 1.5), now: 2_000, out: &out)
        let byKind = Dictionary(uniqueKeysWithValues: out.map { ("\($0.kind)", Set($0.recipients)) })
        #expect(byKind["removed(VigilCore.RemovalReason.moved)"] == [1])
        #expect(byKind["added"] == [2])
        #expect(byKind["updated"] == [3])
        #expect(out.allSatisfy { $0.pin.point.lon == 1.5 && $0.pin.updatedAt == 2_000 })
    }

    @Test func categoriesFilterAndACategoryChangeActsLikeAMove() {
        var hub = MapHub(settings: PinSettings())
        let hazard: UInt64 = 1 << UInt64(PinSettings().categoryIndex("hazard")!)
        _ = hub.subscribe(1, area: box(0, 0, 1, 1), categories: hazard)
        _ = hub.subscribe(2, area: box(0, 0, 1, 1), categories: nil)
        var out: [PinDelivery] = []
        let pin = create(&hub, draft(0.5, 0.5, category: "sighting"), out: &out)
        #expect(out.map { Set($0.recipients) } == [[2]])
        out.removeAll()
        _ = hub.update(pin.id, digest: secrets.digest(ofToken: "tok"), changes: PinChanges(category: "hazard"), now: 2_000, out: &out)
        #expect(out.count == 2)
        #expect(out.contains { $0.kind == .added && $0.recipients == [1] })
        #expect(out.contains { $0.kind == .updated && $0.recipients == [2] })
    }

    /// Found by the hub fuzz target: a pin restored with a category the configuration no longer
    /// lists is invisible, and an edit that gives it a listed one used to be told to nobody, so
    /// subscribers whose area holds it never learned of it until they subscribed again.
    @Test func aPinWhoseCategoryWasWithdrawnAppearsWhenEditedIntoAListedOne() {
        var hub = MapHub(settings: PinSettings())
        let digest = secrets.digest(ofToken: "tok")
        let restored = Pin(id: PinID(random: secrets.randomBytes(16)), point: GeoPoint(lat: 0.5, lon: 0.5), title: "old", description: "",
                           category: "withdrawn", createdAt: 0, expiresAt: 1_000_000, editDigest: digest)
        hub.restorePins([restored])
        #expect(hub.subscribe(1, area: box(0, 0, 1, 1), categories: nil).pins.isEmpty, "an unlisted category is seen by nobody")
        _ = hub.subscribe(2, area: box(0, 1, 1, 2), categories: nil)
        var out: [PinDelivery] = []
        _ = hub.update(restored.id, digest: digest, changes: PinChanges(lon: 0.6), now: 1, out: &out)
        #expect(out.isEmpty, "still unlisted: still seen by nobody")
        _ = hub.update(restored.id, digest: digest, changes: PinChanges(lon: 1.5, category: "hazard"), now: 2, out: &out)
        #expect(out.map(\.kind) == [.added] && out.map(\.recipients) == [[2]])
    }

    @Test func wrongTokenAndUnknownIdAreTheSameForbidden() {
        var hub = MapHub(settings: PinSettings())
        var out: [PinDelivery] = []
        let pin = create(&hub, draft(1, 1), token: "right", out: &out)
        let wrong = secrets.digest(ofToken: "wrong")
        #expect(hub.update(pin.id, digest: wrong, changes: PinChanges(title: "x"), now: 2, out: &out) == .failure(.forbidden))
        #expect(hub.delete(pin.id, digest: wrong, out: &out) == .failure(.forbidden))
        let unknown = PinID(random: secrets.randomBytes(16))
        #expect(hub.delete(unknown, digest: secrets.digest(ofToken: "right"), out: &out) == .failure(.forbidden))
        #expect(hub.store.count == 1)
        _ = hub.subscribe(9, area: box(0, 0, 2, 2), categories: nil)
        out.removeAll()
        #expect((try? hub.delete(pin.id, digest: secrets.digest(ofToken: "right"), out: &out).get())?.id == pin.id)
        #expect(out.first?.kind == .removed(.deleted) && out.first?.recipients == [9])
        #expect(hub.store.count == 0)
    }

    @Test func oneVotePerVoterAndFlaggingRemovesThePin() throws {
        var settings = PinSettings()
        settings.voteFlagThreshold = 3
        var hub = MapHub(settings: settings)
        _ = hub.subscribe(1, area: box(0, 0, 2, 2), categories: nil)
        var out: [PinDelivery] = []
        let pin = create(&hub, draft(1, 1), out: &out)
        out.removeAll()
        var v = try hub.vote(pin.id, voter: 10, value: 1, out: &out).get()
        #expect(v.change == .counted && v.pin.up == 1 && v.pin.down == 0 && v.voter == 10 && v.value == 1)
        v = try hub.vote(pin.id, voter: 10, value: 1, out: &out).get()       // same vote: no change, no event
        #expect(v.change == .unchanged && v.pin.up == 1 && out.count == 1)
        v = try hub.vote(pin.id, voter: 10, value: -1, out: &out).get()      // replaces
        #expect(v.change == .counted && v.pin.up == 0 && v.pin.down == 1)
        #expect(v.pin.updatedAt == pin.updatedAt, "a vote is not an edit")
        _ = hub.vote(pin.id, voter: 11, value: -1, out: &out)
        #expect(hub.store[pin.id] != nil)
        v = try hub.vote(pin.id, voter: 12, value: -1, out: &out).get()      // down - up = 3
        #expect(v.change == .flagged && v.pin.down == 3)
        #expect(hub.store[pin.id] == nil)
        #expect(out.last?.kind == .removed(.flagged))
        #expect(out.dropLast().allSatisfy { $0.kind == .updated })
        #expect(hub.vote(pin.id, voter: 13, value: 1, out: &out) == .failure(.notFound))
    }

    /// A pin keeps at most `maxVotersPerPin` voters: a new one beyond is refused (and told so
    /// plainly), while those it has can still change their votes.
    @Test func theVotersOfAPinAreBounded() throws {
        var settings = PinSettings()
        settings.maxVotersPerPin = 3
        var hub = MapHub(settings: settings)
        var out: [PinDelivery] = []
        let pin = create(&hub, draft(1, 1), out: &out)
        for voter in 1...3 as ClosedRange<UInt64> { _ = try hub.vote(pin.id, voter: voter, value: 1, out: &out).get() }
        #expect(hub.vote(pin.id, voter: 4, value: 1, out: &out) == .failure(.tooManyVoters))
        #expect(try hub.vote(pin.id, voter: 2, value: -1, out: &out).get().change == .counted)
        #expect(hub.store[pin.id]?.votes == [1: 1, 2: -1, 3: 1])
        let error = RequestError.from(PinFailure.tooManyVoters)
        #expect(error.code == "too_many_votes" && error.field == "id")
    }

    @Test func expiryIsExactAndFollowsTTLChanges() {
        var hub = MapHub(settings: PinSettings())
        _ = hub.subscribe(1, area: box(0, 0, 2, 2), categories: nil)
        var out: [PinDelivery] = []
        let a = create(&hub, draft(1, 1, ttl: 60), now: 0, out: &out)
        let b = create(&hub, draft(1, 1, ttl: 120), now: 0, out: &out)
        out.removeAll()
        hub.expire(now: 59_999, out: &out)
        #expect(out.isEmpty && hub.store.count == 2)
        hub.expire(now: 60_000, out: &out)
        #expect(out.map(\.pin.id) == [a.id] && out[0].kind == .expired)
        // Extending b's ttl at 100 s moves its expiry to 100 s + 300 s.
        _ = hub.update(b.id, digest: secrets.digest(ofToken: "tok"), changes: PinChanges(ttlSeconds: 300), now: 100_000, out: &out)
        out.removeAll()
        hub.expire(now: 200_000, out: &out)
        #expect(out.isEmpty && hub.store[b.id] != nil)
        hub.expire(now: 400_000, out: &out)
        #expect(out.map(\.pin.id) == [b.id])
        #expect(hub.store.count == 0)
    }

    @Test func resubscribingReplacesTheArea() {
        var hub = MapHub(settings: PinSettings())
        var out: [PinDelivery] = []
        create(&hub, draft(10, 10), out: &out)
        let b = create(&hub, draft(20, 20), out: &out)
        _ = hub.subscribe(1, area: box(9, 9, 11, 11), categories: nil)
        #expect(hub.subscribe(1, area: box(19, 19, 21, 21), categories: nil).pins.map(\.id) == [b.id])
        out.removeAll()
        create(&hub, draft(10.5, 10.5), out: &out)
        #expect(out.isEmpty)
        hub.unsubscribe(1)
        create(&hub, draft(20.5, 20.5), out: &out)
        #expect(out.isEmpty)
        #expect(hub.subscriptions.count == 0)
    }

    @Test func capacityAndTruncation() {
        var settings = PinSettings()
        settings.maxPins = 3
        settings.maxSubscribePins = 2
        var hub = MapHub(settings: settings)
        var out: [PinDelivery] = []
        for i in 0..<3 { create(&hub, draft(1, 1), now: Int64(i), out: &out) }
        #expect(hub.create(draft(1, 1), id: PinID(random: secrets.randomBytes(16)), editDigest: secrets.digest(ofToken: "t"), now: 9, out: &out) == .failure(.capacityExceeded))
        let (pins, truncated) = hub.subscribe(1, area: box(0, 0, 2, 2), categories: nil)
        #expect(truncated && pins.count == 2)
        #expect(pins.map(\.createdAt) == [2, 1], "newest first")
    }

    /// The bytes of a pin's public object as its fields encode it now (ignoring `Pin.json`).
    func fresh(_ pin: Pin) -> String {
        String(decoding: ServerMessages.pinJSON(pin), as: UTF8.self)
    }

    func kept(_ pin: Pin?) -> String? {
        pin?.json.map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func changingAShownFieldDropsThePinsJSON() {
        let base = Pin(id: PinID(high: 1, low: 2), point: GeoPoint(lat: 1, lon: 2), title: "t", description: "d", category: "general",
                       createdAt: 5, expiresAt: 9, editDigest: secrets.digest(ofToken: "tok"))
        let edits: [(String, (inout Pin) -> Void)] = [
            ("point", { $0.point = GeoPoint(lat: 3, lon: 4) }), ("title", { $0.title = "u" }),
            ("description", { $0.description = "e" }), ("category", { $0.category = "hazard" }),
            ("createdAt", { $0.createdAt = 6 }), ("updatedAt", { $0.updatedAt = 7 }), ("expiresAt", { $0.expiresAt = 10 }),
            ("up", { $0.up = 1 }), ("down", { $0.down = 1 }), ("a vote", { $0.setVote(3, -1) }),
        ]
        for (name, edit) in edits {
            var pin = base
            pin.json = ServerMessages.pinJSON(pin)
            edit(&pin)
            #expect(pin.json == nil, "\(name)")
        }
        var pin = base
        pin.json = ServerMessages.pinJSON(pin)
        pin.sequence = 8                                   // not shown: the bytes still hold
        #expect(pin.json != nil)
        var w = JSONWriter()
        ServerMessages.pin(pin, into: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self) == fresh(pin), "kept bytes are spliced as they are")
    }

    /// Each pin is encoded once: created, edited and voted pins come back with their JSON, the
    /// store keeps it for the next subscribe, and an edit nobody watches still replaces it (the
    /// next subscriber sees the edit, not the bytes from before it).
    @Test func pinsKeepTheirJSONAndEditsReplaceIt() {
        var hub = MapHub(settings: PinSettings())
        var out: [PinDelivery] = []
        let digest = secrets.digest(ofToken: "tok")
        let pin = create(&hub, draft(52.5, 13.4, "first"), out: &out)
        #expect(kept(pin) == fresh(pin) && kept(hub.store[pin.id]) == fresh(pin))
        #expect(out.isEmpty, "nobody watches yet")
        let edited = try! hub.update(pin.id, digest: digest, changes: PinChanges(title: "second"), now: 2_000, out: &out).get()
        #expect(kept(edited) == fresh(edited) && kept(edited)!.contains("second"))
        #expect(kept(hub.store[pin.id]) == fresh(edited))
        _ = hub.vote(pin.id, voter: 1, value: 1, out: &out)
        let voted = hub.store[pin.id]!
        #expect(voted.up == 1 && kept(voted) == fresh(voted) && kept(voted)!.contains(#""up":1"#))
        let (pins, _) = hub.subscribe(1, area: box(52, 13, 53, 14), categories: nil)
        #expect(pins.map(kept) == [fresh(voted)])
        _ = hub.update(pin.id, digest: digest, changes: PinChanges(lat: 52.6), now: 3_000, out: &out)
        #expect(out.map(\.kind) == [.updated] && kept(out[0].pin) == fresh(hub.store[pin.id]!) && kept(out[0].pin)!.contains("52.6"))
    }

    /// Pins restored at startup have no JSON until someone is shown them; then the store keeps it.
    @Test func restoredPinsAreEncodedWhenFirstShown() {
        var source = MapHub(settings: PinSettings())
        var out: [PinDelivery] = []
        create(&source, draft(52.5, 13.4), out: &out)
        let exported = source.exportPins().map { pin -> Pin in
            var copy = Pin(id: pin.id, point: pin.point, title: pin.title, description: pin.description, category: pin.category,
                           createdAt: pin.createdAt, expiresAt: pin.expiresAt, editDigest: pin.editDigest)
            copy.sequence = pin.sequence
            return copy
        }
        var hub = MapHub(settings: PinSettings())
        hub.restorePins(exported)
        let id = exported[0].id
        #expect(hub.store[id]?.json == nil)
        let (pins, _) = hub.subscribe(1, area: box(52, 13, 53, 14), categories: nil)
        #expect(pins.count == 1 && kept(pins[0]) == fresh(pins[0]))
        #expect(kept(hub.store[id]) == fresh(pins[0]))
    }

    /// Random operations checked against brute force (`CheckedMapHub`, shared with the hub fuzz
    /// target): every delivery goes to exactly the subscribers whose area and categories hold the
    /// pin, each once and of the right kind, and subscribe replies are exact, order included.
    /// With `ranges`, half the pins get a `range_m` (1 m to 300 km), most subscriptions a viewer
    /// near a pin, and a third of the updates set or remove a range: the reach rule by brute force too.
    @Test(arguments: [false, true])
    func randomOperationsMatchBruteForce(ranges: Bool) {
        var rng = SplitMix64(state: ranges ? 43 : 42)
        var settings = PinSettings()
        settings.maxSubscribePins = 100_000
        settings.maxVotersPerPin = 4
        var checked = CheckedMapHub(settings: settings)
        let digest = secrets.digest(ofToken: "tok")
        var now: Int64 = 0
        func randomArea() -> GeoArea {
            if rng.next() % 3 == 0 {
                return .circle(center: GeoPoint(lat: rng.double(-80, 80), lon: rng.double(-180, 180)), radiusMeters: rng.double(100, 3_000_000))
            }
            let s = rng.double(-90, 89), n = min(90, s + rng.double(0.01, 60))
            let w = rng.double(-180, 180), e = rng.double(-180, 180)  // may cross the antimeridian
            return .box(GeoBox(south: s, west: w, north: n, east: e))
        }
        func randomRange() -> Int? {
            guard ranges, rng.next() % 2 == 0 else { return nil }
            return 1 + Int(rng.next() % 300_000)
        }
        func randomPin() -> PinID? {
            let pins = checked.oracle.pins
            return pins.isEmpty ? nil : pins[Int(rng.next() % UInt64(pins.count))].id
        }
        for step in 0..<3_000 {
            now += Int64(rng.next() % 2_000)            // pins live 60 s to an hour: some expire, many stay
            let problem: String?
            switch rng.next() % 8 {
            case 0:
                let mask = rng.next() % 4 == 0 ? UInt64(1 + rng.next() % 31) : nil
                // A viewer near a pin (within about 2°), so that reaches are often near their edge.
                var viewer: GeoPoint?
                let pins = checked.oracle.pins
                if ranges && rng.next() % 4 != 0 && !pins.isEmpty {
                    let near = pins[Int(rng.next() % UInt64(pins.count))]
                    viewer = GeoPoint(lat: max(-90, min(90, near.point.lat + rng.double(-2, 2))),
                                      lon: max(-180, min(180, near.point.lon + rng.double(-2, 2))))
                }
                problem = checked.subscribe(Int32(rng.next() % 40), area: randomArea(), categories: mask, viewer: viewer)
            case 1, 2:
                var draft = draft(rng.double(-90, 90), rng.double(-180, 180), category: settings.categories[Int(rng.next() % 5)],
                                  ttl: 60 + Int(rng.next() % 3_600))
                draft.rangeMeters = randomRange()
                problem = checked.create(draft, id: PinID(random: secrets.randomBytes(16)), editDigest: digest, now: now)
            case 3:
                guard let id = randomPin() else { continue }
                var changes = PinChanges(lat: rng.double(-90, 90), lon: rng.double(-180, 180), category: settings.categories[Int(rng.next() % 5)])
                if ranges && rng.next() % 3 == 0 { changes.range = randomRange().map { .set($0) } ?? .remove }
                problem = checked.update(id, digest: digest, changes: changes, now: now)
            case 4:
                guard let id = randomPin() else { continue }
                problem = checked.delete(id, digest: digest)
            case 5:
                problem = checked.expire(now: now)
            case 6:
                guard let id = randomPin() else { continue }
                problem = checked.vote(id, voter: rng.next() % 6, value: rng.next() % 3 == 0 ? 1 : -1)
            default:
                problem = checked.unsubscribe(Int32(rng.next() % 40))
            }
            #expect(problem == nil, "step \(step)")
        }
        #expect(checked.oracle.pins.count > 50 && checked.oracle.subscriptions.count > 20, "the walk built up some state: \(checked.oracle.pins.count) pins, \(checked.oracle.subscriptions.count) subscriptions")
    }
}
