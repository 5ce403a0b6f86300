import Testing
import VigilTestSupport
@testable import VigilCore

/// `checkin.register` and `checkin.unregister` in the hub and the decoder (issue 24).
@Suite struct CheckinSubscriptionTests {
    let secrets = TestSecrets()
    static let settings: CheckinSettings = {
        var s = CheckinSettings(maxCircles: 3, maxMembers: 3, requestsPerMinute: 2, idleLifetimeMs: 10_000, maxHomeMs: 5_000)
        s.maxSubscriptionsPerHolder = 2
        return s
    }()
    static let key: [UInt8] = [0x04] + Array(repeating: 7, count: 64)

    static func push(_ endpoint: String, auth: UInt8 = 1) -> CheckinSubscription.Target {
        .webPush(endpoint: endpoint, p256dh: key, auth: Array(repeating: auth, count: 16))
    }

    /// A hub with one circle owned by connection 1, two members.
    func circle(_ hub: inout CheckinHub) -> (id: CircleID, owner: CheckinCredential, members: [CheckinCredential]) {
        let created = try! hub.create(owner: 1, labels: ["Mum", nil], secrets: secrets, now: 1_000).get()
        return (created.circle.id, .owner(token: created.ownerToken), created.memberTokens.map { .member(token: $0) })
    }

    @Test func registerStoresPerHolderAndAnswersWithAnID() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        let owner = try hub.register(c.id, credential: c.owner, target: Self.push("https://a.example/1"), secrets: secrets, now: 2_000).get()
        let member = try hub.register(c.id, credential: c.members[1], target: .relay(handle: "dev-1"), secrets: secrets, now: 2_100).get()
        let held = try #require(member.circle)
        #expect(owner.subscription != member.subscription)
        #expect(held.subscriptions.map(\.holder) == [.owner, .member(2)] && held.subscriptions.map(\.addedAt) == [2_000, 2_100])
        #expect(held.subscriptions(of: .member(2)).map(\.target) == [.relay(handle: "dev-1")])
        #expect(held.activeAt == 2_100 && hub.circle(c.id) == held && held.isConsistent)
        // The text form of the id reads back.
        #expect(SubscriptionID(owner.subscription.description) == owner.subscription && owner.subscription.description.count == 22)
    }

    @Test func theSameDestinationAgainReplacesItsKeysUnderTheSameID() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        let first = try hub.register(c.id, credential: c.members[0], target: Self.push("https://a.example/1"), secrets: secrets, now: 2_000).get()
        // Unchanged: the same id, nothing changed (nothing to journal).
        let again = try hub.register(c.id, credential: c.members[0], target: Self.push("https://a.example/1"), secrets: secrets, now: 3_000).get()
        #expect(again.subscription == first.subscription && again.circle == nil && hub.circle(c.id)?.activeAt == 2_000)
        // New keys: the same id, replaced, no growth.
        let replaced = try hub.register(c.id, credential: c.members[0], target: Self.push("https://a.example/1", auth: 9), secrets: secrets, now: 3_000).get()
        #expect(replaced.subscription == first.subscription)
        let held = try #require(replaced.circle)
        #expect(held.subscriptions.count == 1 && held.subscriptions[0].target == Self.push("https://a.example/1", auth: 9))
        #expect(held.subscriptions[0].addedAt == 2_000 && held.activeAt == 3_000)
        // Another holder with the same endpoint is another subscription; so is a relay handle.
        let owners = try hub.register(c.id, credential: c.owner, target: Self.push("https://a.example/1"), secrets: secrets, now: 3_100).get()
        #expect(owners.subscription != first.subscription && owners.circle?.subscriptions.count == 2)
    }

    @Test func theBoundIsPerHolder() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        for n in 1...2 { _ = try hub.register(c.id, credential: c.members[0], target: Self.push("https://a.example/\(n)"), secrets: secrets, now: 2_000).get() }
        #expect(hub.register(c.id, credential: c.members[0], target: .relay(handle: "x"), secrets: secrets, now: 2_000).failure == .tooManySubscriptions)
        // At the bound, the same destination again still replaces; another holder still registers.
        _ = try hub.register(c.id, credential: c.members[0], target: Self.push("https://a.example/2", auth: 3), secrets: secrets, now: 2_000).get()
        _ = try hub.register(c.id, credential: c.members[1], target: .relay(handle: "x"), secrets: secrets, now: 2_000).get()
        _ = try hub.register(c.id, credential: c.owner, target: .relay(handle: "x"), secrets: secrets, now: 2_000).get()
        #expect(hub.circle(c.id)?.subscriptions.count == 4)
    }

    @Test func unregisterRemovesOnlyTheCallersOwn() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        let mine = try hub.register(c.id, credential: c.members[0], target: .relay(handle: "a"), secrets: secrets, now: 2_000).get().subscription
        let theirs = try hub.register(c.id, credential: c.members[1], target: .relay(handle: "a"), secrets: secrets, now: 2_000).get().subscription
        // Another's, an unknown one, or none at all: ok, nothing changed.
        #expect(try hub.unregister(c.id, credential: c.members[0], subscription: theirs, secrets: secrets, now: 3_000).get() == nil)
        #expect(try hub.unregister(c.id, credential: c.owner, subscription: mine, secrets: secrets, now: 3_000).get() == nil)
        #expect(try hub.unregister(c.id, credential: c.members[0], subscription: nil, secrets: secrets, now: 3_000).get() == nil)
        let changed = try #require(try hub.unregister(c.id, credential: c.members[0], subscription: mine, secrets: secrets, now: 3_000).get())
        #expect(changed.subscriptions.map(\.id) == [theirs] && changed.activeAt == 3_000)
        #expect(try hub.unregister(c.id, credential: c.members[0], subscription: mine, secrets: secrets, now: 3_100).get() == nil)
    }

    @Test func wrongTokensAndUnknownCirclesAreForbidden() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        let stranger = CircleID(random: secrets.randomBytes(16))
        #expect(hub.register(c.id, credential: .owner(token: "nope"), target: .relay(handle: "a"), secrets: secrets, now: 2_000).failure == .forbidden)
        #expect(hub.register(c.id, credential: .member(token: "nope"), target: .relay(handle: "a"), secrets: secrets, now: 2_000).failure == .forbidden)
        // A member's token is not the owner's, and the other way round.
        guard case .member(let m) = c.members[0], case .owner(let o) = c.owner else { return }
        #expect(hub.register(c.id, credential: .owner(token: m), target: .relay(handle: "a"), secrets: secrets, now: 2_000).failure == .forbidden)
        #expect(hub.register(c.id, credential: .member(token: o), target: .relay(handle: "a"), secrets: secrets, now: 2_000).failure == .forbidden)
        #expect(hub.register(stranger, credential: c.owner, target: .relay(handle: "a"), secrets: secrets, now: 2_000).failure == .forbidden)
        #expect(hub.unregister(stranger, credential: c.owner, subscription: nil, secrets: secrets, now: 2_000).failure == .forbidden)
        #expect(hub.circle(c.id)?.subscriptions.isEmpty == true)
    }

    @Test func revokingAMemberRemovesItsSubscriptionsAndItsTokenRegistersNoMore() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        for credential in [c.owner, c.members[0], c.members[1]] {
            _ = try hub.register(c.id, credential: credential, target: .relay(handle: "h"), secrets: secrets, now: 2_000).get()
        }
        guard case .owner(let ownerToken) = c.owner else { return }
        var out: [CheckinDelivery] = []
        let revoked = try #require(try hub.revoke(c.id, ownerToken: ownerToken, member: 1, secrets: secrets, now: 3_000, out: &out).get())
        #expect(revoked.subscriptions.map(\.holder) == [.owner, .member(2)] && revoked.isConsistent)
        #expect(hub.register(c.id, credential: c.members[0], target: .relay(handle: "h"), secrets: secrets, now: 3_000).failure == .forbidden)
    }

    @Test func closingOrIdleRemovalTakesEverySubscription() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        _ = try hub.register(c.id, credential: c.members[0], target: .relay(handle: "h"), secrets: secrets, now: 2_000).get()
        guard case .owner(let ownerToken) = c.owner else { return }
        var out: [CheckinDelivery] = []
        _ = try hub.close(c.id, ownerToken: ownerToken, secrets: secrets, out: &out).get()
        #expect(hub.circle(c.id) == nil && hub.exportCircles().allSatisfy { $0.subscriptions.isEmpty })
        let other = circle(&hub)
        _ = try hub.register(other.id, credential: other.owner, target: .relay(handle: "h"), secrets: secrets, now: 2_000).get()
        #expect(hub.tick(now: 12_000, out: &out) == [other.id] && hub.count == 0)
    }

    @Test func consistencyRefusesSubscriptionsNoHubMakes() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        let held = try #require(try hub.register(c.id, credential: c.members[0], target: .relay(handle: "h"), secrets: secrets, now: 2_000).get().circle)
        let s = held.subscriptions[0]
        let stranger = CheckinSubscription(id: SubscriptionID(high: 1, low: 1), holder: .member(9), target: .relay(handle: "h"), addedAt: 2_000)
        let twice = CheckinSubscription(id: SubscriptionID(high: 1, low: 2), holder: s.holder, target: s.target, addedAt: 2_000)
        let sameID = CheckinSubscription(id: s.id, holder: .owner, target: .relay(handle: "other"), addedAt: 2_000)
        let empty = CheckinSubscription(id: SubscriptionID(high: 1, low: 3), holder: .owner, target: .relay(handle: ""), addedAt: 2_000)
        let badKey = CheckinSubscription(id: SubscriptionID(high: 1, low: 4), holder: .owner,
                                         target: .webPush(endpoint: "https://a", p256dh: [0x02] + Self.key.dropFirst(), auth: Array(repeating: 0, count: 16)),
                                         addedAt: 2_000)
        for bad in [stranger, twice, sameID, empty, badKey] {
            #expect(!held.withSubscriptions(held.subscriptions + [bad]).isConsistent, "\(bad)")
        }
    }

    @Test func theRevisionCoversSubscriptionsOnlyWhenThereAreAny() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        let before = try #require(hub.circle(c.id))
        #expect(before.withSubscriptions([]).revision == before.revision)
        let after = try #require(try hub.register(c.id, credential: c.owner, target: .relay(handle: "h"), secrets: secrets, now: 1_000).get().circle)
        // In the same millisecond as the last change (activeAt unmoved), the revision still moves.
        #expect(after.activeAt == before.activeAt && after.revision != before.revision)
        let rekeyed = after.withSubscriptions([CheckinSubscription(id: after.subscriptions[0].id, holder: .owner, target: .relay(handle: "i"), addedAt: 1_000)])
        #expect(rekeyed.revision != after.revision)
    }
}

/// The decoder's side: every field, and every way it can be wrong.
@Suite struct CheckinSubscriptionDecoderTests {
    let decoder = RequestDecoder(settings: PinSettings(), checkin: CheckinSettings())
    static let circle = "AAAAAAAAAAAAAAAAAAAAAA"
    static let c = "\"circle\":\"\(circle)\""
    /// A real browser subscription's keys (RFC 8291 §5's example): unpadded base64url.
    static let p256dh = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let auth = "BTBZMqHH6r4Tts7J_aSIgg"
    static let push = #""push":{"endpoint":"https://push.example/s/1","keys":{"p256dh":"\#(p256dh)","auth":"\#(auth)"}}"#

    func operation(_ text: String) throws -> ClientOperation {
        try Array(text.utf8).withUnsafeBytes { decoder.decode($0) }.get().operation
    }

    func error(_ text: String) -> RequestError? {
        if case .failure(let rejected) = Array(text.utf8).withUnsafeBytes({ decoder.decode($0) }) { return rejected.error }
        return nil
    }

    func register(_ fields: String) -> String { #"{"op":"checkin.register",\#(Self.c),"member_token":"m",\#(fields)}"# }

    @Test func decodesRegisterAndUnregister() throws {
        let id = CircleID(Self.circle)
        let key = try #require(Base64URL.decode(Self.p256dh))
        let auth = try #require(Base64URL.decode(Self.auth))
        #expect(key.count == 65 && auth.count == 16)
        #expect(try operation(register(Self.push))
                == .checkin(.register(circle: id, credential: .member(token: "m"),
                                      target: .webPush(endpoint: "https://push.example/s/1", p256dh: key, auth: auth))))
        #expect(try operation(#"{"op":"checkin.register",\#(Self.c),"owner_token":"o","relay":{"handle":"apns:abc"}}"#)
                == .checkin(.register(circle: id, credential: .owner(token: "o"), target: .relay(handle: "apns:abc"))))
        // Padding that completes the last quantum is tolerated, as VigilPush's reader does.
        let padded = register(#""push":{"endpoint":"https://p","keys":{"p256dh":"\#(Self.p256dh)=","auth":"\#(Self.auth)=="}}"#)
        #expect(try operation(padded) == .checkin(.register(circle: id, credential: .member(token: "m"),
                                                            target: .webPush(endpoint: "https://p", p256dh: key, auth: auth))))
        let sid = SubscriptionID(high: 42, low: 7)
        #expect(try operation(#"{"op":"checkin.unregister",\#(Self.c),"owner_token":"o","subscription":"\#(sid)"}"#)
                == .checkin(.unregister(circle: id, credential: .owner(token: "o"), subscription: sid)))
        #expect(try operation(#"{"op":"checkin.unregister",\#(Self.c),"member_token":"m","subscription":"nope"}"#)
                == .checkin(.unregister(circle: id, credential: .member(token: "m"), subscription: nil)))
        let register = ClientOperation.checkin(.register(circle: nil, credential: .owner(token: ""), target: .relay(handle: "h")))
        let unregister = ClientOperation.checkin(.unregister(circle: nil, credential: .owner(token: ""), subscription: nil))
        #expect(register.name == "checkin.register" && register.isWrite && register.changesState)
        #expect(unregister.name == "checkin.unregister" && !unregister.isWrite && unregister.changesState)
    }

    @Test func refusesEveryBadFieldNamingIt() {
        let key = Self.p256dh, auth = Self.auth
        let cases: [(String, String, String?)] = [
            // the credential
            (#"{"op":"checkin.register",\#(Self.c),\#(Self.push)}"#, "invalid_token", nil),
            (#"{"op":"checkin.register",\#(Self.c),"owner_token":"o","member_token":"m",\#(Self.push)}"#, "invalid_token", nil),
            (#"{"op":"checkin.register",\#(Self.c),"owner_token":1,\#(Self.push)}"#, "invalid_token", "owner_token"),
            (#"{"op":"checkin.register","member_token":"m",\#(Self.push)}"#, "missing_field", "circle"),
            // push or relay, exactly one
            (register(#""x":1"#), "unknown_field", "x"),
            (#"{"op":"checkin.register",\#(Self.c),"member_token":"m"}"#, "invalid_subscription", nil),
            (register(#"\#(Self.push),"relay":{"handle":"h"}"#), "invalid_subscription", nil),
            // push
            (register(#""push":"https://a""#), "invalid_push", "push"),
            (register(#""push":{"endpoint":"https://a","keys":{"p256dh":"\#(key)","auth":"\#(auth)"},"expirationTime":"soon"}"#), "invalid_push", "push.expirationTime"),
            (register(#""push":{"keys":{"p256dh":"\#(key)","auth":"\#(auth)"}}"#), "missing_field", "push.endpoint"),
            (register(#""push":{"endpoint":5,"keys":{"p256dh":"\#(key)","auth":"\#(auth)"}}"#), "invalid_push", "push.endpoint"),
            (register(#""push":{"endpoint":"","keys":{"p256dh":"\#(key)","auth":"\#(auth)"}}"#), "invalid_push", "push.endpoint"),
            (register(#""push":{"endpoint":"https://a b","keys":{"p256dh":"\#(key)","auth":"\#(auth)"}}"#), "invalid_push", "push.endpoint"),
            (register(#""push":{"endpoint":"https://\#(String(repeating: "a", count: 1017))","keys":{"p256dh":"\#(key)","auth":"\#(auth)"}}"#),
             "invalid_push", "push.endpoint"),
            (register(#""push":{"endpoint":"https://a"}"#), "missing_field", "push.keys"),
            (register(#""push":{"endpoint":"https://a","keys":[]}"#), "invalid_push", "push.keys"),
            (register(#""push":{"endpoint":"https://a","keys":{"p256dh":"\#(key)","auth":"\#(auth)","x":1}}"#), "unknown_field", "push.keys.x"),
            (register(#""push":{"endpoint":"https://a","keys":{"auth":"\#(auth)"}}"#), "missing_field", "push.keys.p256dh"),
            (register(#""push":{"endpoint":"https://a","keys":{"p256dh":7,"auth":"\#(auth)"}}"#), "invalid_push", "push.keys.p256dh"),
            (register(#""push":{"endpoint":"https://a","keys":{"p256dh":"\#(key.dropLast(2))","auth":"\#(auth)"}}"#), "invalid_push", "push.keys.p256dh"),
            (register(#""push":{"endpoint":"https://a","keys":{"p256dh":"C\#(key.dropFirst())","auth":"\#(auth)"}}"#), "invalid_push", "push.keys.p256dh"),
            (register(#""push":{"endpoint":"https://a","keys":{"p256dh":"\#(key.replacingOccurrences(of: "_", with: "/"))","auth":"\#(auth)"}}"#),
             "invalid_push", "push.keys.p256dh"),
            (register(#""push":{"endpoint":"https://a","keys":{"p256dh":"\#(key)"}}"#), "missing_field", "push.keys.auth"),
            (register(#""push":{"endpoint":"https://a","keys":{"p256dh":"\#(key)","auth":"\#(auth)AA"}}"#), "invalid_push", "push.keys.auth"),
            // The last character's unused bits set: not the canonical text of any 16 bytes.
            (register(#""push":{"endpoint":"https://a","keys":{"p256dh":"\#(key)","auth":"BTBZMqHH6r4Tts7J_aSIgh"}}"#), "invalid_push", "push.keys.auth"),
            // relay
            (register(#""relay":"h""#), "invalid_relay", "relay"),
            (register(#""relay":{}"#), "missing_field", "relay.handle"),
            (register(#""relay":{"handle":"h","kind":"apns"}"#), "unknown_field", "relay.kind"),
            (register(#""relay":{"handle":""}"#), "invalid_relay", "relay.handle"),
            (register(#""relay":{"handle":"a b"}"#), "invalid_relay", "relay.handle"),
            (register(#""relay":{"handle":"é"}"#), "invalid_relay", "relay.handle"),
            (register(#""relay":{"handle":"\#(String(repeating: "h", count: 513))"}"#), "invalid_relay", "relay.handle"),
            // unregister
            (#"{"op":"checkin.unregister",\#(Self.c),"owner_token":"o"}"#, "missing_field", "subscription"),
            (#"{"op":"checkin.unregister",\#(Self.c),"owner_token":"o","subscription":3}"#, "invalid_subscription", "subscription"),
            (#"{"op":"checkin.unregister",\#(Self.c),"subscription":"s"}"#, "invalid_token", nil),
        ]
        for (text, code, field) in cases {
            let e = error(text)
            #expect(e?.code == code && e?.field == field, "\(text.prefix(160)): \(String(describing: e))")
        }
        // A 1024-byte endpoint and a 512-byte handle are the largest taken.
        #expect(error(register(#""push":{"endpoint":"https://\#(String(repeating: "a", count: 1016))","keys":{"p256dh":"\#(key)","auth":"\#(auth)"}}"#)) == nil)
        #expect(error(register(#""relay":{"handle":"\#(String(repeating: "h", count: 512))"}"#)) == nil)
    }

    @Test func base64URLDecodesOnlyCanonicalText() {
        for bytes in [[], [0], [1, 2], [1, 2, 3], Array(0...255).map(UInt8.init)] as [[UInt8]] {
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
        for bad in ["A", "AB=", "A===", "AB==A", "+/AA", "AB C", "AQ=", "AR"] {
            #expect(Base64URL.decode(bad) == nil, "\(bad)")
        }
        #expect(Base64URL.decode("AQ==") == [1] && Base64URL.decode("AQ") == [1] && Base64URL.decode("AQI=") == [1, 2])
    }
}
