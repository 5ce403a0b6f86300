import Foundation
import Glibc
import Testing
import VigilCore
import VigilLoop
import VigilState
import VigilTestSupport
import VigilWire
@testable import VigilServer

/// The glue (connections, dispatch, fan-out, persistence hand-off) driven over socketpairs.
@Suite struct ServerGlueTests {
    // MARK: the close handshake

    @Test func aClientCloseIsEchoedAndTheSocketDrainsToEOF() throws {
        let h = try ServerHarness()
        let client = try h.open("/echo")
        client.write(client.frame(.close, FrameEncoder.closePayload(code: .normal, reason: "bye")))
        try h.run(until: { client.poll(); return client.ended })
        #expect(client.closes == [1000])
        #expect(h.server.webSocketCount == 0)
        // The server shut its write side; our FIN ends the connection.
        shutdown(client.fd, Int32(SHUT_WR))
        try h.run(until: { h.server.connectionCount == 0 })
    }

    @Test func aProtocolViolationClosesWith1002AndNothingAfterIt() throws {
        let h = try ServerHarness()
        let client = try h.open("/echo")
        // An unmasked frame from a client (RFC 6455 §5.1), then a frame that must not be echoed.
        client.write(FrameEncoder.frame(opcode: .text, payload: Array("unmasked".utf8)) + client.frame(.text, Array("late".utf8)))
        try h.run(until: { client.poll(); return client.ended })
        #expect(client.closes == [1002])
        #expect(client.messages.isEmpty)
    }

    @Test func messagesSplitAcrossReadsAreEchoedWhole() throws {
        let h = try ServerHarness()
        let client = try h.open("/echo")
        let frame = client.frame(.text, Array(String(repeating: "ü", count: 3_000).utf8))
        for piece in stride(from: 0, to: frame.count, by: 777) {
            client.write(Array(frame[piece..<min(piece + 777, frame.count)]))
            try h.turn()
        }
        try h.read(client, count: 1)
        #expect(client.messages.map(\.text) == [String(repeating: "ü", count: 3_000)])
    }

    // MARK: ordering within a turn

    @Test func aPolicyCloseFollowsTheRepliesAlreadyProducedForTheClient() throws {
        let h = try ServerHarness { $0.messageBurst = 3; $0.messagesPerSecond = 1 }
        let client = try h.open()
        // Four requests in one write, read in one turn: three are answered, the fourth is over
        // the message limit; the close must come after the three replies, not before them.
        client.write((1...4).flatMap { client.frame(.text, Array(#"{"op":"unsubscribe","ref":\#($0)}"#.utf8)) })
        try h.run(until: { client.poll(); return !client.closes.isEmpty })
        #expect(client.messages.map { $0["ref"]?.int } == [1, 2, 3])
        #expect(client.closes == [1008])
    }

    @Test func anEventProducedBeforeARequestIsAnsweredReachesTheClientBeforeTheAnswer() throws {
        let h = try ServerHarness()
        let subscriber = try h.open()
        let publisher = try h.open()
        subscriber.send(#"{"op":"subscribe","ref":"s","area":{"bbox":[52.0,13.0,53.0,14.0]}}"#)
        try h.read(subscriber, count: 1)
        // Both requests land in one turn; whichever is applied first, the subscriber must never
        // see the event after the answer to its unsubscribe.
        publisher.send(#"{"op":"pin.create","ref":"p","pin":{"lat":52.5,"lon":13.4,"title":"t"}}"#)
        subscriber.send(#"{"op":"unsubscribe","ref":"u"}"#)
        try h.read(subscriber, count: 2)
        try h.read(publisher, count: 1)
        try h.turn()
        subscriber.poll()
        let kinds = subscriber.messages.dropFirst().map { $0.type == "ok" ? "ok:\($0["ref"]?.string ?? "")" : $0.type ?? "?" }
        #expect(kinds == ["ok:u"] || kinds == ["pin.added", "ok:u"])
    }

    // MARK: slow consumers during the fan-out

    /// A watcher that stops reading is dropped during the fan-out; the other watcher gets every
    /// seq exactly once (before the rebuild, the drop re-entered the fan-out and sent the batch
    /// again: duplicate seqs), and the owner hears the new watcher count.
    @Test func aWatcherDroppedDuringTheFanOutCostsTheOtherWatcherNothing() throws {
        // No conflation here (it would keep the stalled watcher under its budget), and a short
        // close timeout: the stalled watcher never answers the close it is sent.
        let h = try ServerHarness {
            $0.maxOutputBufferBytes = 65_536
            $0.conflateAboveBytes = 1 << 30
            $0.closeTimeoutMs = 100
        }
        let owner = try h.open()
        owner.send(#"{"op":"panic.start","ref":0,"status":"red","lat":52.5,"lon":13.4,"watchers":2}"#)
        try h.read(owner, count: 1)
        let started = owner.messages.removeFirst()
        let stream = try #require(started["stream"]?.string)
        let tokens = (started["watch_tokens"]?.array ?? []).compactMap { $0.string }
        try #require(tokens.count == 2)
        let stalled = try h.open(serverSendBuffer: 2_048)
        let reader = try h.open()
        for (client, token) in [(stalled, tokens[0]), (reader, tokens[1])] {
            client.send(#"{"op":"panic.watch","ref":"w","stream":"\#(stream)","watch_token":"\#(token)"}"#)
            try h.read(client, count: 1)
            client.messages.removeAll()
        }
        try h.run(until: { owner.poll(); return owner.all("panic.watchers").last?["count"]?.int == 2 })
        owner.messages.removeAll()

        // Bursts of 300 updates (about 45 KB of events), each read and applied in one turn, until
        // the stalled watcher's queue overflows its 64 KiB part-way through a fan-out; the reader
        // drains its socket between bursts.
        var updates = 0
        while h.v1.panic.watcherCount(try #require(StreamID(stream))) == 2 && updates < 6_000 {
            owner.write((updates..<updates + 300).flatMap { i in
                owner.frame(.text, Array(#"{"op":"panic.update","ref":\#(i),"stream":"\#(stream)","lat":52.5,"lon":13.\#(4000 + i)}"#.utf8))
            })
            updates += 300
            try h.run(until: { reader.poll(); owner.poll(); return reader.messages.count >= updates && owner.all("ok").count >= updates })
        }
        try h.run(until: { owner.poll(); return owner.all("panic.watchers").last?["count"]?.int == 1 })
        for _ in 0..<5 { try h.turn() }
        reader.poll()
        let seqs = reader.all("panic.location").compactMap { $0["seq"]?.int }
        #expect(seqs == Array(2...(updates + 1)))
        #expect(reader.messages.count == updates)
        #expect(owner.all("ok").compactMap { $0["seq"]?.int } == Array(2...(updates + 1)))
        stalled.poll()
        #expect(stalled.ended)
        // It never answered the close it was sent: still counted as a slow consumer, not a close timeout.
        #expect(h.server.counters.ended[ConnectionEnd.slowConsumer.rawValue] == 1)
        #expect(h.server.counters.ended[ConnectionEnd.closeTimeout.rawValue] == 0)
    }

    /// The same for the map: a subscriber that stops reading is dropped, the others see each pin once.
    @Test func aSubscriberDroppedDuringTheFanOutCostsTheOtherSubscriberNothing() throws {
        let h = try ServerHarness {
            $0.maxOutputBufferBytes = 65_536
            $0.closeTimeoutMs = 100
        }
        let stalled = try h.open(serverSendBuffer: 2_048)
        let reader = try h.open()
        let publisher = try h.open()
        for client in [stalled, reader] {
            client.send(#"{"op":"subscribe","ref":"s","area":{"bbox":[52.0,13.0,53.0,14.0]}}"#)
            try h.read(client, count: 1)
            client.messages.removeAll()
        }
        // Bursts of 120 pins (about 40 KB of events), until one overflows the stalled subscriber's
        // 64 KiB queue during the fan-out.
        var pins = 0
        while h.v1.hub.subscriptions.count == 2 && pins < 2_400 {
            publisher.write((pins..<pins + 120).flatMap { i in
                publisher.frame(.text, Array(#"{"op":"pin.create","ref":\#(i),"pin":{"lat":52.5,"lon":13.4,"title":"pin \#(i)"}}"#.utf8))
            })
            pins += 120
            try h.run(until: { reader.poll(); publisher.poll(); return reader.messages.count >= pins })
        }
        for _ in 0..<5 { try h.turn() }
        reader.poll()
        let titles = reader.all("pin.added").compactMap { $0["pin"]?.object?["title"]?.string }
        #expect(titles == (0..<pins).map { "pin \($0)" })
        #expect(reader.messages.count == pins)
        stalled.poll()
        #expect(stalled.ended)
        #expect(h.v1.hub.subscriptions.count == 1)
    }

    // MARK: journal before reply

    /// Under `fsync: always`, the journal's bytes are written (and synced) before the reply's bytes
    /// leave: the log's commit sees an empty client socket, and the file holds the record after it.
    @Test(arguments: [
        #"{"op":"pin.create","ref":1,"pin":{"lat":52.5,"lon":13.4,"title":"t"}}"#,
        #"{"op":"panic.start","ref":1,"status":"red","lat":52.5,"lon":13.4,"watchers":1}"#,
    ])
    func theJournalIsWrittenBeforeTheReplyLeaves(request: String) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("vigil-glue-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let h = try ServerHarness {
            $0.stateDirectory = directory
            $0.fsyncPolicy = "always"
        }
        let client = try h.open()
        let journal = try #require(try FileManager.default.contentsOfDirectory(atPath: directory).first { $0.hasPrefix("journal-") })
        let path = directory + "/" + journal
        let sizeBefore = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let witness = CommitWitness(inner: try #require(h.v1.log), client: client.fd, journal: path)
        h.v1.log = witness
        client.send(request)
        try h.read(client, count: 1)
        #expect(client.messages.first?.type == "ok")
        #expect(witness.commits >= 1)
        #expect(witness.clientHadBytesAtCommit == false)
        #expect(try #require(witness.sizeAfterCommit) > sizeBefore)
    }

    /// Under `fsync: interval`, the periodic fdatasync runs off the loop (`IntervalSync`): the
    /// acknowledged pin's record is synced by the background sync, and no sync ran on the loop.
    @Test func theIntervalSyncRunsOffTheLoop() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("vigil-glue-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let h = try ServerHarness {
            $0.stateDirectory = directory
            $0.fsyncPolicy = "interval"
            $0.fsyncIntervalMs = 1
        }
        let persistence = try #require(h.v1.persistence)
        let before = persistence.journalStats
        let client = try h.open()
        client.send(#"{"op":"pin.create","ref":1,"pin":{"lat":52.5,"lon":13.4,"title":"t"}}"#)
        try h.read(client, count: 1)
        #expect(client.messages.first?.type == "ok")
        // The next tick (50 ms) starts the sync; its outcome wakes the loop through the inbox.
        try h.run(until: { persistence.journalStats.backgroundFsyncs > before.backgroundFsyncs })
        let after = persistence.journalStats
        #expect(after.records > before.records)
        #expect(after.fsyncs - before.fsyncs == after.backgroundFsyncs - before.backgroundFsyncs)
        #expect(persistence.outage == nil)
    }
}

/// A `ChangeLog` that checks, at each commit, that no reply has reached the client yet, then
/// commits for real and notes the journal's size.
final class CommitWitness: ChangeLog {
    let inner: any ChangeLog
    let client: Int32
    let journal: String
    private(set) var commits = 0
    private(set) var clientHadBytesAtCommit = false
    private(set) var sizeAfterCommit: Int?
    private var appended = 0

    init(inner: any ChangeLog, client: Int32, journal: String) {
        self.inner = inner
        self.client = client
        self.journal = journal
    }

    func append(_ record: JournalRecord) {
        appended += 1
        inner.append(record)
    }

    func refusalRetryAfterMs() -> Int64? { inner.refusalRetryAfterMs() }

    func commitTurn() -> Bool {
        guard appended > 0 else { return inner.commitTurn() }
        appended = 0
        commits += 1
        var byte: UInt8 = 0
        if recv(client, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0 { clientHadBytesAtCommit = true }
        let recorded = inner.commitTurn()
        sizeAfterCommit = (try? FileManager.default.attributesOfItem(atPath: journal)[.size]) as? Int
        return recorded
    }
}

/// The named send policies (issue 11): replies bounded so they never close an honest client, map
/// subscribers that fall behind closed with 1013 and a reason, panic watchers conflated.
@Suite struct SendPolicyGlueTests {
    static let area = #"{"bbox":[52.0,13.0,53.0,14.0]}"#

    /// Before: a subscribe reply was queued whole whatever its size, and the next event then found
    /// the queue over the budget and dropped the client. Now the reply is cut to half the budget.
    @Test func aHugeSubscribeReplyIsCutAndTheClientStaysOpen() throws {
        let h = try ServerHarness { $0.maxOutputBufferBytes = 262_144 }
        let publisher = try h.open()
        let description = String(repeating: "d", count: 900)
        publisher.write((0..<300).flatMap { i in
            publisher.frame(.text, Array(#"{"op":"pin.create","ref":\#(i),"pin":{"lat":52.5,"lon":13.4,"title":"p\#(i)","description":"\#(description)"}}"#.utf8))
        })
        try h.read(publisher, count: 300)
        let subscriber = try h.open(serverSendBuffer: 4_096)
        subscriber.send(#"{"op":"subscribe","ref":"s","area":\#(Self.area)}"#)
        try h.turn()
        // An event while most of the reply is still queued.
        publisher.send(#"{"op":"pin.create","ref":"late","pin":{"lat":52.5,"lon":13.4,"title":"late"}}"#)
        do {
            try h.run(until: { subscriber.poll(); return subscriber.messages.count >= 2 || subscriber.ended })
        } catch {
            Issue.record("subscriber: \(subscriber.messages.count) messages, ended \(subscriber.ended), closes \(subscriber.closes), raw \(subscriber.raw.count) bytes; publisher \(publisher.messages.count)")
            throw error
        }
        let reply = try #require(subscriber.messages.first)
        #expect(reply.type == "ok" && reply["truncated"]?.bool == true)
        let pins = reply["pins"]?.array?.count ?? 0
        #expect(pins > 0 && pins < 300)
        #expect(reply.text.utf8.count <= 131_072)
        #expect(subscriber.messages.dropFirst().first?.type == "pin.added")
        #expect(!subscriber.ended)
    }

    /// A map subscriber over its budget: the backlog is dropped and a close 1013 with the reason
    /// goes out next; the others are not affected.
    @Test func aSubscriberThatFallsBehindIsClosedWith1013AndAReason() throws {
        _ = try stalledSubscriberIsClosed { $0.maxOutputBufferBytes = 65_536 }
    }

    /// Past the total budget (`max_total_output_bytes`) the fan-out cannot decide a map event's
    /// budget once, and a recipient past the least it can have asks (`FanOutBudget`): a subscriber
    /// far below its own budget but holding more than the global floor (64 KiB) is closed with
    /// 1013. Its own budget (4 MiB) is more than all the events sent here, so only the total can
    /// close it.
    @Test func pastTheTotalBudgetASubscriberOverTheFloorIsClosed() throws {
        let sent = try stalledSubscriberIsClosed {
            $0.maxOutputBufferBytes = 4 << 20
            $0.maxTotalOutputBytes = 200_000
        }
        #expect(sent * 400 < 4 << 20)  // every event sent fits in the subscriber's own budget
    }

    /// Publishes map events to a subscriber that reads nothing until the server closes it (at most
    /// 3,000), then checks it got some of them and a close 1013; returns how many were published.
    private func stalledSubscriberIsClosed(_ configure: (inout ServerConfig) -> Void) throws -> Int {
        let h = try ServerHarness(configure)
        let stalled = try h.open(serverSendBuffer: 2_048)
        let publisher = try h.open()
        stalled.send(#"{"op":"subscribe","ref":"s","area":\#(Self.area)}"#)
        try h.read(stalled, count: 1)
        stalled.messages.removeAll()
        var sent = 0
        while h.v1.hub.subscriptions.count == 1 && sent < 3_000 {
            publisher.write((sent..<sent + 100).flatMap { i in
                publisher.frame(.text, Array(#"{"op":"pin.create","ref":\#(i),"pin":{"lat":52.5,"lon":13.4,"title":"p\#(i)"}}"#.utf8))
            })
            sent += 100
            try h.read(publisher, count: sent)
            if h.server.webSocketCount == 1 || stalled.closes.count > 0 { break }
        }
        // Read what the stalled client was sent: some events, then the close frame.
        try h.run(until: { stalled.poll(); return !stalled.closes.isEmpty })
        #expect(stalled.closes == [1013])
        #expect(stalled.messages.allSatisfy { $0.type == "pin.added" })
        #expect(stalled.messages.count < sent)
        #expect(h.server.counters.slowConsumerCloses[TrafficClass.mapEvent.rawValue] == 1)
        return sent
    }

    /// A slow watcher's unsent locations are replaced by the newest; its status and end events are
    /// never replaced, and what it gets is in seq order without duplicates.
    @Test func aSlowWatcherGetsTheNewestLocationsAndEveryOtherEvent() throws {
        let h = try ServerHarness {
            $0.maxOutputBufferBytes = 1_048_576
            $0.conflateAboveBytes = 8_192
        }
        let owner = try h.open()
        owner.send(#"{"op":"panic.start","ref":0,"status":"amber","lat":52.5,"lon":13.4,"watchers":1}"#)
        try h.read(owner, count: 1)
        let started = owner.messages.removeFirst()
        let stream = try #require(started["stream"]?.string)
        let token = try #require(started["watch_tokens"]?.array?.first?.string)
        let watcher = try h.open(serverSendBuffer: 2_048)
        watcher.send(#"{"op":"panic.watch","ref":"w","stream":"\#(stream)","watch_token":"\#(token)"}"#)
        try h.read(watcher, count: 1)
        watcher.messages.removeAll()
        func updates(_ range: Range<Int>) -> [UInt8] {
            range.flatMap { i in owner.frame(.text, Array(#"{"op":"panic.update","ref":\#(i),"stream":"\#(stream)","lat":52.5,"lon":13.\#(4000 + i)}"#.utf8)) }
        }
        owner.write(updates(0..<400))
        try h.run(until: { owner.poll(); return owner.all("ok").count >= 400 })
        owner.send(#"{"op":"panic.status","ref":"red","stream":"\#(stream)","status":"red"}"#)
        owner.write(updates(400..<800))
        owner.send(#"{"op":"panic.end","ref":"end","stream":"\#(stream)","reason":"safe"}"#)
        try h.run(until: { owner.poll(); return owner.all("ok").count >= 802 })
        #expect(h.server.counters.conflations > 0)
        // Now the watcher reads everything it was sent.
        try h.run(until: { watcher.poll(); return watcher.all("panic.ended").count == 1 })
        let seqs = watcher.messages.compactMap { $0["seq"]?.int }
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count)
        #expect(seqs.count < 803)
        #expect(watcher.all("panic.status").map { $0["seq"]?.int } == [402])
        #expect(watcher.all("panic.ended").first?["seq"]?.int == 803)
        #expect(watcher.all("panic.location").last?["seq"]?.int == 802)  // the newest location is never lost
        #expect(!watcher.ended)
    }
}

/// permessage-deflate in the fan-out: one compressed frame per event and setting, shared.
@Suite struct CompressionGlueTests {
    @Test func anEventIsCompressedOncePerSettingWhateverTheNumberOfSubscribers() throws {
        let h = try ServerHarness()
        let compressing = try (0..<3).map { _ in try h.open(deflate: true) }
        let plain = try h.open()
        let publisher = try h.open()
        for client in compressing + [plain] {
            client.send(#"{"op":"subscribe","ref":"s","area":{"bbox":[52.0,13.0,53.0,14.0]}}"#)
            try h.read(client, count: 1)
            client.messages.removeAll()
        }
        let description = Array(repeating: "a long, compressible description", count: 20).joined(separator: " ")
        let before = h.server.compression.framesCompressed
        publisher.send(#"{"op":"pin.create","ref":1,"pin":{"lat":52.5,"lon":13.4,"title":"t","description":"\#(description)"}}"#)
        for client in compressing + [plain] {
            try h.read(client, count: 1)
            #expect(client.messages.first?.type == "pin.added")
            #expect(client.messages.first?["pin"]?.object?["description"]?.string == description)
        }
        #expect(h.server.compression.framesCompressed - before == 1)
        #expect(h.server.compression.slotCount == 1)
    }
}

/// Every client message gets exactly one reply (issue 11: malformed stream ids got none).
@Suite struct OneReplyPerRequestTests {
    /// Random and mutated ids, tokens and fields for every operation, each with a unique ref:
    /// exactly one reply (`ok` or `error`) per ref comes back, and nothing else carries a ref.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func everyOperationGetsExactlyOneReply(seed: UInt64) throws {
        let h = try ServerHarness()
        let owner = try h.open()
        owner.send(#"{"op":"panic.start","ref":"setup","status":"red","lat":1,"lon":1,"watchers":2}"#)
        try h.read(owner, count: 1)
        let started = owner.messages.removeFirst()
        let stream = try #require(started["stream"]?.string)
        let token = try #require(started["owner_token"]?.string)
        let watch = try #require(started["watch_tokens"]?.array?.first?.string)
        owner.send(#"{"op":"pin.create","ref":"pin","pin":{"lat":1,"lon":1,"title":"p"}}"#)
        try h.read(owner, count: 1)
        let pin = try #require(owner.messages.removeFirst()["pin"]?.object?["id"]?.string)
        let client = try h.open()
        var rng = SplitMix64(state: seed)
        func pick<T>(_ options: [T]) -> T { options[Int(rng.next() % UInt64(options.count))] }
        func mutate(_ text: String) -> String {
            var bytes = Array(text.utf8)
            switch rng.next() % 6 {
            case 0: return String(text.dropLast())                       // wrong length
            case 1: return text + "A"                                    // wrong length
            case 2: if !bytes.isEmpty { bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(ascii: "!") }  // outside base64url
            case 3: if !bytes.isEmpty { bytes[bytes.count - 1] = UInt8(ascii: "B") }  // unused bits set
            case 4: return ""
            default: return text                                          // the real one
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        func value(_ real: String) -> String {
            switch rng.next() % 5 {
            case 0: return "7"                        // a number where a string belongs
            case 1: return "null"
            case 2: return "\"\(mutate(real))\""
            default: return "\"\(real)\""
            }
        }
        let ops: [(String) -> String] = [
            { _ in #"{"op":"panic.update","stream":\#(value(stream)),"lat":1,"lon":1}"# },
            { _ in #"{"op":"panic.update","stream":\#(value(stream)),"owner_token":\#(value(token)),"lat":91,"lon":1}"# },
            { _ in #"{"op":"panic.status","stream":\#(value(stream)),"owner_token":\#(value(token)),"status":\#(pick(["\"red\"", "\"amber\"", "\"blue\"", "1"]))}"# },
            { _ in #"{"op":"panic.end","stream":\#(value(stream)),"owner_token":\#(value(token)),"reason":\#(pick(["\"safe\"", "\"abandoned\"", "\"x\""]))}"# },
            { _ in #"{"op":"panic.resume","stream":\#(value(stream)),"owner_token":\#(value(token))}"# },
            { _ in #"{"op":"panic.watch","stream":\#(value(stream)),"watch_token":\#(value(watch))\#(pick(["", #","since":1"#, #","since":-3"#, #","since":"x""#]))}"# },
            { _ in #"{"op":"panic.unwatch","stream":\#(value(stream))}"# },
            { _ in #"{"op":"panic.invite","stream":\#(value(stream)),"owner_token":\#(value(token))}"# },
            { _ in #"{"op":"panic.revoke","stream":\#(value(stream)),"owner_token":\#(value(token)),"watch_token":\#(value(watch))}"# },
            { _ in #"{"op":"pin.update","id":\#(value(pin)),"edit_token":\#(value(token)),"changes":{"title":"t"}}"# },
            { _ in #"{"op":"pin.delete","id":\#(value(pin)),"edit_token":\#(value(token))}"# },
            { _ in #"{"op":"pin.vote","id":\#(value(pin)),"value":\#(pick(["1", "-1", "0", "\"up\""]))}"# },
            { _ in #"{"op":"subscribe","area":\#(pick([#"{"bbox":[0,0,1,1]}"#, #"{"bbox":[0,0]}"#, #"{"center":{"lat":1,"lon":1},"radius_m":-1}"#]))}"# },
            { _ in #"{"op":"unsubscribe"}"# },
            { _ in #"{"op":"panic.start","status":"amber","lat":1,"lon":1,"watchers":\#(pick(["1", "0", "99"]))}"# },
            { _ in #"{"op":"mystery"}"# },
        ]
        var expected = Set<Int>()
        for i in 0..<400 {
            let body = pick(ops)("")
            // Insert the ref as the first member.
            let request = "{\"ref\":\(i)," + body.dropFirst()
            client.send(request)
            expected.insert(i)
        }
        try h.run(until: {
            client.poll()
            return client.messages.filter { $0["ref"] != nil }.count >= expected.count
        })
        for _ in 0..<5 { try h.turn() }
        client.poll()
        let refs = client.messages.compactMap { $0["ref"]?.int }
        #expect(refs.count == expected.count, "every request answered once")
        #expect(Set(refs) == expected)
        #expect(client.messages.filter { $0["ref"] != nil }.allSatisfy { $0.type == "ok" || $0.type == "error" })
    }
}

/// A stream whose owner went silent for `panic.abandon_after_ms` is ended by the server itself.
@Suite struct AbandonedStreamGlueTests {
    final class RecordingLog: ChangeLog {
        var records: [JournalRecord] = []
        func append(_ record: JournalRecord) { records.append(record) }
        func refusalRetryAfterMs() -> Int64? { nil }
        func commitTurn() -> Bool { true }
    }

    @Test func aSilentStreamIsEndedAsAbandonedToldToItsWatchersAndJournaled() throws {
        let h = try ServerHarness { $0.panic.abandonAfterMs = 300 }
        let log = RecordingLog()
        h.v1.log = log
        let owner = try h.open()
        owner.send(#"{"op":"panic.start","ref":1,"status":"amber","lat":1,"lon":1,"watchers":1}"#)
        try h.read(owner, count: 1)
        let started = owner.messages.removeFirst()
        let stream = try #require(started["stream"]?.string)
        let watcher = try h.open()
        watcher.send(#"{"op":"panic.watch","ref":1,"stream":"\#(stream)","watch_token":"\#(try #require(started["watch_tokens"]?.array?.first?.string))"}"#)
        try h.read(watcher, count: 1)
        // The owner's phone says nothing more; the server's tick ends the stream (await the event).
        try h.run(maxTurns: 100, until: { watcher.poll(); return !watcher.all("panic.ended").isEmpty })
        let ended = try #require(watcher.all("panic.ended").first)
        #expect(ended["reason"]?.string == "abandoned" && ended["seq"]?.int == 2)
        let id = try #require(StreamID(stream))
        #expect(log.records.contains { record in
            if case .panicEvent(id, let event) = record, case .ended(.abandoned) = event.kind { return true }
            return false
        })
        // Its address's open-stream budget is free again.
        #expect(h.v1.budgets.openStreams(of: PeerAddress.localKey).isEmpty)
    }
}

/// The fan-out decides a map event's budget once (`SendPolicies.budget(_:totalQueued:growingBy:)`)
/// when the walk cannot change it: the answer must be the one each recipient would have got.
@Suite struct FanOutBudgetTests {
    @Test(arguments: [0, 1, 2, 3] as [Int])
    func theBudgetDecidedOnceIsTheOneEveryRecipientWouldGet(maxTotal: Int) {
        let total = [1_000, 10_000, 65_536, 1 << 20][maxTotal]
        let policies = SendPolicies(maxQueuedBytes: 8_192, maxTotalQueuedBytes: total, conflateAbove: 4_096, globalFloorBytes: 512)
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let queued = Int.random(in: 0...(total + 2_000), using: &rng)
            let recipients = Int.random(in: 0...50, using: &rng)
            let frame = Int.random(in: 1...400, using: &rng)
            let most = recipients * (frame + Connection.maxCloseFrameBytes)
            guard let once = policies.budget(.mapEvent, totalQueued: queued, growingBy: most) else {
                #expect(queued + most > total)
                continue
            }
            // Whatever the walk adds (at most `most`) or drops, each recipient would have seen `once`.
            var t = queued
            for _ in 0..<recipients {
                #expect(policies.budget(.mapEvent, totalQueued: t) == once)
                t += Int.random(in: 0...(frame + Connection.maxCloseFrameBytes), using: &rng)
                if Int.random(in: 0..<10, using: &rng) == 0 { t -= Int.random(in: 0...t, using: &rng) }  // a backlog dropped
            }
            #expect(policies.budget(.mapEvent, totalQueued: t) == once)
        }
    }

    /// `fanOutBudget`: exact when the budget can be decided once (then the budget at any total the
    /// walk can reach: it adds at most `most`, or drops a backlog), and otherwise never more than
    /// a recipient's budget, whatever the total is when it comes up (a send within `least` is
    /// queued without asking, so `least` may never exceed it).
    @Test(arguments: [0, 1, 2, 3] as [Int])
    func aFanOutBudgetIsExactOrAtMostEveryRecipientsBudget(maxTotal: Int) {
        let total = [1_000, 10_000, 65_536, 1 << 20][maxTotal]
        for (own, floor) in [(8_192, 512), (512, 8_192), (65_536, 65_536)] {
            let policies = SendPolicies(maxQueuedBytes: own, maxTotalQueuedBytes: total, conflateAbove: 4_096, globalFloorBytes: floor)
            var rng = SystemRandomNumberGenerator()
            for _ in 0..<1_000 {
                let queued = Int.random(in: 0...(total + 2_000), using: &rng)
                let most = Int.random(in: 0...20_000, using: &rng)
                let budget = policies.fanOutBudget(.mapEvent, totalQueued: queued, growingBy: most)
                #expect(budget.exact == (policies.budget(.mapEvent, totalQueued: queued, growingBy: most) != nil))
                if budget.exact {
                    for t in [0, queued, queued + most, Int.random(in: 0...(queued + most), using: &rng)] {
                        #expect(policies.budget(.mapEvent, totalQueued: t) == budget.least)
                    }
                } else {
                    for t in [0, queued, total, total + 1, queued + most, Int.random(in: 0...(2 * total + most), using: &rng)] {
                        #expect(budget.least <= policies.budget(.mapEvent, totalQueued: t))
                    }
                }
            }
        }
    }
}
