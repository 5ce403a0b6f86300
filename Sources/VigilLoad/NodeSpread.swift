/// Which node (an index into vigil-load's `--url` list) each connection of a run goes to.
///
/// The point of a run over several nodes is that what one node accepts is delivered by another,
/// so the roles are spread to cross nodes, and deterministically (a run repeats):
///
/// - map: publisher p on node p mod n; subscribers round robin within their sample (checked,
///   timed, the rest: `withinClasses`), so every node has its share of each sample whatever the
///   sampling stride. A subscriber hears every publisher whose pins are in its area, so (n-1)/n
///   of the deliveries cross nodes (half with two nodes, and both the local and the remote path
///   are measured side by side).
/// - panic: owner o on node o mod n; watcher k (0-based) of a stream whose owner is on node i on
///   node (i + k + 1) mod n. With fewer watchers than nodes none shares its owner's node; with
///   more, every n-th does, so both paths are there. A watcher connection watching several
///   streams holds only watches bound for its node (`watchConnections`).
/// - a watcher that reconnects comes back on the next node (`nextNode`): it moves with `since`.
///
/// With one node everything is node 0 and the layouts are those of a one-URL run.
public struct NodeSpread: Equatable, Sendable {
    public let count: Int

    public init(count: Int) {
        precondition(count >= 1, "a run needs at least one node")
        self.count = count
    }

    /// The node of the `i`-th connection of a role spread round robin.
    public func roundRobin(_ i: Int) -> Int { i % count }

    /// Nodes for a list of connections by class (`classes[i]` is connection i's sample, any
    /// small number): round robin within each class, in list order.
    public func withinClasses(_ classes: [Int]) -> [Int] {
        var next: [Int: Int] = [:]
        return classes.map { c in
            let k = next[c, default: 0]
            next[c] = k + 1
            return roundRobin(k)
        }
    }

    /// The node after `node` (a reconnecting watcher's next one).
    public func nextNode(after node: Int) -> Int { (node + 1) % count }

    /// The node of watcher `k` (0-based) of a stream whose owner is on `ownerNode`.
    public func watcherNode(ownerNode: Int, watcher k: Int) -> Int { (ownerNode + k + 1) % count }

    /// One watcher connection's plan: its node and its (stream, watcher index) watches.
    public struct WatchConnection: Equatable, Sendable {
        public var node: Int
        public var watches: [Watch]

        public init(node: Int, watches: [Watch]) {
            self.node = node
            self.watches = watches
        }
    }

    public struct Watch: Equatable, Sendable {
        public var stream: Int
        /// The watcher's index among the stream's watchers (its watch token).
        public var watcher: Int

        public init(stream: Int, watcher: Int) {
            self.stream = stream
            self.watcher = watcher
        }
    }

    /// Groups every (stream, watcher) pair into connections of at most `perConnection` watches,
    /// each connection on one node and every watch on its `watcherNode`. Within a node the pairs
    /// keep the one-node order (watcher index major, stream minor); nodes follow each other.
    /// `ownerNode` is the node of a stream's owner.
    public func watchConnections(streams: Int, watchersPerStream: Int, perConnection: Int,
                                 ownerNode: (Int) -> Int) -> [WatchConnection] {
        precondition(perConnection >= 1)
        var byNode = Array(repeating: [Watch](), count: count)
        for watcher in 0..<watchersPerStream {
            for stream in 0..<streams {
                let node = count == 1 ? 0 : watcherNode(ownerNode: ownerNode(stream), watcher: watcher)
                byNode[node].append(Watch(stream: stream, watcher: watcher))
            }
        }
        var plan: [WatchConnection] = []
        for (node, watches) in byNode.enumerated() {
            var start = 0
            while start < watches.count {
                let end = Swift.min(start + perConnection, watches.count)
                plan.append(WatchConnection(node: node, watches: Array(watches[start..<end])))
                start = end
            }
        }
        return plan
    }
}
