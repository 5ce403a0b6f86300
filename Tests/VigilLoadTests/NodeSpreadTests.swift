import XCTest
@testable import VigilLoad

final class NodeSpreadTests: XCTestCase {
    func testRoundRobinAndTheNextNode() {
        let two = NodeSpread(count: 2)
        XCTAssertEqual((0..<5).map(two.roundRobin), [0, 1, 0, 1, 0])
        XCTAssertEqual(two.nextNode(after: 0), 1)
        XCTAssertEqual(two.nextNode(after: 1), 0)
        let one = NodeSpread(count: 1)
        XCTAssertEqual((0..<3).map(one.roundRobin), [0, 0, 0])
        XCTAssertEqual(one.nextNode(after: 0), 0)
    }

    func testSamplesAreSpreadWhateverTheirStride() {
        // Every second subscriber checked: plain round robin would put them all on node 0.
        let classes = (0..<8).map { $0 % 2 == 0 ? 0 : 2 }
        let nodes = NodeSpread(count: 2).withinClasses(classes)
        XCTAssertEqual(nodes, [0, 0, 1, 1, 0, 0, 1, 1])
        XCTAssertEqual(Set(nodes.enumerated().filter { classes[$0.offset] == 0 }.map(\.element)), [0, 1])
        XCTAssertEqual(NodeSpread(count: 1).withinClasses(classes), Array(repeating: 0, count: 8))
    }

    func testWatchersAreNeverOnTheirOwnersNodeWhileThereAreFewerThanNodes() {
        let three = NodeSpread(count: 3)
        for owner in 0..<3 {
            let nodes = (0..<2).map { three.watcherNode(ownerNode: owner, watcher: $0) }
            XCTAssertFalse(nodes.contains(owner), "owner on \(owner), watchers on \(nodes)")
            XCTAssertEqual(Set(nodes).count, 2, "two watchers on two different nodes")
        }
        // Two nodes, three watchers: the other node, the owner's, the other again.
        let two = NodeSpread(count: 2)
        XCTAssertEqual((0..<3).map { two.watcherNode(ownerNode: 0, watcher: $0) }, [1, 0, 1])
        XCTAssertEqual((0..<3).map { two.watcherNode(ownerNode: 1, watcher: $0) }, [0, 1, 0])
    }

    func testOneNodeKeepsTheOneURLLayout() {
        // watcher-major, stream-minor, chunks of `perConnection`: what vigil-load always did.
        let plan = NodeSpread(count: 1).watchConnections(streams: 5, watchersPerStream: 2, perConnection: 3) { _ in 0 }
        XCTAssertEqual(plan.map(\.node), [0, 0, 0, 0])
        XCTAssertEqual(plan.map { $0.watches.map { [$0.stream, $0.watcher] } },
                       [[[0, 0], [1, 0], [2, 0]], [[3, 0], [4, 0], [0, 1]], [[1, 1], [2, 1], [3, 1]], [[4, 1]]])
    }

    func testEveryWatchIsPlannedOnceOnItsNode() {
        let spread = NodeSpread(count: 2)
        let streams = 7, watchers = 3, perConnection = 2
        let owner = { (stream: Int) in spread.roundRobin(stream) }  // one stream per owner connection
        let plan = spread.watchConnections(streams: streams, watchersPerStream: watchers, perConnection: perConnection, ownerNode: owner)
        var seen = Set<[Int]>()
        var crossing = 0, total = 0
        for connection in plan {
            XCTAssertLessThanOrEqual(connection.watches.count, perConnection)
            XCTAssertFalse(connection.watches.isEmpty)
            for w in connection.watches {
                XCTAssertTrue(seen.insert([w.stream, w.watcher]).inserted, "planned twice: \(w)")
                XCTAssertEqual(connection.node, spread.watcherNode(ownerNode: owner(w.stream), watcher: w.watcher))
                total += 1
                if connection.node != owner(w.stream) { crossing += 1 }
            }
        }
        XCTAssertEqual(seen.count, streams * watchers)
        // Watchers 0 and 2 of every stream cross, watcher 1 stays: 2 in 3.
        XCTAssertEqual(crossing, 2 * streams)
        XCTAssertEqual(total, 3 * streams)
        // At most one partly filled connection per node.
        XCTAssertLessThanOrEqual(plan.count, (streams * watchers + perConnection - 1) / perConnection + 1)
    }
}

final class NodePairLatencyTests: XCTestCase {
    func testSamplesAreFiledByPairAndCounted() {
        var pairs = NodePairLatency(nodes: 2)
        pairs.record(from: 0, to: 1, ns: 2_000_000)
        pairs.record(from: 0, to: 1, ns: 4_000_000)
        pairs.record(from: 1, to: 1, ns: 1_000_000)
        pairs.record(from: 2, to: 0, ns: 1_000_000)  // no such node: ignored
        XCTAssertEqual(pairs.recorded, 3)
        XCTAssertEqual(pairs.across, 2)
        let series = pairs.series("map event")
        XCTAssertEqual(series.map(\.0), ["map event 0→0", "map event 0→1", "map event 1→0", "map event 1→1"])
        XCTAssertEqual(series.map { $0.1.count }, [0, 2, 0, 1])
    }

    func testOneNodeKeepsNothing() {
        var one = NodePairLatency(nodes: 1)
        one.record(from: 0, to: 0, ns: 1_000)
        XCTAssertEqual(one.recorded, 0)
        XCTAssertTrue(one.series("x").isEmpty)
    }
}
