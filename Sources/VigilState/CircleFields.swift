import VigilCore

/// The binary form of a check-in circle, shared by snapshots (since version 4) and journal
/// records (`circlePut`, kinds 20 and 22):
///
///     circle   id 16, createdAt i64, activeAt i64, ownerDigest 32, nextMember u32,
///              members (u32 count × member), requests (u32 count × ask),
///              answer (u8 0/1 + at i64 + note + asks), home (u8 0/1 + at i64 + until i64),
///              then, in snapshots since version 7 and in journal kind 22 only:
///              subscriptions (u32 count × subscription)
///     member   id u32, label (u8 0/1 + string), addedAt i64, digest 32
///     ask      member u32, label (u8 0/1 + string), at i64
///     note     u8 0/1 + string
///     subscription  id 16, holder u32 (0 the owner, else the member's number), addedAt i64,
///              kind u8 (1 Web Push: endpoint string, p256dh 65, auth 16; 2 relay: handle string)
///
/// A circle of an older layout reads with no subscriptions. Who listens is not stored:
/// connections do not survive a restart.
enum CircleFields {
    static let minimumAskBytes = 4 + 1 + 8
    static let minimumMemberBytes = 4 + 1 + 8 + 32
    static let minimumCircleBytes = 16 + 8 + 8 + 32 + 4 + 4 + 4 + 1 + 1
    static let minimumSubscriptionBytes = 16 + 4 + 8 + 1 + 4

    static func write(_ c: CheckinCircle, to w: inout StateWriter) {
        w.circleID(c.id)
        w.i64(c.createdAt)
        w.i64(c.activeAt)
        w.digest(c.ownerTokenDigest)
        w.u32(c.nextMember)
        w.u32(UInt32(truncatingIfNeeded: c.members.count))
        for m in c.members {
            w.u32(m.id)
            PanicFields.writeNote(m.label, to: &w)
            w.i64(m.addedAt)
            w.digest(m.tokenDigest)
        }
        writeAsks(c.requests, to: &w)
        PanicFields.writeOptional(c.answer, to: &w) { a, w in
            w.i64(a.at)
            PanicFields.writeNote(a.note, to: &w)
            writeAsks(a.answered, to: &w)
        }
        PanicFields.writeOptional(c.home, to: &w) { h, w in
            w.i64(h.at)
            w.i64(h.until)
        }
    }

    /// The subscriptions after a circle's other fields (see the layout above).
    static func writeSubscriptions(_ subscriptions: [CheckinSubscription], to w: inout StateWriter) {
        w.u32(UInt32(truncatingIfNeeded: subscriptions.count))
        for s in subscriptions {
            w.word(s.id.high)
            w.word(s.id.low)
            switch s.holder {
            case .owner: w.u32(0)
            case .member(let m): w.u32(m)
            }
            w.i64(s.addedAt)
            switch s.target {
            case .webPush(let endpoint, let p256dh, let auth):
                w.u8(1)
                w.string(endpoint)
                w.bytes.append(contentsOf: p256dh)
                w.bytes.append(contentsOf: auth)
            case .relay(let handle):
                w.u8(2)
                w.string(handle)
            }
        }
    }

    /// A circle with its subscriptions when `subscriptions` (snapshot version 7, journal kind 22),
    /// else with none (the older layouts).
    static func read(_ r: inout StateReader, subscriptions: Bool) throws(StateError) -> CheckinCircle {
        let start = r.offset
        var circle = try read(&r)
        guard subscriptions else { return circle }
        circle = circle.withSubscriptions(try readSubscriptions(&r))
        guard circle.isConsistent else { throw r.invalid("circle \(circle.id)'s subscriptions are not consistent (holders, ids, destinations)", at: start) }
        return circle
    }

    private static func readSubscriptions(_ r: inout StateReader) throws(StateError) -> [CheckinSubscription] {
        let n = try r.count(of: "circle subscription", minimumElementBytes: minimumSubscriptionBytes)
        var subscriptions: [CheckinSubscription] = []
        subscriptions.reserveCapacity(n)
        for _ in 0..<n {
            let at = r.offset
            let id = SubscriptionID(high: try r.word(), low: try r.word())
            let holderNumber = try r.u32()
            let addedAt = try r.time()
            let kindAt = r.offset
            let target: CheckinSubscription.Target
            switch try r.u8() {
            case 1:
                let endpoint = try r.string()
                let p256dh = try r.bytes(CheckinSubscription.Target.p256dhBytes)
                target = .webPush(endpoint: endpoint, p256dh: p256dh, auth: try r.bytes(CheckinSubscription.Target.authBytes))
            case 2:
                target = .relay(handle: try r.string())
            case let kind:
                throw r.invalid("unknown subscription kind \(kind)", at: kindAt)
            }
            guard target.isWellFormed else { throw r.invalid("subscription \(id)'s destination is out of bounds", at: at) }
            subscriptions.append(CheckinSubscription(id: id, holder: holderNumber == 0 ? .owner : .member(holderNumber), target: target,
                                                     addedAt: addedAt))
        }
        return subscriptions
    }

    static func read(_ r: inout StateReader) throws(StateError) -> CheckinCircle {
        let start = r.offset
        let id = try r.circleID()
        let createdAt = try r.time()
        let activeAt = try r.time()
        let ownerDigest = try r.digest()
        let nextMember = try r.u32()
        let n = try r.count(of: "circle member", minimumElementBytes: minimumMemberBytes)
        var members: [CheckinMember] = []
        members.reserveCapacity(n)
        for _ in 0..<n {
            let member = try r.u32()
            let label = try PanicFields.readNote(&r)
            let addedAt = try r.time()
            members.append(CheckinMember(id: member, label: label, addedAt: addedAt, digest: try r.digest()))
        }
        let requests = try readAsks(&r)
        let answer = try PanicFields.readOptional(&r) { (r: inout StateReader) throws(StateError) -> CheckinAnswer in
            let at = try r.time()
            let note = try PanicFields.readNote(&r)
            return CheckinAnswer(at: at, note: note, answered: try readAsks(&r))
        }
        let home = try PanicFields.readOptional(&r) { (r: inout StateReader) throws(StateError) -> CheckinHome in
            CheckinHome(at: try r.time(), until: try r.time())
        }
        let circle = CheckinCircle(id: id, createdAt: createdAt, activeAt: activeAt, ownerDigest: ownerDigest, members: members,
                                   nextMember: nextMember, requests: requests, answer: answer, home: home)
        guard circle.isConsistent else { throw r.invalid("circle \(id) is not consistent (members, requests or times)", at: start) }
        return circle
    }

    static func estimatedSize(_ c: CheckinCircle) -> Int {
        minimumCircleBytes + c.members.count * (minimumMemberBytes + 48) + (c.requests.count + (c.answer?.answered.count ?? 0)) * (minimumAskBytes + 48)
            + (c.answer?.note?.utf8.count ?? 0) + 32 + 4 + c.subscriptions.count * (minimumSubscriptionBytes + 81 + 256)
    }

    private static func writeAsks(_ asks: [CheckinAsk], to w: inout StateWriter) {
        w.u32(UInt32(truncatingIfNeeded: asks.count))
        for a in asks {
            w.u32(a.member)
            PanicFields.writeNote(a.label, to: &w)
            w.i64(a.at)
        }
    }

    private static func readAsks(_ r: inout StateReader) throws(StateError) -> [CheckinAsk] {
        let n = try r.count(of: "check-in request", minimumElementBytes: minimumAskBytes)
        var asks: [CheckinAsk] = []
        asks.reserveCapacity(n)
        for _ in 0..<n {
            let member = try r.u32()
            let label = try PanicFields.readNote(&r)
            asks.append(CheckinAsk(member: member, label: label, at: try r.time()))
        }
        return asks
    }
}

extension StateWriter {
    mutating func circleID(_ id: CircleID) {
        word(id.high)
        word(id.low)
    }
}

extension StateReader {
    mutating func circleID() throws(StateError) -> CircleID {
        CircleID(high: try word(), low: try word())
    }
}
