import Testing
import VigilCore
@testable import VigilServer

/// `panic.watch` with `since` through a real server (issue 23): the replay is every event after
/// `since`, in order, whatever the conflation threshold and the queue hold, paced by the watcher's
/// reading; live events during it follow it in order; what cannot be delivered is said (1013).
@Suite struct ReplayGlueTests {
    /// An owner with a started stream of `events` events (seq 1 ... events); each update a fix
    /// of its own (`lat` = 10 + seq / 10⁵).
    struct Rig {
        let h: ServerHarness
        let owner: TestClient
        let stream: String
        let token: String

        /// With `statuses`, the events after the start alternate amber and red: the trail (and so
        /// the watch reply) stays one point long.
        init(_ h: ServerHarness, events: Int, statuses: Bool = false) throws {
            self.h = h
            owner = try h.open()
            owner.send(#"{"op":"panic.start","ref":0,"status":"red","lat":10.00001,"lon":20.0,"watchers":1}"#)
            try h.read(owner, count: 1)
            let started = owner.messages.removeFirst()
            stream = try #require(started["stream"]?.string)
            token = try #require(started["watch_tokens"]?.array?.first?.string)
            if statuses {
                owner.write((2...events).flatMap { seq in
                    owner.frame(.text, Array(#"{"op":"panic.status","ref":\#(seq),"stream":"\#(stream)","status":"\#(seq % 2 == 0 ? "amber" : "red")"}"#.utf8))
                })
                try h.run(maxTurns: 5_000, until: { owner.poll(); return owner.all("ok").count >= events - 1 })
                #expect(owner.all("ok").last?["seq"]?.int == events)
            } else {
                try update(through: events)
            }
        }

        /// Updates until the stream's seq is `last` (pipelined, every `ok` awaited).
        func update(through last: Int) throws {
            let first = (h.v1.panic.stream(StreamID(stream)!)?.seq).map { Int($0) + 1 } ?? 2
            guard first <= last else { return }
            owner.messages.removeAll()
            owner.write((first...last).flatMap { seq in
                owner.frame(.text, Array(#"{"op":"panic.update","ref":\#(seq),"stream":"\#(stream)","lat":\#(Self.lat(seq)),"lon":20.0,"accuracy_m":8.5,"heading":123.4}"#.utf8))
            })
            try h.run(maxTurns: 5_000, until: { owner.poll(); return owner.all("ok").count >= last - first + 1 })
            #expect(owner.all("ok").map { $0["seq"]?.int } == (first...last).map { $0 })
        }

        static func lat(_ seq: Int) -> Double { 10 + Double(seq) / 100_000 }

        /// A watcher whose server end takes 4 KiB at a time, asking for every event after `since`;
        /// returns once its replay has started (it stays stalled until the test reads).
        func stalledWatcher(since: Int = 0) throws -> TestClient {
            let watcher = try h.open(serverSendBuffer: 4_096)
            let started = h.v1.stats.replays
            watch(watcher, since: since)
            try h.run(until: { h.v1.stats.replays > started })
            return watcher
        }

        func watch(_ client: TestClient, since: Int?) {
            let s = since.map { #","since":\#($0)"# } ?? ""
            client.send(#"{"op":"panic.watch","ref":"w","stream":"\#(stream)","watch_token":"\#(token)"\#(s)}"#)
        }
    }

    /// The reply, then exactly `seqs`, each the location sent with that seq (a status where
    /// `statuses` says so), then nothing more.
    static func expectReplay(_ messages: [TestClient.Message], seqs: Range<Int>, statuses: Set<Int> = [],
                             sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(messages.first?.type == "ok" && messages.first?["gap"] == nil, sourceLocation: sourceLocation)
        let events = messages.dropFirst()
        #expect(events.map { $0["seq"]?.int } == seqs.map { $0 }, sourceLocation: sourceLocation)
        for e in events {
            guard let seq = e["seq"]?.int else { continue }
            if statuses.contains(seq) {
                #expect(e.type == "panic.status", sourceLocation: sourceLocation)
            } else if seq > 1 {
                #expect(e.type == "panic.location" && e["lat"]?.double == Rig.lat(seq), sourceLocation: sourceLocation)
            }
        }
    }

    /// The report's case: history 1,000, 1,006 events, `since` 6. Before: 11 events came (996-1006),
    /// the rest conflated away under the reply's weight. Also compressed, and with a threshold far
    /// below one window.
    @Test(arguments: [(65_536, false), (65_536, true), (4_096, false)])
    func aReplayPastTheConflationThresholdArrivesWhole(conflateAbove: Int, deflate: Bool) throws {
        let h = try ServerHarness {
            $0.panic.historyEvents = 1_000
            $0.conflateAboveBytes = conflateAbove
        }
        let rig = try Rig(h, events: 1_006)
        for since in [6, 506, 1_005, 1_006] {
            let watcher = try h.open(serverSendBuffer: 4_096, deflate: deflate)
            rig.watch(watcher, since: since)
            try h.run(maxTurns: 5_000, until: { watcher.poll(); return watcher.messages.count >= 1_007 - since })
            Self.expectReplay(watcher.messages, seqs: since + 1..<1_007)
            #expect(watcher.messages.first?["state"]?.object?["seq"]?.int == 1_006)
            watcher.close()
        }
        #expect(h.server.counters.conflations == 0)
        #expect(h.v1.stats.replays == 3 && h.v1.stats.replayedEvents == 1_000 + 500 + 1)
        #expect(h.v1.replays.isEmpty)
    }

    /// Live events while the watcher has not read its replay: not sent live, taken by the replay
    /// in order; meanwhile the server holds at most about one window for the watcher.
    @Test func liveEventsDuringAReplayFollowItInOrderAndTheWindowBoundsTheQueue() throws {
        let h = try ServerHarness { $0.panic.historyEvents = 2_000 }
        let rig = try Rig(h, events: 1_000)
        let watcher = try rig.stalledWatcher()
        for _ in 0..<5 { try h.turn() }
        #expect(h.v1.replays.count == 1)  // stalled: the watcher reads nothing
        var held = [h.server.loop.queuedBytes]
        try rig.update(through: 1_040)
        rig.owner.messages.removeAll()
        rig.owner.send(#"{"op":"panic.status","ref":"s","stream":"\#(rig.stream)","status":"amber"}"#)
        try h.read(rig.owner, count: 1)
        try rig.update(through: 1_060)
        #expect(h.v1.replays.count == 1)
        held.append(h.server.loop.queuedBytes)
        try h.run(maxTurns: 5_000, until: { watcher.poll(); return watcher.messages.count >= 1_061 })
        // What the server held for the stalled watcher: its reply (with the trail), and then at
        // most one window of the replay past it, however many events it was owed.
        let reply = try #require(watcher.messages.first).text.utf8.count
        #expect(held.allSatisfy { $0 <= max(reply, V1Application.replayWindowBytes) + 1_024 }, "held \(held), reply \(reply)")
        Self.expectReplay(watcher.messages, seqs: 1..<1_061, statuses: [1_041])
        #expect(h.v1.replays.isEmpty)
        // After the replay: live again.
        try rig.update(through: 1_061)
        try h.run(until: { watcher.poll(); return watcher.messages.count >= 1_062 })
        #expect(watcher.messages.last?["seq"]?.int == 1_061)
        #expect(h.server.counters.conflations == 0)
    }

    /// The watcher reads more slowly than the stream moves through its history: the events it is
    /// owed are gone, and it is told so with a close (1013 and the reason), never left with less.
    @Test func aReplayTheHistoryMovedPastClosesTheWatcherWith1013() throws {
        let h = try ServerHarness { $0.panic.historyEvents = 1_000 }
        let rig = try Rig(h, events: 1_000)
        let watcher = try rig.stalledWatcher()
        try rig.update(through: 2_500)  // seq 1 ... 1,500 leave the history meanwhile
        try h.run(maxTurns: 5_000, until: { watcher.poll(); return !watcher.closes.isEmpty })
        #expect(watcher.closes == [1013])
        let seqs = watcher.messages.dropFirst().compactMap { $0["seq"]?.int }
        #expect(seqs == Array(1..<seqs.count + 1))  // a prefix (here the reply filled the window), in order, then the close
        #expect(h.v1.stats.replaysCut == 1 && h.v1.replays.isEmpty)
        #expect(h.server.counters.conflations == 0)
    }

    /// The fan-out encodes a stream's state once for the replies of a turn that show it (a contact
    /// group watching again at once), and a reply never shows another moment's state: here one
    /// connection's watch, update and watch are read in one turn with two more watchers'.
    @Test func repliesOfOneTurnShareTheStateEncodingAndEachShowsItsOwnMoment() throws {
        let h = try ServerHarness { $0.panic.historyEvents = 1_000 }
        let rig = try Rig(h, events: 1_000)
        let others = try (0..<2).map { _ in try h.open() }
        rig.owner.messages.removeAll()
        let watch = #"{"op":"panic.watch","ref":"w","stream":"\#(rig.stream)","watch_token":"\#(rig.token)"}"#
        let update = #"{"op":"panic.update","ref":"u","stream":"\#(rig.stream)","lat":\#(Rig.lat(1_001)),"lon":20.0}"#
        rig.owner.write([watch, update, watch].flatMap { rig.owner.frame(.text, Array($0.utf8)) })
        for o in others { o.send(watch) }
        try h.run(until: {
            rig.owner.poll(); others.forEach { $0.poll() }
            return rig.owner.all("ok").count == 3 && others.allSatisfy { !$0.all("ok").isEmpty }
        })
        let mine = rig.owner.all("ok").filter { $0["ref"]?.string == "w" }
        #expect(mine.map { $0["state"]?.object?["seq"]?.int } == [1_000, 1_001])
        for reply in mine + others.flatMap({ $0.all("ok") }) {
            let state = try #require(reply["state"]?.object)
            #expect(state["trail"]?.array?.last?.object?["seq"]?.int == state["seq"]?.int)  // each its own moment
        }
        // Replies showing one moment are the same bytes around their ref.
        let texts = (mine + others.flatMap { $0.all("ok") }).map { $0.text }
        for a in texts { for b in texts where a.contains(#""seq":1001,"#) == b.contains(#""seq":1001,"#) { #expect(a == b) } }
    }

    /// Twenty contacts ask for the whole history in one turn: no turn queues more than its replay
    /// budget (so every other client's answer waits one short turn at most), and each replay is
    /// whole. (Status events: the replies stay small, so the replays start in the watches' turn.)
    @Test func aTurnQueuesAtMostItsReplayBudgetAndEveryReplayIsWhole() throws {
        let h = try ServerHarness { $0.panic.historyEvents = 1_000 }
        let rig = try Rig(h, events: 1_000, statuses: true)
        let watchers = try (0..<20).map { _ in try h.open() }
        for w in watchers { rig.watch(w, since: 0) }
        var most = 0
        for _ in 0..<5_000 where !watchers.allSatisfy({ $0.messages.count >= 1_001 }) {
            let before = h.v1.stats.replayedEvents
            try h.turn()
            most = max(most, h.v1.stats.replayedEvents - before)
            for w in watchers { w.poll() }
        }
        // Every event here is over 80 bytes: a turn's share is at most budget / 80 events, and one more.
        #expect(most > 0 && most <= V1Application.replayTurnBytes / 80 + 1, "\(most) events in one turn")
        for w in watchers {
            Self.expectReplay(w.messages, seqs: 1..<1_001, statuses: Set(2...1_000))
            #expect(w.messages.last?["status"]?.string == "amber")
        }
        #expect(h.v1.replays.isEmpty && h.v1.stats.replayedEvents == 20_000)
    }

    /// The stream is deleted while the watcher still owes most of its replay (ended, and its grace
    /// over): what it is owed is gone, and it is told so with the same close, not left with less.
    @Test func aReplayWhoseStreamIsDeletedClosesTheWatcherWith1013() throws {
        let h = try ServerHarness {
            $0.panic.historyEvents = 1_000
            $0.panic.endedGraceMs = 0
        }
        let rig = try Rig(h, events: 1_000)
        let watcher = try rig.stalledWatcher()
        rig.owner.messages.removeAll()
        rig.owner.send(#"{"op":"panic.end","ref":"e","stream":"\#(rig.stream)","reason":"safe"}"#)
        try h.read(rig.owner, count: 1)
        let id = try #require(StreamID(rig.stream))
        try h.run(until: { h.v1.panic.stream(id) == nil })  // the next tick removes it
        #expect(h.v1.replays.count == 1)
        try h.run(maxTurns: 5_000, until: { watcher.poll(); return !watcher.closes.isEmpty })
        #expect(watcher.closes == [1013])
        let seqs = watcher.messages.dropFirst().compactMap { $0["seq"]?.int }
        #expect(seqs == Array(1..<seqs.count + 1) && seqs.count < 1_001)
        #expect(h.v1.stats.replaysCut == 1 && h.v1.replays.isEmpty)
    }

    /// Unwatching ends the replay; a new watch replaces the one in progress.
    @Test func unwatchOrANewWatchEndsTheReplayInProgress() throws {
        let h = try ServerHarness { $0.panic.historyEvents = 1_000 }
        let rig = try Rig(h, events: 1_000)
        let watcher = try rig.stalledWatcher()
        rig.watch(watcher, since: 990)  // the client changed its mind: the reply, then 991 ... 1,000
        try h.run(until: { watcher.poll(); return watcher.messages.count(where: { $0.type == "ok" }) == 2 })
        try h.run(maxTurns: 5_000, until: { watcher.poll(); return watcher.messages.last?["seq"]?.int == 1_000 && h.v1.replays.isEmpty })
        let second = try #require(watcher.messages.lastIndex(where: { $0.type == "ok" }))
        Self.expectReplay(Array(watcher.messages[second...]), seqs: 991..<1_001)
        let first = watcher.messages[..<second].dropFirst().compactMap { $0["seq"]?.int }
        #expect(first == Array(1..<first.count + 1) && first.count < 1_000)

        let other = try rig.stalledWatcher()
        other.send(#"{"op":"panic.unwatch","ref":"u","stream":"\#(rig.stream)"}"#)
        try h.run(maxTurns: 5_000, until: { other.poll(); return other.all("ok").count == 2 })
        try h.run(until: { other.poll(); return h.v1.replays.isEmpty })
    }
}

/// `PanicReplays` as a value: whatever the interleaving of live events, steps and drains, a
/// watcher gets `since + 1 ... seq` exactly once and in order, from its replay and then live.
@Suite struct PanicReplaysTests {
    @Test func replayThenLiveIsTheWholeSequenceForEveryInterleaving() {
        let stream = StreamID(high: 1, low: 2)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            var replays = PanicReplays()
            var seq = UInt64.random(in: 1...40, using: &generator)
            let since = UInt64.random(in: 0...seq, using: &generator)
            var got: [UInt64] = []
            var queued = 0
            replays.start(7, stream, seqs: since < seq ? (since + 1)...seq : nil)
            for _ in 0..<200 {
                switch Int.random(in: 0..<3, using: &generator) {
                case 0:  // a live event
                    seq += 1
                    if !replays.deferLive(7, stream, seq: seq) { got.append(seq) }
                case 1:  // the loop steps the replay
                    while case .send(let next) = replays.step(7, stream, queuedBytes: queued, window: 3) {
                        got.append(next)
                        replays.sent(7, stream, seq: next)
                        queued += 1
                    }
                    if replays.step(7, stream, queuedBytes: queued, window: 3) == .done { replays.remove(7, stream) }
                default:  // the socket took everything
                    queued = 0
                    replays.drained(7)
                }
            }
            queued = 0
            while case .send(let next) = replays.step(7, stream, queuedBytes: queued, window: .max) {
                got.append(next)
                replays.sent(7, stream, seq: next)
            }
            #expect(got == (since < seq ? Array((since + 1)...seq) : []))
        }
    }

    @Test func drainedConnectionsAreSteppedOnceAndForgottenWhenClosed() {
        let a = StreamID(high: 1, low: 1), b = StreamID(high: 2, low: 2)
        var replays = PanicReplays()
        replays.start(3, a, seqs: 1...5)
        replays.start(3, b, seqs: 2...2)
        replays.start(4, a, seqs: nil)
        #expect(replays.count == 2 && replays.streams(of: 3) == [a, b] && replays.streams(of: 4).isEmpty)
        replays.drained(3)
        replays.drained(3)
        replays.drained(4)  // nothing in progress: not listed
        #expect(replays.takeReady() == [3] && replays.takeReady().isEmpty)
        #expect(replays.step(3, a, queuedBytes: 10, window: 10) == .wait)
        #expect(replays.step(3, a, queuedBytes: 9, window: 10) == .send(1))
        replays.start(3, a, seqs: 4...5)  // watched again: the new replay replaces the old
        #expect(replays.cursor(3, a) == PanicReplays.Cursor(stream: a, next: 4, through: 5) && replays.count == 2)
        replays.closed(3)
        #expect(replays.isEmpty && replays.step(3, b, queuedBytes: 0, window: 10) == .done)
    }
}
