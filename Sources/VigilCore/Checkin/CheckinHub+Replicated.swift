/// Check-in circles changed by a record of the replicated log (docs/CLUSTER.md, "The replicated
/// log (design)"). A `circlePut` carries the circle's whole state after one change, so what the
/// change was is read from the difference between the circle held and the circle put, and told
/// exactly as the hub's own operation tells it:
///
/// - a member gone (`revoke`): its listening connections get `revoked` and stop listening, and its
///   request budget goes;
/// - a request not held before (`request`): `requested`, to everyone listening;
/// - another answer (`answer`): `answered`, to everyone listening;
/// - another home safe (`setHome`, set or cleared): `home`, to everyone listening;
/// - a new member (`invite`): nothing (only the owner learns of it, in its reply).
///
/// Idle removal and home safe lapsing stay local: each node's `tick` does them from the circle's
/// own times.
extension CheckinHub {
    /// `circlePut`. With `base` nil a create (connection `owner`, if given, listens as the owner,
    /// as after `create`); otherwise an edit validated against the circle whose `revision` is `base`.
    public mutating func applyReplicatedPut(_ circle: CheckinCircle, base: UInt64?, owner: WatcherID?,
                                            out: inout [CheckinDelivery]) -> ReplicatedOutcome {
        var circle = circle
        // Home safe this node has lapsed already, carried by a writer whose clock had not: it is
        // over, and telling it again would repeat the lapse.
        if let home = circle.home, lapsedHomes[circle.id] == home { circle.home = nil }
        guard let held = circles[circle.id] else {
            guard base == nil else { return .conflict("the circle is gone") }
            // `maxCircles` is not checked: the writer checked it, and this node's count depends on
            // its own clock (idle removal), so nodes at the limit would disagree.
            circles[circle.id] = circle
            if let owner { listen(circle.id, owner, as: .owner) }
            arm(circle)
            return .applied
        }
        // The same revision and the same home safe: this change, again. (The same revision with
        // another home safe is a home change whose time did not move `activeAt`: it applies.)
        if held.revision == circle.revision && held.home == circle.home { return .duplicate }
        guard let base, held.revision == base else {
            return .conflict(base == nil ? "the circle exists already" : "the circle changed since")
        }
        // Idle past its lifetime when the change was made: removed on a node whose clock got
        // there, so refused everywhere (the next tick removes it here too).
        guard held.idleDeadline(settings) > circle.activeAt + ReplicatedTiming.deadlineMarginMs else { return .conflict("the circle is gone") }
        circles[circle.id] = circle
        deliverDifference(from: held, to: circle, out: &out)
        arm(circle)
        return .applied
    }

    /// `circleRemove`: the circle goes, and everyone listening is told (`closed`), as after `close`.
    public mutating func applyReplicatedRemove(_ id: CircleID, out: inout [CheckinDelivery]) -> ReplicatedOutcome {
        guard circles[id] != nil else { return .duplicate }
        remove(id, reason: .closed, out: &out)
        return .applied
    }

    /// The news of one change, `old` to `new` (see the extension's comment).
    private mutating func deliverDifference(from old: CheckinCircle, to new: CheckinCircle, out: inout [CheckinDelivery]) {
        let id = new.id
        for member in old.members where new.member(member.id) == nil {
            buckets[MemberKey(circle: id, member: member.id)] = nil
            let cut = (listeners[id] ?? [:]).filter { $0.value == .member(member.id) }.keys.sorted()
            for connection in cut { unlisten(id, connection) }
            if !cut.isEmpty { out.append(CheckinDelivery(circle: id, kind: .revoked(member: member.id), recipients: cut)) }
        }
        for ask in new.requests where !old.requests.contains(ask) {
            deliver(.requested(ask), of: id, out: &out)
        }
        if let answer = new.answer, answer != old.answer {
            deliver(.answered(answer), of: id, out: &out)
        }
        if new.home != old.home {
            deliver(.home(new.home, lapsed: false), of: id, out: &out)
        }
    }
}
