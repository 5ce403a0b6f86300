import Foundation
import Glibc
import Testing
import VigilCore
import VigilLoop
import VigilState
@testable import VigilServer

/// Issue 12, "Disk full and I/O errors": a change the journal could not record is never
/// acknowledged, never shown to anyone, and taken back in memory; while the state cannot be
/// written, changes are refused before they are made and reads and live events go on.
@Suite struct UnrecordedChangesTests {
    static let area = #"{"bbox":[52.0,13.0,53.0,14.0]}"#
    static let pin = #"{"lat":52.5,"lon":13.4,"title":"t"}"#

    /// A change log whose next commit fails when told to, and which refuses while `outage` is set.
    final class FailingLog: ChangeLog {
        var records: [JournalRecord] = []
        private var turn: [JournalRecord] = []
        var failNextCommit = false
        var outage: Int64?
        func refusalRetryAfterMs() -> Int64? { outage }
        func append(_ record: JournalRecord) { turn.append(record) }
        func commitTurn() -> Bool {
            defer { turn.removeAll() }
            if failNextCommit && !turn.isEmpty {
                failNextCommit = false
                return false
            }
            records += turn
            return true
        }
    }

    struct Setup {
        let h: ServerHarness
        let log = FailingLog()
        init(_ configure: (inout ServerConfig) -> Void = { _ in }) throws {
            h = try ServerHarness(configure)
            h.v1.log = log
        }
    }

    /// Sends `request` and returns the reply to it (the next message of type ok or error).
    static func ask(_ h: ServerHarness, _ client: TestClient, _ request: String) throws -> TestClient.Message {
        let before = client.messages.count
        client.send(request)
        try h.run(until: { client.poll(); return client.messages.dropFirst(before).contains { $0.type == "ok" || $0.type == "error" } })
        return try #require(client.messages.dropFirst(before).first { $0.type == "ok" || $0.type == "error" })
    }

    static func expectUnavailable(_ reply: TestClient.Message) {
        #expect(reply.type == "error")
        #expect(reply["code"]?.string == "unavailable")
        #expect((reply["retry_after_ms"]?.int ?? 0) > 0)
    }

    @Test func aPinCreateTheJournalCouldNotRecordIsRefusedUnseenAndGone() throws {
        let s = try Setup()
        let subscriber = try s.h.open()
        let writer = try s.h.open()
        #expect(try Self.ask(s.h, subscriber, #"{"op":"subscribe","ref":1,"area":\#(Self.area)}"#).type == "ok")
        s.log.failNextCommit = true
        Self.expectUnavailable(try Self.ask(s.h, writer, #"{"op":"pin.create","ref":2,"pin":\#(Self.pin)}"#))
        #expect(s.h.v1.hub.store.count == 0)
        #expect(s.h.v1.stats.refusedUnrecorded == 1)
        // The next create is recorded: the subscriber's first event is that pin, not the refused one.
        let created = try Self.ask(s.h, writer, #"{"op":"pin.create","ref":3,"pin":\#(Self.pin)}"#)
        #expect(created.type == "ok")
        try s.h.run(until: { subscriber.poll(); return !subscriber.all("pin.added").isEmpty })
        #expect(subscriber.all("pin.added").count == 1)
        #expect(subscriber.all("pin.added").first?["pin"]?.object?["id"]?.string == created["pin"]?.object?["id"]?.string)
        #expect(s.h.v1.hub.store.count == 1)
        #expect(s.log.records.count == 1)
    }

    /// A write with an idempotency key and its repeat in the same turn: the repeat is answered
    /// from the answer kept in that turn, so when the journal fails the turn both are withdrawn
    /// (`unavailable`), the answer is forgotten, and the key is free for the resend.
    @Test func aRepeatInTheTurnOfAnUnrecordedWriteIsWithdrawnWithIt() throws {
        let s = try Setup()
        let writer = try s.h.open()
        s.log.failNextCommit = true
        let create = #"{"op":"pin.create","idem":"k3y-of-22-characters__","pin":\#(Self.pin)"#
        // One write of two frames: read in one turn.
        writer.write(writer.frame(.text, Array((create + #","ref":1}"#).utf8)) + writer.frame(.text, Array((create + #","ref":2}"#).utf8)))
        try s.h.run(until: { writer.poll(); return writer.messages.filter { $0.type == "ok" || $0.type == "error" }.count == 2 })
        for reply in writer.messages.filter({ $0.type == "ok" || $0.type == "error" }) { Self.expectUnavailable(reply) }
        #expect(s.h.v1.hub.store.count == 0 && s.h.v1.kept.count == 0)
        // Sent again: applied now, and its answer journaled after its change.
        let created = try Self.ask(s.h, writer, create + #","ref":3}"#)
        #expect(created.type == "ok" && created["repeat"] == nil)
        let repeated = try Self.ask(s.h, writer, create + #","ref":4}"#)
        #expect(repeated["repeat"] == .bool(true) && repeated["pin"] == created["pin"])
        #expect(s.h.v1.hub.store.count == 1)
        guard s.log.records.count == 2, case .pinPut = s.log.records[0], case .answerKept = s.log.records[1] else {
            Issue.record("expected the pin, then its kept answer: \(s.log.records)")
            return
        }
    }

    @Test func pinUpdatesDeletesAndVotesTheJournalCouldNotRecordAreTakenBack() throws {
        let s = try Setup()
        let writer = try s.h.open()
        let created = try Self.ask(s.h, writer, #"{"op":"pin.create","ref":1,"pin":\#(Self.pin)}"#)
        let id = try #require(created["pin"]?.object?["id"]?.string)
        let token = try #require(created["edit_token"]?.string)
        let pinID = try #require(PinID(id))
        let original = try #require(s.h.v1.hub.store[pinID])
        for request in [
            #"{"op":"pin.update","ref":2,"id":"\#(id)","edit_token":"\#(token)","changes":{"title":"moved","lat":52.9}}"#,
            #"{"op":"pin.vote","ref":3,"id":"\#(id)","value":-1}"#,
            #"{"op":"pin.delete","ref":4,"id":"\#(id)","edit_token":"\#(token)"}"#,
        ] {
            s.log.failNextCommit = true
            Self.expectUnavailable(try Self.ask(s.h, writer, request))
            #expect(s.h.v1.hub.store[pinID] == original, "after \(request)")
        }
        // The pin is found where it was: the spatial index was put back too.
        let subscriber = try s.h.open()
        let listed = try Self.ask(s.h, subscriber, #"{"op":"subscribe","ref":5,"area":{"bbox":[52.4,13.3,52.6,13.5]}}"#)
        #expect(listed["pins"]?.array?.count == 1)
    }

    /// A panic update, status or end the journal could not record: the owner is refused, the
    /// watcher hears nothing, and the next recorded update takes the seq the refused one had.
    @Test func aStreamChangeTheJournalCouldNotRecordNeverReachesTheWatcher() throws {
        let s = try Setup()
        let owner = try s.h.open()
        let started = try Self.ask(s.h, owner, #"{"op":"panic.start","ref":1,"status":"red","lat":52.5,"lon":13.4,"watchers":2}"#)
        let stream = try #require(started["stream"]?.string)
        let tokens = (started["watch_tokens"]?.array ?? []).compactMap(\.string)
        let watcher = try s.h.open()
        #expect(try Self.ask(s.h, watcher, #"{"op":"panic.watch","ref":1,"stream":"\#(stream)","watch_token":"\#(tokens[0])"}"#).type == "ok")
        let id = try #require(StreamID(stream))
        let before = try #require(s.h.v1.panic.stream(id))
        for request in [
            #"{"op":"panic.update","ref":2,"stream":"\#(stream)","lat":52.6,"lon":13.5}"#,
            #"{"op":"panic.status","ref":3,"stream":"\#(stream)","status":"amber"}"#,
            #"{"op":"panic.end","ref":4,"stream":"\#(stream)","reason":"safe"}"#,
            #"{"op":"panic.revoke","ref":5,"stream":"\#(stream)","watch_token":"\#(tokens[0])"}"#,
        ] {
            s.log.failNextCommit = true
            Self.expectUnavailable(try Self.ask(s.h, owner, request))
            let now = try #require(s.h.v1.panic.stream(id))
            #expect(now.seq == before.seq && now.status == before.status && now.isActive, "after \(request)")
            #expect(s.h.v1.panic.watcherCount(id) == 1, "after \(request)")
        }
        let recorded = try Self.ask(s.h, owner, #"{"op":"panic.update","ref":6,"stream":"\#(stream)","lat":52.7,"lon":13.6}"#)
        #expect(recorded["seq"]?.int == 2)
        try s.h.run(until: { watcher.poll(); return !watcher.all("panic.location").isEmpty })
        for _ in 0..<3 { try s.h.turn() }
        watcher.poll()
        // One ok (the watch), then exactly the recorded location: no refused event, no revocation.
        #expect(watcher.messages.compactMap(\.type).filter { $0.hasPrefix("panic.") && $0 != "panic.watchers" } == ["panic.location"])
        #expect(watcher.all("panic.location").first?["seq"]?.int == 2)
    }

    /// A safety timer moved or cancelled, which the journal could not record, is taken back: the
    /// stream keeps the deadline it had, and nothing is journaled.
    @Test func aTimerChangeTheJournalCouldNotRecordKeepsTheOldDeadline() throws {
        let s = try Setup()
        let owner = try s.h.open()
        let started = try Self.ask(s.h, owner, #"{"op":"panic.start","ref":1,"status":"amber","lat":52.5,"lon":13.4,"due_in_s":600}"#)
        let stream = try #require(started["stream"]?.string)
        let due = try #require(started["due_at"]?.int)
        let id = try #require(StreamID(stream))
        for request in [
            #"{"op":"panic.timer","ref":2,"stream":"\#(stream)","due_in_s":60}"#,
            #"{"op":"panic.timer","ref":3,"stream":"\#(stream)","cancel":true}"#,
        ] {
            s.log.failNextCommit = true
            Self.expectUnavailable(try Self.ask(s.h, owner, request))
            let now = try #require(s.h.v1.panic.stream(id))
            #expect(now.dueAt == Int64(due) && now.seq == 1, "after \(request)")
        }
        let moved = try Self.ask(s.h, owner, #"{"op":"panic.timer","ref":4,"stream":"\#(stream)","due_in_s":60}"#)
        #expect(moved["seq"]?.int == 2 && s.log.records.count == 2)
    }

    /// The history is a ring: an update taken back when it is full puts the event it overwrote
    /// back, so a watcher catching up with `since` gets exactly the recorded events.
    @Test(arguments: [1, 2, 3])
    func anUpdateTakenBackLeavesTheHistoryRingAsItWas(recordedUpdates: Int) throws {
        let s = try Setup { $0.panic.historyEvents = 2 }
        let owner = try s.h.open()
        let started = try Self.ask(s.h, owner, #"{"op":"panic.start","ref":1,"status":"red","lat":52.5,"lon":13.4,"watchers":1}"#)
        let stream = try #require(started["stream"]?.string)
        let id = try #require(StreamID(stream))
        for i in 0..<recordedUpdates {
            #expect(try Self.ask(s.h, owner, #"{"op":"panic.update","ref":2,"stream":"\#(stream)","lat":52.6,"lon":13.\#(i + 1)}"#).type == "ok")
        }
        let before = try #require(s.h.v1.panic.stream(id)).history.all
        s.log.failNextCommit = true
        Self.expectUnavailable(try Self.ask(s.h, owner, #"{"op":"panic.update","ref":3,"stream":"\#(stream)","lat":52.9,"lon":13.9}"#))
        #expect(try #require(s.h.v1.panic.stream(id)).history.all == before)
        #expect(try Self.ask(s.h, owner, #"{"op":"panic.update","ref":4,"stream":"\#(stream)","lat":52.7,"lon":13.7}"#)["seq"]?.int == recordedUpdates + 2)
        #expect(try #require(s.h.v1.panic.stream(id)).history.all.map(\.seq) == [UInt64(recordedUpdates + 1), UInt64(recordedUpdates + 2)])
    }

    @Test func aStreamStartTheJournalCouldNotRecordLeavesNothingBehind() throws {
        let s = try Setup()
        let owner = try s.h.open()
        s.log.failNextCommit = true
        Self.expectUnavailable(try Self.ask(s.h, owner, #"{"op":"panic.start","ref":1,"status":"red","lat":52.5,"lon":13.4,"watchers":1}"#))
        #expect(s.h.v1.panic.count == 0)
        #expect(s.h.v1.budgets.openStreams(of: PeerAddress.localKey).isEmpty)
    }

    /// While the state cannot be written, every change is refused before it is made, and reads
    /// (subscribe, watch) go on.
    @Test func duringAnOutageChangesAreRefusedAndReadsGoOn() throws {
        let s = try Setup()
        let owner = try s.h.open()
        let started = try Self.ask(s.h, owner, #"{"op":"panic.start","ref":1,"status":"red","lat":52.5,"lon":13.4,"watchers":1}"#)
        let stream = try #require(started["stream"]?.string)
        let token = try #require(started["watch_tokens"]?.array?.first?.string)
        s.log.outage = 1_500
        for request in [
            #"{"op":"pin.create","ref":2,"pin":\#(Self.pin)}"#,
            #"{"op":"panic.update","ref":3,"stream":"\#(stream)","lat":52.6,"lon":13.5}"#,
            #"{"op":"panic.invite","ref":4,"stream":"\#(stream)"}"#,
        ] {
            let reply = try Self.ask(s.h, owner, request)
            Self.expectUnavailable(reply)
            #expect(reply["retry_after_ms"]?.int == 1_500)
        }
        #expect(s.h.v1.hub.store.count == 0)
        #expect(s.h.v1.panic.stream(try #require(StreamID(stream)))?.seq == 1)
        let reader = try s.h.open()
        #expect(try Self.ask(s.h, reader, #"{"op":"subscribe","ref":5,"area":\#(Self.area)}"#).type == "ok")
        #expect(try Self.ask(s.h, reader, #"{"op":"panic.watch","ref":6,"stream":"\#(stream)","watch_token":"\#(token)"}"#).type == "ok")
        #expect(s.h.v1.stats.refusedUnrecorded == 3)
        #expect(s.h.v1.stateMode == .memoryOnly || s.h.v1.stateMode == .writable)  // a fake log: no Persistence
    }

    /// A subscribe in the same turn as a change that was then not recorded may list it: its reply
    /// is withdrawn too (the client retries), and the subscription holds no trace of the pin.
    @Test func aReadInTheTurnOfAnUnrecordedChangeIsWithdrawnWithIt() throws {
        let s = try Setup()
        let writer = try s.h.open()
        let reader = try s.h.open()
        // Both written before the turn that reads them (in the order the loop finds them).
        s.log.failNextCommit = true
        writer.send(#"{"op":"pin.create","ref":2,"pin":\#(Self.pin)}"#)
        reader.send(#"{"op":"subscribe","ref":3,"area":\#(Self.area)}"#)
        try s.h.run(until: { reader.poll(); writer.poll(); return !reader.messages.isEmpty && !writer.messages.isEmpty })
        let subscribeReply = try #require(reader.messages.first)
        if subscribeReply.type == "ok" {
            // The two requests fell in different turns: the subscribe saw no pin.
            #expect(subscribeReply["pins"]?.array?.isEmpty == true)
        } else {
            Self.expectUnavailable(subscribeReply)
        }
        #expect(s.h.v1.hub.store.count == 0)
    }
}

/// The real journal failing: its file descriptor is pointed at /dev/full (every write ENOSPC),
/// as a full disk would fail it. The daemon keeps serving, refuses changes, counts and reports
/// the outage, and records again once a retry writes a new segment and a snapshot.
@Suite struct JournalOutageTests {
    /// How the journal fails: every write with ENOSPC (/dev/full), or writes taken and the fsync
    /// refused (a pipe: fdatasync is EINVAL there, as an I/O error would refuse it).
    enum Failure: String, CaseIterable {
        case noSpace = "no_space"
        case syncRefused = "other"

        /// A descriptor that fails this way (the caller closes it), and a pipe's read end to keep open.
        func open() throws -> (failing: Int32, reader: Int32?) {
            switch self {
            case .noSpace:
                let fd = Glibc.open("/dev/full", O_WRONLY)
                try #require(fd >= 0)
                return (fd, nil)
            case .syncRefused:
                var ends: [Int32] = [0, 0]
                try #require(pipe(&ends) == 0)  // the journal's few bytes fit its buffer
                return (ends[1], ends[0])
            }
        }
    }

    /// Points every descriptor of this process open on the file at `path` (found by device and
    /// inode, whatever the path's spelling) at `failing`.
    static func redirect(_ path: String, to failing: Int32) throws {
        var file = stat()
        try #require(stat(path, &file) == 0)
        var replaced = 0
        for entry in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            var open = stat()
            guard let fd = Int32(entry), fd != failing, fstat(fd, &open) == 0,
                  open.st_dev == file.st_dev, open.st_ino == file.st_ino else { continue }
            try #require(dup2(failing, fd) == fd)
            replaced += 1
        }
        try #require(replaced == 1)
    }

    /// `sample` is "name{labels} value"; the exposition may write the value as an integer or a double.
    static func expectMetric(_ exposition: String, _ sample: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let (key, value) = split(Substring(sample))
        let found = exposition.split(separator: "\n").first { split($0).key == key }.map { split($0).value }
        #expect(found == value, "\(key)", sourceLocation: sourceLocation)
    }

    private static func split(_ line: Substring) -> (key: Substring, value: Double?) {
        guard let space = line.lastIndex(of: " ") else { return (line, nil) }
        return (line[..<space], Double(line[line.index(after: space)...]))
    }

    @Test(arguments: Failure.allCases)
    func aFailingJournalMakesTheStateUnavailableUntilARetrySucceeds(failure: Failure) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("vigil-outage-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let h = try ServerHarness {
            $0.stateDirectory = directory
            $0.fsyncPolicy = "always"
        }
        let client = try h.open()
        let kept = try UnrecordedChangesTests.ask(h, client, #"{"op":"pin.create","ref":1,"pin":\#(UnrecordedChangesTests.pin)}"#)
        #expect(kept.type == "ok")
        let journal = try #require(try FileManager.default.contentsOfDirectory(atPath: directory).first { $0.hasPrefix("journal-") })
        let (failing, reader) = try failure.open()
        defer { if let reader { close(reader) } }
        try Self.redirect(directory + "/" + journal, to: failing)
        close(failing)

        UnrecordedChangesTests.expectUnavailable(try UnrecordedChangesTests.ask(h, client, #"{"op":"pin.create","ref":2,"pin":\#(UnrecordedChangesTests.pin)}"#))
        #expect(h.v1.stateMode == .unavailable)
        #expect(h.v1.hub.store.count == 1)
        // Refused up front now, and reads go on.
        UnrecordedChangesTests.expectUnavailable(try UnrecordedChangesTests.ask(h, client, #"{"op":"pin.create","ref":3,"pin":\#(UnrecordedChangesTests.pin)}"#))
        #expect(try UnrecordedChangesTests.ask(h, client, #"{"op":"subscribe","ref":4,"area":\#(UnrecordedChangesTests.area)}"#)["pins"]?.array?.count == 1)
        let metrics = try h.get("/metrics", admin: true).body
        Self.expectMetric(metrics, #"vigil_state_mode{mode="unavailable"} 1"#)
        Self.expectMetric(metrics, "vigil_state_refused_writes_total 2")
        Self.expectMetric(metrics, #"vigil_storage_errors_total{kind="\#(failure.rawValue)"} 1"#)
        Self.expectMetric(metrics, "vigil_state_outages_total 1")

        // The next segment is a regular file: the retry (after 1 s) succeeds and changes are recorded again.
        try h.run(maxTurns: 200, until: { h.v1.stateMode == .writable })
        let resumed = try UnrecordedChangesTests.ask(h, client, #"{"op":"pin.create","ref":5,"pin":\#(UnrecordedChangesTests.pin)}"#)
        #expect(resumed.type == "ok")
        // The retry's snapshot names the next segment, which the journal goes on in.
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(files.contains("snapshot-0000000000000001.vgs"))
        #expect(files.contains("journal-0000000000000001.vgj"))
        Self.expectMetric(try h.get("/metrics", admin: true).body, #"vigil_state_mode{mode="writable"} 1"#)
    }
}
