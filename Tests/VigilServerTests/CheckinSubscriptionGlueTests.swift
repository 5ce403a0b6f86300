import Testing
import VigilCore
import VigilPush
import VigilState
@testable import VigilServer

/// `checkin.register` and `checkin.unregister` through the application: the channel checks made
/// with VigilPush (which the domain does not know), the journal records, and a registration the
/// journal could not record taken back.
@Suite struct CheckinSubscriptionGlueTests {
    typealias U = UnrecordedChangesTests
    /// RFC 8291 §5's user agent key: a point of P-256.
    static let p256dh = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let auth = "BTBZMqHH6r4Tts7J_aSIgg"

    /// A server with both channels (and loopback http when `loopback`), or with neither.
    static func setup(channels: Bool = true, loopback: Bool = false) throws -> U.Setup {
        let key = try P256PrivateKey.generate()
        let subject = try VAPIDSubject("mailto:ops@example.org")
        let relay = try PushEndpoint("https://relay.example/hook")
        return try U.Setup { config in
            config.checkin.maxSubscriptionsPerHolder = 2
            config.push.allowLoopbackHTTP = loopback
            guard channels else { return }
            config.push.vapid = VAPIDSigner(key: key, subject: subject)
            config.push.relay = PushConfig.WebhookRelay(endpoint: relay, secret: WebhookSecret.generate())
        }
    }

    static func push(_ endpoint: String, key: String = p256dh) -> String {
        #""push":{"endpoint":"\#(endpoint)","keys":{"p256dh":"\#(key)","auth":"\#(auth)"}}"#
    }

    static func register(_ c: CheckinGlueTests.Circle, _ credential: String, _ target: String, ref: Int = 5) -> String {
        #"{"op":"checkin.register","ref":\#(ref),"circle":"\#(c.id)",\#(credential),\#(target)}"#
    }

    @Test func registrationsAreJournaledAndTheSameOneAgainIsNot() throws {
        let s = try Self.setup()
        let client = try s.h.open()
        let c = try CheckinGlueTests.create(s, client)
        let member = #""member_token":"\#(c.members[0])""#
        let first = try U.ask(s.h, client, Self.register(c, member, Self.push("https://push.example/a")))
        let id = try #require(first["subscription"]?.string)
        #expect(first.type == "ok" && SubscriptionID(id) != nil && s.log.records.count == 2)
        // Again, unchanged: the same id, nothing journaled.
        let again = try U.ask(s.h, client, Self.register(c, member, Self.push("https://push.example/a")))
        #expect(again["subscription"]?.string == id && s.log.records.count == 2)
        let relay = try U.ask(s.h, client, Self.register(c, #""owner_token":"\#(c.owner)""#, #""relay":{"handle":"apns:1"}"#))
        #expect(relay.type == "ok" && relay["subscription"]?.string != id && s.log.records.count == 3)
        guard case .circlePut(let circle) = s.log.records[2] else {
            Issue.record("records: \(s.log.records)")
            return
        }
        #expect(circle.subscriptions.map(\.holder) == [.member(1), .owner])
        // The bound: a second endpoint is the member's last.
        #expect(try U.ask(s.h, client, Self.register(c, member, Self.push("https://push.example/b"))).type == "ok")
        let over = try U.ask(s.h, client, Self.register(c, member, #""relay":{"handle":"x"}"#))
        #expect(over["code"]?.string == "too_many_subscriptions" && s.log.records.count == 4)
        // Unregister: the member's own, journaled; again, or another's, ok and nothing journaled.
        let unregister = #"{"op":"checkin.unregister","ref":9,"circle":"\#(c.id)",\#(member),"subscription":"\#(id)"}"#
        #expect(try U.ask(s.h, client, unregister).type == "ok" && s.log.records.count == 5)
        #expect(try U.ask(s.h, client, unregister).type == "ok" && s.log.records.count == 5)
        let others = #"{"op":"checkin.unregister","ref":9,"circle":"\#(c.id)",\#(member),"subscription":"\#(relay["subscription"]!.string!)"}"#
        #expect(try U.ask(s.h, client, others).type == "ok" && s.log.records.count == 5)
        #expect(s.h.v1.checkin.circle(CircleID(c.id)!)?.subscriptions.count == 2)
    }

    @Test func whatTheServerCannotUseIsRefusedBeforeTheCircle() throws {
        let off = try Self.setup(channels: false)
        let client = try off.h.open()
        let c = try CheckinGlueTests.create(off, client)
        let member = #""member_token":"\#(c.members[0])""#
        let noPush = try U.ask(off.h, client, Self.register(c, member, Self.push("https://push.example/a")))
        #expect(noPush["code"]?.string == "unsupported" && noPush["field"]?.string == "push")
        let noRelay = try U.ask(off.h, client, Self.register(c, member, #""relay":{"handle":"h"}"#))
        #expect(noRelay["code"]?.string == "unsupported" && noRelay["field"]?.string == "relay")

        let on = try Self.setup()
        let other = try on.h.open()
        let d = try CheckinGlueTests.create(on, other)
        let m = #""member_token":"\#(d.members[0])""#
        for endpoint in ["http://127.0.0.1:9/p", "https://user@push.example/p", "ftp://push.example/p", "https://push.example/p#x"] {
            let refused = try U.ask(on.h, other, Self.register(d, m, Self.push(endpoint)))
            #expect(refused["code"]?.string == "invalid_push" && refused["field"]?.string == "push.endpoint", "\(endpoint)")
            #expect(refused["message"]?.string?.contains("push.example") == false)
        }
        // 65 bytes starting 0x04, but not a point of the curve.
        let offCurve = Base64URL.encode([0x04] + Array(repeating: 1, count: 64))
        let notAPoint = try U.ask(on.h, other, Self.register(d, m, Self.push("https://push.example/p", key: offCurve)))
        #expect(notAPoint["code"]?.string == "invalid_push" && notAPoint["field"]?.string == "push.keys.p256dh")
        // A wrong token still gets forbidden once the target is usable.
        let wrong = try U.ask(on.h, other, Self.register(d, #""member_token":"nope""#, Self.push("https://push.example/p")))
        #expect(wrong["code"]?.string == "forbidden")
        #expect(on.log.records.count == 1 && off.log.records.count == 1)

        let loopback = try Self.setup(loopback: true)
        let third = try loopback.h.open()
        let e = try CheckinGlueTests.create(loopback, third)
        let ok = try U.ask(loopback.h, third, Self.register(e, #""member_token":"\#(e.members[0])""#, Self.push("http://127.0.0.1:9/p")))
        #expect(ok.type == "ok")
        let notLoopback = try U.ask(loopback.h, third, Self.register(e, #""member_token":"\#(e.members[0])""#, Self.push("http://push.example/p")))
        #expect(notLoopback["code"]?.string == "invalid_push")
    }

    @Test func revokingAMemberJournalsTheCircleWithoutItsSubscriptions() throws {
        let s = try Self.setup()
        let client = try s.h.open()
        let c = try CheckinGlueTests.create(s, client)
        for (i, token) in c.members.enumerated() {
            #expect(try U.ask(s.h, client, Self.register(c, #""member_token":"\#(token)""#, #""relay":{"handle":"h\#(i)"}"#)).type == "ok")
        }
        #expect(try U.ask(s.h, client, #"{"op":"checkin.revoke","ref":8,"circle":"\#(c.id)","owner_token":"\#(c.owner)","member":1}"#).type == "ok")
        guard case .circlePut(let circle) = s.log.records.last else {
            Issue.record("records: \(s.log.records)")
            return
        }
        #expect(circle.subscriptions.map(\.holder) == [.member(2)])
        // The revoked token registers nothing any more.
        let gone = try U.ask(s.h, client, Self.register(c, #""member_token":"\#(c.members[0])""#, #""relay":{"handle":"h"}"#))
        #expect(gone["code"]?.string == "forbidden")
    }

    @Test func aRegistrationTheJournalCouldNotRecordIsTakenBack() throws {
        let s = try Self.setup()
        let client = try s.h.open()
        let c = try CheckinGlueTests.create(s, client)
        s.log.failNextCommit = true
        let refused = try U.ask(s.h, client, Self.register(c, #""owner_token":"\#(c.owner)""#, #""relay":{"handle":"h"}"#))
        U.expectUnavailable(refused)
        #expect(s.h.v1.checkin.circle(CircleID(c.id)!)?.subscriptions.isEmpty == true)
    }
}
