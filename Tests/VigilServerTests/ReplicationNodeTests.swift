import Glibc
import Testing
import VigilReplication
import VigilCore
import VigilState
@testable import VigilServer

/// A cluster node's `/v1` (`V1Application+Cluster`): two real servers (socketpair clients, turns
/// driven by hand) over an in-memory stream whose order and timing the test decides, so that the
/// races a real cluster meets now and then happen here every time: a write answered only once
/// the stream has it, pipelined writes on one pin, two nodes editing one pin at once, a publish
/// that fails, a writer gone before its answer.
@Suite struct ReplicationNodeTests {
    /// The stream both nodes publish to: records in the order they were published.
    final class MemoryStream {
        struct Stored {
            let messageID: String
            let base: UInt64?
            let record: JournalRecord
            var kept: KeptAnswer? = nil
        }
        var stored: [Stored] = []
        /// The next publish fails with `failure`: a definite refusal by default (given up at once);
        /// an ambiguous one (a timeout) is published again (`HeldWritePolicy`).
        var failNext = false
        var failure = JetStreamError.client(.outboundFull(limit: 1))
        /// Publishes of each message id (a re-publish sends the same id; stored once).
        var attempts: [String: Int] = [:]
        var presence: [[UInt8]] = []
    }

    final class MemoryLog: ReplicationLog {
        let settings: ReplicationSettings
        let stream: MemoryStream
        var writable = true
        let retryAfterMs: Int64 = 250
        private var next: UInt64 = 1
        /// How many of the stream's records this node has been handed.
        var delivered = 0
        var appliedSequence: UInt64 { UInt64(delivered) }

        init(node: String, stream: MemoryStream) {
            var s = ReplicationSettings()
            s.enabled = true
            s.name = "T"
            s.nodeID = node
            settings = s
            self.stream = stream
        }

        func nextMessageID() -> (id: String, number: UInt64) {
            defer { next += 1 }
            return ("\(settings.nodeID)-boot-\(next)", next)
        }

        func ownWriteNumber(_ messageID: String?) -> UInt64? {
            guard let messageID, messageID.hasPrefix("\(settings.nodeID)-boot-") else { return nil }
            return UInt64(messageID.dropFirst("\(settings.nodeID)-boot-".count))
        }

        func publish(_ record: JournalRecord, kept: KeptAnswer?, subject: String, messageID: String, base: UInt64?,
                     completion: @escaping (Result<UInt64, JetStreamError>) -> Void) {
            stream.attempts[messageID, default: 0] += 1
            if stream.failNext {
                stream.failNext = false
                return completion(.failure(stream.failure))
            }
            if let at = stream.stored.firstIndex(where: { $0.messageID == messageID }) {
                return completion(.success(UInt64(at + 1)))  // the duplicate window: acknowledged, not stored again
            }
            stream.stored.append(.init(messageID: messageID, base: base, record: record, kept: kept))
            completion(.success(UInt64(stream.stored.count)))
        }

        func publishPresence(_ payload: [UInt8]) { stream.presence.append(payload) }
        func health(into w: inout JSONWriter) {}
    }

    final class Node {
        let h: ServerHarness
        let log: MemoryLog
        init(_ name: String, _ stream: MemoryStream) throws {
            h = try ServerHarness()
            log = MemoryLog(node: name, stream: stream)
            h.v1.joined(ReplicationNode(log: log), highestVoter: 0)
        }

        /// Hands this node the stream's records it has not seen, in order, then runs a turn.
        func catchUp() throws {
            let replication = try #require(h.v1.replication)
            while log.delivered < log.stream.stored.count {
                let s = log.stream.stored[log.delivered]
                log.delivered += 1
                h.v1.applyFromStream(.init(sequence: UInt64(log.delivered), messageID: s.messageID, base: s.base, record: s.record,
                                           kept: s.kept),
                                     replication: replication)
            }
            h.server.loop.requestTurn()
            try h.turn()
        }
    }

    static let area = #"{"bbox":[52.0,13.0,53.0,14.0]}"#

    static func send(_ n: Node, _ c: TestClient, _ request: String) throws {
        c.send(request)
        try n.h.run(until: { c.poll(); return n.log.stream.stored.count > 0 || !c.messages.isEmpty })
    }

    /// `count` new clients of `n`, each subscribed to `area`, its reply read and set aside.
    static func subscribers(_ n: Node, _ count: Int) throws -> [TestClient] {
        try (0..<count).map { _ in
            let s = try n.h.open()
            s.send(#"{"op":"subscribe","ref":1,"area":\#(Self.area)}"#)
            try n.h.read(s, count: 1)
            s.messages.removeAll()
            return s
        }
    }

    /// Turns until `client` holds a reply (ok or error) beyond the first `after` messages.
    static func reply(_ n: Node, _ c: TestClient, after: Int = 0) throws -> TestClient.Message {
        try n.h.run(until: { c.poll(); return c.messages.dropFirst(after).contains { $0.type == "ok" || $0.type == "error" } })
        return try #require(c.messages.dropFirst(after).first { $0.type == "ok" || $0.type == "error" })
    }

    @Test func aWriteIsAnsweredAndShownOnlyOnceTheStreamHasIt() throws {
        let stream = MemoryStream()
        let a = try Node("a", stream), b = try Node("b", stream)
        let subA = try Self.subscribers(a, 1)[0], subB = try Self.subscribers(b, 1)[0]
        let writer = try a.h.open()
        writer.send(#"{"op":"pin.create","ref":2,"pin":{"lat":52.5,"lon":13.4,"title":"t"}}"#)
        try a.h.run(until: { stream.stored.count == 1 })
        // published, not yet back from the stream: nobody hears of it, not even the writer
        for _ in 0..<3 { try a.h.turn() }
        writer.poll(); subA.poll()
        #expect(writer.messages.isEmpty && subA.messages.isEmpty)
        try a.catchUp()
        let ok = try Self.reply(a, writer)
        #expect(ok.type == "ok" && ok["ref"]?.int == 2)
        try a.h.read(subA, count: 1)
        #expect(subA.messages[0].type == "pin.added")
        // node B hears of it when its consumer reaches it
        try b.catchUp()
        try b.h.read(subB, count: 1)
        #expect(subB.messages[0].type == "pin.added")
        #expect(subB.messages[0]["pin"]?.object?["id"] == subA.messages[0]["pin"]?.object?["id"])
    }

    /// Idempotency keys on a cluster: the answer travels with the record; a repeat on the writing
    /// node while the write is in flight waits for its answer; a repeat on another node is
    /// answered from the answer it applied; nothing is published twice.
    @Test func aRepeatIsAnsweredOnAnyNodeAndPublishedOnce() throws {
        let stream = MemoryStream()
        let a = try Node("a", stream), b = try Node("b", stream)
        let create = #""op":"pin.create","idem":"k3y-of-22-characters__","pin":{"lat":52.5,"lon":13.4,"title":"t"}"#
        let writer = try a.h.open(), again = try a.h.open()
        writer.send("{\(create),\"ref\":1}")
        try a.h.run(until: { stream.stored.count == 1 })
        #expect(stream.stored[0].kept != nil, "the sealed answer travels with the record")
        // In flight: a resend on another connection of the same node waits, publishes nothing.
        again.send("{\(create),\"ref\":2}")
        for _ in 0..<3 { try a.h.turn() }
        again.poll()
        #expect(again.messages.isEmpty && stream.stored.count == 1)
        try a.catchUp()
        let first = try Self.reply(a, writer), waited = try Self.reply(a, again)
        #expect(first.type == "ok" && first["repeat"] == nil)
        #expect(waited.type == "ok" && waited["repeat"] == .bool(true) && waited["ref"]?.int == 2)
        #expect(waited["pin"] == first["pin"] && waited["edit_token"] == first["edit_token"])
        // Node B applied the record with its answer: a resend there is a repeat too.
        try b.catchUp()
        let onB = try b.h.open()
        onB.send("{\(create),\"ref\":3}")
        let repeated = try Self.reply(b, onB)
        #expect(repeated["repeat"] == .bool(true) && repeated["pin"] == first["pin"] && repeated["edit_token"] == first["edit_token"])
        onB.send(#"{"op":"pin.create","ref":4,"idem":"k3y-of-22-characters__","pin":{"lat":52.5,"lon":13.4,"title":"other"}}"#)
        let conflict = try Self.reply(b, onB, after: 1)
        #expect(conflict["code"]?.string == "idem_conflict")
        for _ in 0..<3 { try b.h.turn() }
        #expect(stream.stored.count == 1, "applied once in the whole cluster")
    }

    /// A stream message is one change, optionally followed by its kept answer; nothing else.
    @Test func aStreamMessageIsOneChangeAndAtMostItsAnswer() {
        let pin = JournalRecord.pinRemove(PinID(high: 1, low: 2))
        let answer = KeptAnswer(lookup: [UInt8](repeating: 1, count: 32), requestDigest: [UInt8](repeating: 2, count: 32),
                                createdAt: 3, sealed: [UInt8](repeating: 4, count: 30))
        #expect(ReplicatedLog.change([pin])?.0 == pin && ReplicatedLog.change([pin])?.1 == nil)
        #expect(ReplicatedLog.change([pin, .answerKept(answer)])?.1 == answer)
        #expect(ReplicatedLog.change([.answerKept(answer)]) == nil)
        #expect(ReplicatedLog.change([.answerKept(answer), pin]) == nil)
        #expect(ReplicatedLog.change([pin, pin]) == nil)
        #expect(ReplicatedLog.change([.answerKept(answer), .answerKept(answer)]) == nil)
        #expect(ReplicatedLog.change([]) == nil)
    }

    /// A write with a key that the stream does not take keeps no answer: a resend is a new write.
    @Test func aWriteTheStreamDidNotTakeKeepsNoAnswer() throws {
        let stream = MemoryStream()
        let a = try Node("a", stream)
        let writer = try a.h.open(), again = try a.h.open()
        stream.failNext = true
        let create = #""op":"pin.create","idem":"another-key-of-22-chars","pin":{"lat":52.5,"lon":13.4,"title":"t"}"#
        writer.send("{\(create),\"ref\":1}")
        let refused = try Self.reply(a, writer)
        #expect(refused["code"]?.string == "unavailable")
        // Not kept: the resend is a new write, published and answered as one.
        again.send("{\(create),\"ref\":2}")
        try a.h.run(until: { stream.stored.count == 1 })
        try a.catchUp()
        let ok = try Self.reply(a, again)
        #expect(ok.type == "ok" && ok["repeat"] == nil)
    }

    @Test func pipelinedEditsOfOnePinAreAllConfirmed() throws {
        let stream = MemoryStream()
        let a = try Node("a", stream), b = try Node("b", stream)
        let writer = try a.h.open()
        writer.send(#"{"op":"pin.create","ref":1,"pin":{"lat":52.5,"lon":13.4,"title":"t"}}"#)
        try a.h.run(until: { stream.stored.count == 1 })
        try a.catchUp()
        let created = try Self.reply(a, writer)
        let id = try #require(created["pin"]?.object?["id"]?.string), token = try #require(created["edit_token"]?.string)
        let before = writer.messages.count
        for i in 0..<10 {
            writer.send(#"{"op":"pin.update","ref":\#(10 + i),"id":"\#(id)","edit_token":"\#(token)","changes":{"title":"v\#(i)"}}"#)
        }
        try a.h.run(until: { stream.stored.count == 11 })
        try a.catchUp()
        try a.h.run(until: { writer.poll(); return writer.messages.count >= before + 10 })
        let replies = writer.messages.dropFirst(before)
        #expect(replies.map { $0.type } == Array(repeating: "ok", count: 10))
        #expect(replies.last?["pin"]?.object?["title"]?.string == "v9")
        try b.catchUp()
        #expect(b.h.v1.hub.store.exportPins() == a.h.v1.hub.store.exportPins())
    }

    @Test func twoNodesEditingOnePinAtOnceConvergeAndTheLoserIsTold() throws {
        let stream = MemoryStream()
        let a = try Node("a", stream), b = try Node("b", stream)
        let wa = try a.h.open(), wb = try b.h.open()
        wa.send(#"{"op":"pin.create","ref":1,"pin":{"lat":52.5,"lon":13.4,"title":"t"}}"#)
        try a.h.run(until: { stream.stored.count == 1 })
        try a.catchUp()
        try b.catchUp()
        let created = try Self.reply(a, wa)
        let id = try #require(created["pin"]?.object?["id"]?.string), token = try #require(created["edit_token"]?.string)
        let na = wa.messages.count, nb = wb.messages.count
        // both validated against the same pin, before either saw the other's edit
        wa.send(#"{"op":"pin.update","ref":2,"id":"\#(id)","edit_token":"\#(token)","changes":{"title":"from a"}}"#)
        try a.h.run(until: { stream.stored.count == 2 })
        wb.send(#"{"op":"pin.update","ref":3,"id":"\#(id)","edit_token":"\#(token)","changes":{"title":"from b"}}"#)
        try b.h.run(until: { stream.stored.count == 3 })
        try b.catchUp()  // B first sees A's edit: its own speculative edit is taken back
        try a.catchUp()
        let ra = try Self.reply(a, wa, after: na), rb = try Self.reply(b, wb, after: nb)
        #expect(ra.type == "ok")
        #expect(rb.type == "error" && rb["code"]?.string == "conflict")
        #expect(a.h.v1.hub.store.exportPins() == b.h.v1.hub.store.exportPins())
        #expect(a.h.v1.hub.store.exportPins().first?.title == "from a")
        #expect(b.h.v1.replication?.speculative.isEmpty == true && a.h.v1.replication?.speculative.isEmpty == true)
    }

    @Test func aFailedPublishIsTakenBackUnseenAndAnsweredUnavailable() throws {
        let stream = MemoryStream()
        let a = try Node("a", stream)
        let sub = try a.h.open()
        sub.send(#"{"op":"subscribe","ref":1,"area":\#(Self.area)}"#)
        try a.h.read(sub, count: 1)
        let writer = try a.h.open()
        stream.failNext = true
        writer.send(#"{"op":"pin.create","ref":2,"pin":{"lat":52.5,"lon":13.4,"title":"t"}}"#)
        let r = try Self.reply(a, writer)
        #expect(r.type == "error" && r["code"]?.string == "unavailable" && (r["retry_after_ms"]?.int ?? 0) > 0)
        #expect(a.h.v1.hub.store.count == 0)
        #expect(a.h.v1.replication?.speculative.isEmpty == true)
        for _ in 0..<3 { try a.h.turn() }
        sub.poll()
        #expect(sub.messages.count == 1)  // the subscribe's reply, no event
    }

    @Test func aNodeThatIsNotWritableRefusesWritesAndServesReads() throws {
        let stream = MemoryStream()
        let a = try Node("a", stream)
        a.log.writable = false
        let c = try a.h.open()
        c.send(#"{"op":"pin.create","ref":1,"pin":{"lat":52.5,"lon":13.4,"title":"t"}}"#)
        let r = try Self.reply(a, c)
        #expect(r["code"]?.string == "unavailable" && r["retry_after_ms"]?.int == 250)
        c.send(#"{"op":"subscribe","ref":2,"area":\#(Self.area)}"#)
        #expect(try Self.reply(a, c, after: 1).type == "ok")
        #expect(stream.stored.isEmpty)
    }

    @Test func aWriterGoneBeforeItsAnswerLeavesItsChangeAndNoStrayReply() throws {
        let stream = MemoryStream()
        let a = try Node("a", stream)
        let writer = try a.h.open()
        writer.send(#"{"op":"pin.create","ref":1,"pin":{"lat":52.5,"lon":13.4,"title":"t"}}"#)
        try a.h.run(until: { stream.stored.count == 1 })
        writer.close()
        try a.h.run(until: { a.h.server.connectionCount == 0 })
        // a new connection, likely on the same fd, must not get the old writer's reply
        let newcomer = try a.h.open()
        try a.catchUp()
        for _ in 0..<3 { try a.h.turn() }
        newcomer.poll()
        #expect(newcomer.messages.isEmpty)
        #expect(a.h.v1.hub.store.count == 1)  // the write itself stands: the stream has it
    }

    @Test func aSubscriberThatMovedBeforeTheConfirmationGetsNoStaleEvent() throws {
        let stream = MemoryStream()
        let a = try Node("a", stream)
        let subscribed = try Self.subscribers(a, 3)
        let stays = subscribed[0], leaves = subscribed[1], moves = subscribed[2]
        let writer = try a.h.open()
        writer.send(#"{"op":"pin.create","ref":2,"pin":{"lat":52.5,"lon":13.4,"title":"t"}}"#)
        try a.h.run(until: { stream.stored.count == 1 })
        // before the stream hands it back: one unsubscribes, one subscribes again (its reply
        // shows the pin: the write is in place since it was made)
        leaves.send(#"{"op":"unsubscribe","ref":3}"#)
        moves.send(#"{"op":"subscribe","ref":4,"area":\#(Self.area)}"#)
        let leftReply = try Self.reply(a, leaves), moved = try Self.reply(a, moves)
        #expect(leftReply.type == "ok")
        #expect(moved["pins"]?.array?.count == 1)
        try a.catchUp()
        _ = try Self.reply(a, writer)
        try a.h.read(stays, count: 1)
        #expect(stays.messages.first?.type == "pin.added")
        for _ in 0..<3 { try a.h.turn() }
        leaves.poll(); moves.poll()
        #expect(leaves.messages.count == 1 && moves.messages.count == 1)  // their replies only
    }

    @Test func onlyTheConnectionThatChangedSinceAWriteLosesItsHeldEvent() throws {
        let stream = MemoryStream()
        let a = try Node("a", stream)
        let replication = try #require(a.h.v1.replication)
        let subscribed = try Self.subscribers(a, 2)
        let stays = subscribed[0], moves = subscribed[1]
        let writer = try a.h.open()
        writer.send(#"{"op":"pin.create","ref":2,"pin":{"lat":52.5,"lon":13.4,"title":"first"}}"#)
        try a.h.run(until: { stream.stored.count == 1 })
        // between the two writes one subscriber subscribes again: its reply shows the first pin
        moves.send(#"{"op":"subscribe","ref":3,"area":\#(Self.area)}"#)
        #expect(try Self.reply(a, moves)["pins"]?.array?.count == 1)
        #expect(replication.speculative.changedConnectionCount == 1)  // only the one that changed is remembered
        writer.send(#"{"op":"pin.create","ref":4,"pin":{"lat":52.6,"lon":13.5,"title":"second"}}"#)
        try a.h.run(until: { stream.stored.count == 2 })
        try a.catchUp()
        try a.h.run(until: { writer.poll(); return writer.all("ok").count == 2 })
        try a.h.read(stays, count: 2)
        #expect(stays.messages.map { $0.type } == ["pin.added", "pin.added"])
        #expect(stays.messages.map { $0["pin"]?.object?["title"]?.string } == ["first", "second"])
        // the second write was made after it changed: that event is for it
        try a.h.read(moves, count: 2)
        #expect(moves.messages.dropFirst().map { $0.type } == ["pin.added"])
        #expect(moves.messages.last?["pin"]?.object?["title"]?.string == "second")
        for _ in 0..<3 { try a.h.turn() }
        moves.poll()
        #expect(moves.messages.count == 2)  // its reply and the second pin, not the first again
        // nothing pending: nothing remembered, and the lists of the confirmed writes kept
        #expect(replication.speculative.isEmpty && (replication.speculative.changedConnectionCount == 0))
        #expect(replication.speculative.spareDeliveryCount > 0)
    }

    final class Clock { var ms: Int64 = 1_000_000 }

    /// One node whose held writes are timed on a clock the test moves.
    static func nodeOnAClock() throws -> (MemoryStream, Node, ReplicationNode, Clock) {
        let stream = MemoryStream()
        let a = try Node("a", stream)
        let replication = try #require(a.h.v1.replication)
        let clock = Clock()
        replication.clock = { clock.ms }
        return (stream, a, replication, clock)
    }

    @Test func anUnansweredPublishIsSentAgainWithTheSameIDAndConfirmedOnce() throws {
        let (stream, a, replication, clock) = try Self.nodeOnAClock()
        stream.failure = .client(.timedOut)
        stream.failNext = true
        let writer = try a.h.open()
        writer.send(#"{"op":"pin.create","ref":3,"pin":{"lat":52.5,"lon":13.4,"title":"t"}}"#)
        try a.h.run(until: { stream.attempts.count == 1 })
        for _ in 0..<3 { try a.h.turn() }
        writer.poll()
        // Not given up: held, no answer, nothing stored yet, a copy due.
        #expect(writer.messages.isEmpty && replication.speculative.pendingCount == 1 && stream.stored.isEmpty)
        #expect(replication.speculative.numbers.first.flatMap(replication.speculative.republishAt) != nil)
        clock.ms += Int64(replication.log.settings.ackTimeoutMs)
        a.h.v1.replicationTick(replication)
        #expect(stream.stored.count == 1 && stream.attempts.values.first == 2)
        // A third copy (as after a lost ack) is acknowledged as the first: stored once.
        let id = stream.stored[0].messageID
        a.log.publish(stream.stored[0].record, kept: nil, subject: "T.pins._", messageID: id, base: nil) { _ in }
        #expect(stream.stored.count == 1)
        try a.catchUp()
        let r = try Self.reply(a, writer)
        #expect(r.type == "ok" && r["ref"]?.int == 3)
        #expect(replication.speculative.isEmpty && replication.speculative.counts.confirmed == 1 && a.h.v1.hub.store.count == 1)
    }

    @Test func aWriteTheStreamNeverHandsBackIsGivenUpAtTheWriteDeadline() throws {
        let (stream, a, replication, clock) = try Self.nodeOnAClock()
        let sub = try Self.subscribers(a, 1)[0]
        let writer = try a.h.open()
        writer.send(#"{"op":"pin.create","ref":2,"pin":{"lat":52.5,"lon":13.4,"title":"t"}}"#)
        try a.h.run(until: { stream.stored.count == 1 })
        #expect(a.h.v1.hub.store.count == 1)  // speculatively in place, held
        clock.ms += replication.answerWithinMs
        a.h.v1.replicationTick(replication)
        for _ in 0..<3 { try a.h.turn() }
        writer.poll()
        #expect(writer.messages.isEmpty && replication.speculative.pendingCount == 1)  // not yet: exactly the limit
        clock.ms += 1
        a.h.v1.replicationTick(replication)
        let r = try Self.reply(a, writer)
        #expect(r.type == "error" && r["code"]?.string == "unavailable" && r["ref"]?.int == 2 && r["retry_after_ms"]?.int == 250)
        #expect(a.h.v1.hub.store.count == 0)  // taken back
        #expect(replication.speculative.isEmpty && replication.speculative.counts.takenBack == 1)
        for _ in 0..<3 { try a.h.turn() }
        sub.poll()
        #expect(sub.messages.isEmpty)  // nothing was shown
        // the stream had it after all: applied like anyone else's, with no second reply
        try a.catchUp()
        try a.h.read(sub, count: 1)
        #expect(sub.messages[0].type == "pin.added" && a.h.v1.hub.store.count == 1)
        writer.poll()
        #expect(writer.messages.count == 1)
    }
}
