import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// Circles' subscriptions in the state formats (issue 24): journal kind 22, snapshot version 7,
/// the layouts before them, replay, the digest and the inspector.
@Suite struct CircleSubscriptionStateTests {
    static func payload(_ record: JournalRecord) -> [UInt8] { Array(JournalCodec.encode(record).dropFirst(JournalCodec.frameBytes)) }

    @Test func aCircleWithSubscriptionsIsKind22AndOneWithoutStays20() throws {
        let plain = try CircleStateTests.circle(seed: 3)
        let subscribed = try CircleStateTests.circle(seed: 3, subscribed: true)
        #expect(plain.subscriptions.isEmpty && subscribed.subscriptions.count == 3 && subscribed.isConsistent)
        #expect(Self.payload(.circlePut(plain))[0] == 20 && Self.payload(.circlePut(subscribed))[0] == 22)
        for c in [plain, subscribed] {
            #expect(try JournalCodec.decodeRecord(payload: Self.payload(.circlePut(c))) == .circlePut(c))
        }
        // Kind 22 is kind 20's bytes followed by the subscriptions: a build before them reads the
        // older kind exactly as it wrote it.
        let twenty = Self.payload(.circlePut(subscribed.withSubscriptions([]))), twentyTwo = Self.payload(.circlePut(subscribed))
        #expect(twenty[0] == 20 && Array(twentyTwo[1..<twenty.count]) == Array(twenty[1...]))
        #expect(Array(twentyTwo[twenty.count..<(twenty.count + 4)]) == [3, 0, 0, 0])
    }

    @Test func damagedSubscriptionsAreRefusedNeverATrap() throws {
        let c = try CircleStateTests.circle(seed: 3, subscribed: true)
        let good = Self.payload(.circlePut(c))
        for cut in 0..<good.count {
            #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: Array(good.prefix(cut))) }
        }
        // Kind 22 with no subscriptions: not the form any build writes (it would be 20).
        var empty = Self.payload(.circlePut(c.withSubscriptions([])))
        empty[0] = 22
        empty += [0, 0, 0, 0]
        #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: empty) }
        // A subscription of a revoked member, two of one destination, and a key of the wrong form.
        let s = c.subscriptions[0]
        let strays: [CheckinSubscription] = [
            CheckinSubscription(id: SubscriptionID(high: 9, low: 9), holder: .member(3), target: .relay(handle: "x"), addedAt: s.addedAt),
            CheckinSubscription(id: SubscriptionID(high: 9, low: 8), holder: s.holder, target: s.target, addedAt: s.addedAt),
        ]
        for stray in strays {
            #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: Self.payload(.circlePut(c.withSubscriptions(c.subscriptions + [stray])))) }
        }
        // The first subscription's kind byte: after the circle's own fields (kind 20's length), the
        // count, id, holder and time.
        let kindAt = Self.payload(.circlePut(c.withSubscriptions([]))).count + 4 + 16 + 4 + 8
        for bad: UInt8 in [0, 3, 255] {
            var damaged = good
            damaged[kindAt] = bad
            #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: damaged) }
        }
        var point = good
        point[kindAt + 1 + 4 + "https://push.example/owner".utf8.count] = 0x02   // p256dh's first byte: not uncompressed
        #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: point) }
    }

    @Test func snapshotVersion7KeepsSubscriptionsAndVersion6ReadsWithNone() throws {
        let circles = [try CircleStateTests.circle(seed: 3, subscribed: true), try CircleStateTests.circle(seed: 4)].sorted { $0.id < $1.id }
        let snapshot = StateSnapshot(takenAt: 5, journalSegment: 6, pins: [], streams: [], circles: circles)
        let bytes = SnapshotCodec.encode(snapshot)
        #expect(bytes[8] == 9 && SnapshotCodec.version == 9)
        let decoded = try SnapshotCodec.decode(bytes)
        #expect(decoded.circles == circles && decoded.circles.map(\.subscriptions.count).sorted() == [0, 3])
        var writer = SnapshotWriter(takenAt: 5, journalSegment: 6)
        for c in circles { writer.append(c) }
        #expect(writer.finish() == bytes)

        // The build before wrote version 6: its circle reads with no subscriptions, and is written
        // back as version 8, the same bytes but for the version and the empty lists' counts
        // (its subscriptions, and the snapshot's settlements, acknowledgements and kept answers).
        let old = FormatFixtureTests.snapshotV6Circle
        let read = try SnapshotCodec.decode(old)
        let circle = try #require(read.circles.first)
        #expect(old[8] == 6 && read.circles.count == 1 && circle.subscriptions.isEmpty && circle.members.count == 2)
        let again = SnapshotCodec.encode(read)
        #expect(again[8] == 9 && again.count == old.count + 4 + 4 + 4 + 4)
        #expect(Array(again[9..<(again.count - 20)]) == Array(old[9..<(old.count - 4)])
                && Array(again.suffix(20).prefix(16)) == [UInt8](repeating: 0, count: 16))
    }

    @Test func replayKeepsTheLastRecordsSubscriptions() throws {
        let c = try CircleStateTests.circle(seed: 3, subscribed: true)
        var image = StateImage()
        image.apply([.circlePut(c.withSubscriptions([])), .circlePut(c)])
        #expect(image.circles[c.id] == c)
        let fewer = c.withSubscriptions(Array(c.subscriptions.prefix(1)))
        image.apply(.circlePut(fewer))
        #expect(image.circles[c.id]?.subscriptions == fewer.subscriptions)
        #expect(image.restoreCircles(settings: CircleStateTests.settings, now: c.activeAt + 1).circle(c.id)?.subscriptions == fewer.subscriptions)
    }

    @Test func theInspectorCountsSubscriptionsAndNeverShowsThem() throws {
        let c = try CircleStateTests.circle(seed: 3, subscribed: true)
        for content in [false, true] {
            let lines = try CircleStateTests.inspectorLines(c, content: content)
            let text = lines.joined(separator: "\n")
            let counts = #""subscriptions":{"owner":{"web_push":1,"relay":0},"members":[{"member":1,"web_push":1,"relay":1}]}"#
            #expect(lines.filter { $0.contains(counts) }.count == 2, "\(text)")
            for secret in ["push.example", "fcm:mum-phone", "mum"] { #expect(!text.contains(secret), "\(secret)") }
            for s in c.subscriptions {
                #expect(!text.contains(s.id.description))
                if case .webPush(_, let key, let auth) = s.target {
                    #expect(!text.contains(Base64URL.encode(key)) && !text.contains(Base64URL.encode(auth)))
                }
            }
        }
    }
}
