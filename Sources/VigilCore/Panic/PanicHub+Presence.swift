/// What a cluster node tells the others about its watchers (docs/CLUSTER.md, "Watcher counts"):
/// watchers are connections, so each node knows only its own; the owner's node adds up the rest.
extension PanicHub {
    /// The streams `connection` watches (read before it disconnects: their counts change).
    public func streamsWatched(by connection: WatcherID) -> Set<StreamID> { watching[connection] ?? [] }

    /// Every stream with watchers on this node, with their number.
    public func forEachWatchedStream(_ body: (StreamID, Int) -> Void) {
        for (id, stream) in streams where !stream.watchers.isEmpty { body(id, stream.watchers.count) }
    }

    /// The connection that owns stream `id` on this node, if any.
    public func ownerConnection(of id: StreamID) -> WatcherID? { streams[id]?.owner }
}
