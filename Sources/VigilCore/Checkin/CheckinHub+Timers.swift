/// Time, restarts and taken-back changes of the check-in circles.
extension CheckinHub {
    /// Everything due by `now`: home safe lapsed (told to everyone listening; not journaled,
    /// restore derives it from `until`), circles idle for `idleLifetimeMs` removed (told, and
    /// returned for the journal). Costs O(due entries).
    public mutating func tick(now: Int64, out: inout [CheckinDelivery]) -> [CircleID] {
        var removed: [CircleID] = []
        while let top = deadlines.min, top.at <= now {
            deadlines.removeMin()
            guard filed[top.id] == top.at else { continue }  // stale: a newer, earlier entry was filed
            filed[top.id] = nil
            guard let circle = circles[top.id] else { continue }
            if circle.idleDeadline(settings) <= now {
                remove(top.id, reason: .idle, out: &out)
                removed.append(top.id)
                continue
            }
            if let home = circle.home, home.until <= now {
                withCircle(top.id) { $0.home = nil }
                lapsedHomes[top.id] = home      // see `applyReplicatedPut`
                deliver(.home(home, lapsed: true), of: top.id, out: &out)
            }
            if let circle = circles[top.id] { arm(circle) }
        }
        return removed
    }

    /// Takes over circles read from disk at `now`: those idle past their lifetime are dropped and
    /// a home safe past its time is cleared (silently: nobody listens yet), timers are armed.
    public mutating func restoreCircles(_ restored: [CheckinCircle], settlements restoredSettlements: [NoticeSettlement] = [],
                                        now: Int64) {
        defer { for s in restoredSettlements { recordSettlement(s) } }
        for var circle in restored.sorted(by: { $0.id < $1.id }) {
            guard circle.idleDeadline(settings) > now else { continue }
            if let home = circle.home, home.until <= now {
                circle.home = nil
                lapsedHomes[circle.id] = home      // see `applyReplicatedPut`
            }
            circles[circle.id] = circle
            arm(circle)
        }
    }

    /// A circle's durable state and its listeners before a change, to take the change back
    /// (docs/DURABILITY.md, "When the disk fails"). Small: a circle is bounded by `maxMembers`.
    public struct Checkpoint: Sendable {
        let id: CircleID
        let circle: CheckinCircle?
        let listeners: [WatcherID: CheckinRole]

        /// The circle as it was (nil: the change created it): a replicated write's precondition.
        public var before: CheckinCircle? { circle }
    }

    /// The checkpoint of circle `id` as it is now (a circle not held: its creation is taken back
    /// by removing it).
    public func checkpoint(_ id: CircleID) -> Checkpoint {
        Checkpoint(id: id, circle: circles[id], listeners: listeners[id] ?? [:])
    }

    /// Puts the circle back as `checkpoint` found it, with its listeners as they were, those
    /// `connected` says are still open (nothing is delivered: the change's own news was never sent).
    public mutating func revert(to checkpoint: Checkpoint, connected: (WatcherID) -> Bool) {
        let id = checkpoint.id
        guard let before = checkpoint.circle else {
            let listening = listeners[id] ?? [:]
            for connection in listening.keys { unlisten(id, connection) }
            if let circle = circles.removeValue(forKey: id) {
                filed[id] = nil
                for m in circle.members { buckets[MemberKey(circle: id, member: m.id)] = nil }
            }
            return
        }
        circles[id] = before
        for (connection, role) in checkpoint.listeners where connected(connection) { listen(id, connection, as: role) }
        arm(before)
    }
}

extension CheckinHub.Checkpoint {
    /// The checkpoint of a circle just created: taking it back removes the circle.
    public static func created(_ id: CircleID) -> Self {
        Self(id: id, circle: nil, listeners: [:])
    }
}
