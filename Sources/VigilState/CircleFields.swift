import VigilCore

/// The binary form of a check-in circle, shared by snapshots (since version 4) and journal
/// records (`circlePut`, kind 20):
///
///     circle   id 16, createdAt i64, activeAt i64, ownerDigest 32, nextMember u32,
///              members (u32 count × member), requests (u32 count × ask),
///              answer (u8 0/1 + at i64 + note + asks), home (u8 0/1 + at i64 + until i64)
///     member   id u32, label (u8 0/1 + string), addedAt i64, digest 32
///     ask      member u32, label (u8 0/1 + string), at i64
///     note     u8 0/1 + string
///
/// Who listens is not stored: connections do not survive a restart.
enum CircleFields {
    static let minimumAskBytes = 4 + 1 + 8
    static let minimumMemberBytes = 4 + 1 + 8 + 32
    static let minimumCircleBytes = 16 + 8 + 8 + 32 + 4 + 4 + 4 + 1 + 1

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
            + (c.answer?.note?.utf8.count ?? 0) + 32
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
