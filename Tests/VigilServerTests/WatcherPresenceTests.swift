import Testing
import VigilCore
@testable import VigilServer

/// Watcher counts of the other nodes of a cluster (`WatcherPresence`): summed per stream,
/// refreshed or dropped, and never trusted beyond their few well-formed bytes.
@Suite struct WatcherPresenceTests {
    let s1 = StreamID(high: 1, low: 2)
    let s2 = StreamID(high: 3, low: 4)

    private func message(_ node: String, _ stream: StreamID, _ count: Int) -> [UInt8] {
        WatcherPresence.encode(node: node, stream: stream, count: count)
    }

    @Test func countsOfOtherNodesAreSummedPerStream() {
        var p = WatcherPresence()
        #expect(p.received(message("n2", s1, 2), ownNode: "n1", nowMs: 0) == s1)
        #expect(p.received(message("n3", s1, 1), ownNode: "n1", nowMs: 0) == s1)
        #expect(p.received(message("n3", s2, 4), ownNode: "n1", nowMs: 0) == s2)
        #expect(p.remoteWatchers(s1) == 3)
        #expect(p.remoteWatchers(s2) == 4)
        // the same count again is no change; a new one replaces the node's old one
        #expect(p.received(message("n2", s1, 2), ownNode: "n1", nowMs: 5) == nil)
        #expect(p.received(message("n2", s1, 0), ownNode: "n1", nowMs: 5) == s1)
        #expect(p.remoteWatchers(s1) == 1)
    }

    @Test func ownMessagesAndMalformedOnesAreIgnored() {
        var p = WatcherPresence()
        #expect(p.received(message("n1", s1, 5), ownNode: "n1", nowMs: 0) == nil)
        let bad: [String] = ["", "n2", "n2 \(s1)", "n2 \(s1) -1", "n2 \(s1) 1000001", "n2 notastream 1",
                             "n2  \(s1) 1", "n2 \(s1) 1 extra", String(repeating: "n", count: 33) + " \(s1) 1",
                             "n2 \(s1) 99999999999999999999999"]
        for text in bad {
            #expect(p.received(Array(text.utf8), ownNode: "n1", nowMs: 0) == nil, "\(text)")
        }
        #expect(p.received([0xFF, 0x20, 0x31], ownNode: "n1", nowMs: 0) == nil)
        #expect(p.received([UInt8](repeating: 0x41, count: 100_000), ownNode: "n1", nowMs: 0) == nil)
        #expect(p.remoteWatchers(s1) == 0)
    }

    @Test func countsNotRefreshedInTimeAreDropped() {
        var p = WatcherPresence()
        _ = p.received(message("n2", s1, 2), ownNode: "n1", nowMs: 0)
        _ = p.received(message("n3", s1, 1), ownNode: "n1", nowMs: 20_000)
        #expect(p.expire(nowMs: WatcherPresence.expiryMs).isEmpty)
        #expect(p.expire(nowMs: WatcherPresence.expiryMs + 1) == [s1])
        #expect(p.remoteWatchers(s1) == 1)
        #expect(p.expire(nowMs: 20_000 + WatcherPresence.expiryMs + 1) == [s1])
        #expect(p.remoteWatchers(s1) == 0)
    }
}
