import VigilCore

/// How many watchers each stream has on the other nodes of the cluster.
///
/// Watchers are connections, not replicated state: each node knows its own. So every node
/// announces, on the core NATS subject `_vigil_presence.<name>` (outside the stream's `<name>.>`: not stored), its watcher count of a
/// stream whenever it changes, and all of its non-zero counts every `refreshMs`; a count not
/// refreshed within `expiryMs` is dropped (its node is gone). The owner's node tells the owner
/// its own watchers plus these. The message is `<node> <stream id> <count>` in ASCII.
struct WatcherPresence {
    static let refreshMs: Int64 = 10_000
    static let expiryMs: Int64 = 30_000
    static let maxCount = 1_000_000

    private struct Count {
        var count: Int
        var atMs: Int64
    }

    private var remote: [StreamID: [String: Count]] = [:]
    /// Streams whose count on this node may have changed in this turn.
    var changed: Set<StreamID> = []
    var nextRefreshMs: Int64 = 0

    /// The watchers of `stream` on the other nodes.
    func remoteWatchers(_ stream: StreamID) -> Int {
        remote[stream]?.values.reduce(0) { $0 + $1.count } ?? 0
    }

    static func encode(node: String, stream: StreamID, count: Int) -> [UInt8] {
        Array("\(node) \(stream) \(count)".utf8)
    }

    /// A message from `_vigil_presence.<name>`: the stream whose remote count changed, or nil (our own
    /// message, a malformed one, or no change). Hostile bytes are dropped, never trusted further.
    mutating func received(_ payload: [UInt8], ownNode: String, nowMs: Int64) -> StreamID? {
        guard payload.count <= 80, let text = String(validating: payload, as: UTF8.self) else { return nil }
        let parts = text.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].count <= 32, parts[0] != Substring(ownNode),
              let stream = StreamID(String(parts[1])), let count = Int(parts[2]), count >= 0, count <= Self.maxCount
        else { return nil }
        let node = String(parts[0])
        let before = remote[stream]?[node]?.count ?? 0
        if count == 0 {
            remote[stream]?[node] = nil
            if remote[stream]?.isEmpty == true { remote[stream] = nil }
        } else {
            remote[stream, default: [:]][node] = Count(count: count, atMs: nowMs)
        }
        return before == count ? nil : stream
    }

    /// Drops counts not refreshed in time; returns the streams whose remote count changed.
    mutating func expire(nowMs: Int64) -> [StreamID] {
        var changedStreams: [StreamID] = []
        for (stream, nodes) in remote {
            let kept = nodes.filter { nowMs - $0.value.atMs <= Self.expiryMs }
            guard kept.count != nodes.count else { continue }
            remote[stream] = kept.isEmpty ? nil : kept
            changedStreams.append(stream)
        }
        return changedStreams
    }
}
