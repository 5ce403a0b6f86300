/// Streams started for a check-in circle (docs/PROTOCOL.md, "Circles as standing contacts"): the
/// circle's members are their standing contacts, who watch with their member tokens instead of a
/// watch token handed around.
///
/// The hub knows a circle by its id only. Whether a member token is a live member of the circle,
/// or an owner token the circle's, is `CheckinHub`'s to say; the application asks it first and
/// passes the answer here (`watch(asMember:of:)`, `cutMember`), as it joins the two hubs
/// everywhere (V1Application+Panic.swift, +Checkin.swift; `ReplicatedApply` on a cluster node).
extension PanicHub {
    /// The streams held for `circle`, active and in grace, oldest first (ties by id).
    public func streams(of circle: CircleID) -> [PanicStream] {
        guard let ids = byCircle[circle] else { return [] }
        return ids.compactMap { streams[$0] }.sorted { ($0.startedAt, $0.id) < ($1.startedAt, $1.id) }
    }

    /// Subscribes `watcher` as a member of `circle`, whose token's digest is `member`: allowed
    /// when the stream was started for that circle (the caller has found the token a live member
    /// of it). Otherwise, and for an unknown stream, `.forbidden`, as a wrong watch token. The
    /// watcher is kept under the member's digest, so that revoking the member finds it
    /// (`cutMember`). Replay, `since` and the count as in `watch(watchToken:)`.
    /// `number`: the member's number in the circle (`CheckinMember.id`): on an end-to-end
    /// encrypted stream the reply carries that member's box (`PanicWatch.box`) and no other's,
    /// and a rekey sends it its new one.
    public mutating func watch(_ id: StreamID, watcher: WatcherID, asMember member: TokenDigest, number: UInt32? = nil, of circle: CircleID,
                               since: UInt64?, out: inout [PanicDelivery]) -> Result<PanicWatch, PanicFailure> {
        watch(id, watcher: watcher, as: member, member: number, since: since, out: &out) { $0.circle == circle }
    }

    /// A member of `circle` was revoked: every connection watching one of the circle's streams as
    /// that member (under its token's digest `member`) gets `.revoked` and stops watching, and
    /// each stream's owner hears its new count, as when a watch token is revoked. Returns the
    /// streams that lost a watcher. Nothing is journaled for it: the circle's own record (the
    /// member gone) says it, and a restart keeps no watcher anyway.
    @discardableResult
    public mutating func cutMember(_ member: TokenDigest, of circle: CircleID, out: inout [PanicDelivery]) -> [StreamID] {
        var touched: [StreamID] = []
        for id in (byCircle[circle] ?? []).sorted() {
            var cut: [WatcherID] = []
            withStream(id) { stream in
                cut = stream.watchers.filter { $0.value.matches(member) }.map(\.key).sorted()
                guard !cut.isEmpty else { return }
                for watcher in cut {
                    stream.watchers.removeValue(forKey: watcher)
                    stream.memberWatchers.removeValue(forKey: watcher)
                }
                out.append(PanicDelivery(stream: id, kind: .revoked, recipients: cut))
                Self.deliverWatcherCount(of: stream, out: &out)
            }
            guard !cut.isEmpty else { continue }
            for watcher in cut { Self.unindex(&watching, watcher, id) }
            touched.append(id)
        }
        return touched
    }

    /// Holds `stream` (replacing one with its id), indexed by its circle.
    mutating func insert(_ stream: PanicStream) {
        if let held = streams[stream.id], held.circle != stream.circle { unindexCircle(held) }
        streams[stream.id] = stream
        if let circle = stream.circle { byCircle[circle, default: []].insert(stream.id) }
    }

    /// Drops stream `id` and its place in the circle index; the caller unindexes its connections.
    mutating func removeStream(_ id: StreamID) -> PanicStream? {
        guard let stream = streams.removeValue(forKey: id) else { return nil }
        unindexCircle(stream)
        return stream
    }

    private mutating func unindexCircle(_ stream: PanicStream) {
        guard let circle = stream.circle, byCircle[circle]?.remove(stream.id) != nil, byCircle[circle]?.isEmpty == true else { return }
        byCircle.removeValue(forKey: circle)
    }
}
