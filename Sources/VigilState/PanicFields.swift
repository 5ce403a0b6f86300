import VigilCore

/// The binary forms of panic-stream parts, shared by snapshots and journal records.
///
///     location   lat f64, lon f64, present u8 (bit 0 accuracy, 1 heading, 2 speed), then each present reading f64
///     event      seq u64, at i64, kind u8 (1 location + location, 2 status + status u8, 3 ended + reason u8,
///                4 timer + u8 0/1 + due i64, 6 missedCheckIn + due i64 + last location + its at i64
///                + sent_at i64)
///                7 sealedLocation + point (see `E2EFields`), 8 missedCheckIn of an e2e stream + due i64
///                + the last point + the seq it was sealed for u64 + its at i64 + sent_at i64)
///                5 is missedCheckIn as builds before sent_at wrote it (no sent_at): still read, as
///                sent at its `at`, never written. A kind is only added, so the journal's version
///                stays 1 (a build that does not know 6 stops at it and says so).
///     status     1 red, 2 amber        reason   1 safe, 2 cancelled, 3 abandoned
///     stream     id 16, status u8, startedAt i64, updatedAt i64, seq u64, last location + at i64,
///                note (u8 0/1 + string), ended (u8 0/1 + reason u8 + at i64), ownerDigest 32,
///                watch tokens (u32 count × 32), staleNotified u8 0/1, history capacity u32,
///                history (u32 count × event, oldest first),
///                since snapshot version 2: timer (u8 0/1 + due i64), missedCheckIn (u8 0/1 + at i64),
///                since version 6: the escalation's sent_at (u8 0/1 + i64, present with missedCheckIn;
///                before 6 it reads as the escalation's time),
///                since version 7: the check-in circle it was started for (u8 0/1 + id 16; before 7
///                none),
///                since version 9: the e2e part (u8 0/1 + keys, see `E2EFields`; before 9 none),
///                and the last position is written as u8 1 + location or u8 2 + point + the seq
///                it was sealed for u64 (before 9: a location)
///
/// Codes start at 1 so that a zeroed region never decodes as a plausible value. Owner and
/// watchers are not stored: they are connections, which do not survive a restart.
enum PanicFields {
    static let minimumLocationBytes = 17
    static let minimumEventBytes = 8 + 8 + 1 + 1
    static let minimumStreamBytes = 16 + 1 + 8 + 8 + 8 + minimumLocationBytes + 8 + 1 + 1 + 32 + 4 + 1 + 4 + 4
    static let digestBytes = 32
    /// A bound on the decoded history capacity (the setting's default is 1,000): the ring only
    /// grows as events arrive, but a damaged capacity should read as damage, not as a setting.
    static let maxHistoryCapacity = 1 << 24

    // MARK: enums

    static func code(_ status: PanicStatus) -> UInt8 {
        switch status {
        case .red: return 1
        case .amber: return 2
        }
    }

    static func code(_ reason: PanicEndReason) -> UInt8 {
        switch reason {
        case .safe: return 1
        case .cancelled: return 2
        case .abandoned: return 3
        }
    }

    static func readStatus(_ r: inout StateReader) throws(StateError) -> PanicStatus {
        let at = r.offset
        switch try r.u8() {
        case 1: return .red
        case 2: return .amber
        case let c: throw r.invalid("unknown panic status code \(c)", at: at)
        }
    }

    static func readReason(_ r: inout StateReader) throws(StateError) -> PanicEndReason {
        let at = r.offset
        switch try r.u8() {
        case 1: return .safe
        case 2: return .cancelled
        case 3: return .abandoned
        case let c: throw r.invalid("unknown end reason code \(c)", at: at)
        }
    }

    // MARK: location and event

    static func write(_ location: PanicLocation, to w: inout StateWriter) {
        w.f64(location.lat)
        w.f64(location.lon)
        var present: UInt8 = 0
        if location.accuracyM != nil { present |= 1 }
        if location.heading != nil { present |= 2 }
        if location.speedMps != nil { present |= 4 }
        w.u8(present)
        if let v = location.accuracyM { w.f64(v) }
        if let v = location.heading { w.f64(v) }
        if let v = location.speedMps { w.f64(v) }
    }

    static func readLocation(_ r: inout StateReader) throws(StateError) -> PanicLocation {
        let start = r.offset
        var location = PanicLocation(lat: try r.f64(), lon: try r.f64())
        let present = try r.u8()
        guard present & ~7 == 0 else { throw r.invalid("location flags \(present) has unknown bits", at: start + 16) }
        if present & 1 != 0 { location.accuracyM = try r.f64() }
        if present & 2 != 0 { location.heading = try r.f64() }
        if present & 4 != 0 { location.speedMps = try r.f64() }
        guard location.lat.isFinite, location.lon.isFinite, (-90...90).contains(location.lat), (-180...180).contains(location.lon),
              [location.accuracyM, location.heading, location.speedMps].allSatisfy({ $0?.isFinite ?? true }) else {
            throw r.invalid("location out of range or not finite", at: start)
        }
        return location
    }

    /// A stream's last position since snapshot version 9: u8 1 + location, or u8 2 + point + seq u64.
    static func readPosition(_ r: inout StateReader) throws(StateError) -> PanicPosition {
        let at = r.offset
        switch try r.u8() {
        case 1: return .clear(try readLocation(&r))
        case 2: return .sealed(try E2EFields.readPoint(&r), seq: try r.u64())
        case let c: throw r.invalid("unknown position kind \(c)", at: at)
        }
    }

    static func write(_ event: PanicEvent, to w: inout StateWriter) {
        w.u64(event.seq)
        w.i64(event.at)
        switch event.kind {
        case .location(let location):
            w.u8(1)
            write(location, to: &w)
        case .status(let status):
            w.u8(2)
            w.u8(code(status))
        case .ended(let reason):
            w.u8(3)
            w.u8(code(reason))
        case .timer(let due):
            w.u8(4)
            writeOptionalTime(due, to: &w)
        case .sealedLocation(let point):
            w.u8(7)
            E2EFields.write(point, to: &w)
        case .missedCheckIn(let due, let last, let sentAt):
            switch last.position {
            case .clear(let location):
                w.u8(6)
                w.i64(due)
                write(location, to: &w)
            case .sealed(let point, let seq):
                w.u8(8)
                w.i64(due)
                E2EFields.write(point, to: &w)
                w.u64(seq)
            }
            w.i64(last.at)
            w.i64(sentAt)
        }
    }

    static func readEvent(_ r: inout StateReader) throws(StateError) -> PanicEvent {
        let seq = try r.u64()
        let at = try r.time()
        let kindAt = r.offset
        switch try r.u8() {
        case 1: return PanicEvent(seq: seq, at: at, kind: .location(try readLocation(&r)))
        case 2: return PanicEvent(seq: seq, at: at, kind: .status(try readStatus(&r)))
        case 3: return PanicEvent(seq: seq, at: at, kind: .ended(try readReason(&r)))
        case 4: return PanicEvent(seq: seq, at: at, kind: .timer(dueAt: try readOptionalTime(&r)))
        case let code where code == 5 || code == 6:
            let due = try r.time()
            let location = try readLocation(&r)
            let last = LastLocation(location: location, at: try r.time())
            var sentAt = at                                  // 5: written before sent_at was kept
            if code == 6 { sentAt = try r.time() }
            return PanicEvent(seq: seq, at: at, kind: .missedCheckIn(dueAt: due, last: last, sentAt: sentAt))
        case 7: return PanicEvent(seq: seq, at: at, kind: .sealedLocation(try E2EFields.readPoint(&r)))
        case 8:
            let due = try r.time()
            let point = try E2EFields.readPoint(&r)
            let sealedSeq = try r.u64()
            let last = LastLocation(position: .sealed(point, seq: sealedSeq), at: try r.time())
            return PanicEvent(seq: seq, at: at, kind: .missedCheckIn(dueAt: due, last: last, sentAt: try r.time()))
        case let c: throw r.invalid("unknown panic event kind \(c)", at: kindAt)
        }
    }

    // MARK: small parts

    /// An optional part: u8 0/1, then the part when present.
    static func writeOptional<T>(_ value: T?, to w: inout StateWriter, _ write: (T, inout StateWriter) -> Void) {
        w.bool(value != nil)
        if let value { write(value, &w) }
    }

    static func readOptional<T>(_ r: inout StateReader, _ read: (inout StateReader) throws(StateError) -> T) throws(StateError) -> T? {
        guard try r.bool() else { return nil }
        return try read(&r)
    }

    static func writeNote(_ note: String?, to w: inout StateWriter) {
        writeOptional(note, to: &w) { $1.string($0) }
    }

    static func readNote(_ r: inout StateReader) throws(StateError) -> String? {
        try readOptional(&r) { (r: inout StateReader) throws(StateError) in try r.string() }
    }

    static func writeOptionalTime(_ time: Int64?, to w: inout StateWriter) {
        writeOptional(time, to: &w) { $1.i64($0) }
    }

    static func readOptionalTime(_ r: inout StateReader) throws(StateError) -> Int64? {
        try readOptional(&r) { (r: inout StateReader) throws(StateError) in try r.time() }
    }

    static func writeDigests(_ digests: [TokenDigest], to w: inout StateWriter) {
        w.u32(UInt32(truncatingIfNeeded: digests.count))
        for d in digests { w.digest(d) }
    }

    static func readDigests(_ r: inout StateReader) throws(StateError) -> [TokenDigest] {
        let n = try r.count(of: "watch token", minimumElementBytes: digestBytes)
        var digests: [TokenDigest] = []
        digests.reserveCapacity(n)
        for _ in 0..<n { digests.append(try r.digest()) }
        return digests
    }

    static func readHistoryCapacity(_ r: inout StateReader) throws(StateError) -> Int {
        let at = r.offset
        let n = Int(try r.u32())
        guard n >= 1, n <= maxHistoryCapacity else { throw r.invalid("history capacity \(n) is outside 1...\(maxHistoryCapacity)", at: at) }
        return n
    }

    // MARK: stream

    /// Upper estimate of a stream's encoded size, to reserve a snapshot buffer once.
    static func estimatedSize(_ stream: PanicStream) -> Int {
        minimumStreamBytes + 24 + 16 + (stream.note?.utf8.count ?? 0) + stream.watchTokenDigests.count * digestBytes
            + stream.history.count * (minimumEventBytes + 16 + 24)
    }

    /// `staleNotified`: written in place of the stream's own flag (the state digest, which leaves
    /// the flag out, writes false).
    static func write(_ stream: PanicStream, to w: inout StateWriter, staleNotified: Bool? = nil) {
        w.streamID(stream.id)
        w.u8(code(stream.status))
        w.i64(stream.startedAt)
        w.i64(stream.updatedAt)
        w.u64(stream.seq)
        switch stream.last.position {
        case .clear(let location):
            w.u8(1)
            write(location, to: &w)
        case .sealed(let point, let seq):
            w.u8(2)
            E2EFields.write(point, to: &w)
            w.u64(seq)
        }
        w.i64(stream.last.at)
        writeNote(stream.note, to: &w)
        if let end = stream.ended {
            w.u8(1)
            w.u8(code(end.reason))
            w.i64(end.at)
        } else {
            w.u8(0)
        }
        w.digest(stream.ownerTokenDigest)
        writeDigests(stream.watchTokenDigests, to: &w)
        w.bool(staleNotified ?? stream.isStaleNotified)
        w.u32(UInt32(truncatingIfNeeded: stream.history.capacity))
        let events = stream.history.all
        w.u32(UInt32(truncatingIfNeeded: events.count))
        for event in events { write(event, to: &w) }
        writeOptionalTime(stream.dueAt, to: &w)
        writeOptionalTime(stream.missedCheckInAt, to: &w)
        writeOptionalTime(stream.missedCheckInSentAt, to: &w)
        writeOptional(stream.circle, to: &w) { $1.circleID($0) }
        writeOptional(stream.e2e, to: &w) { E2EFields.write($0, to: &$1) }
    }

    /// A stream as snapshot format `version` keeps it.
    static func readStream(_ r: inout StateReader, version: UInt16 = SnapshotCodec.version) throws(StateError) -> PanicStream {
        let start = r.offset
        let id = try r.streamID()
        let status = try readStatus(&r)
        let startedAt = try r.time()
        let updatedAt = try r.time()
        let seq = try r.u64()
        let position = try version >= 9 ? readPosition(&r) : .clear(try readLocation(&r))
        let lastLocationAt = try r.time()
        let note = try readNote(&r)
        var ended: (reason: PanicEndReason, at: Int64)?
        if try r.bool() {
            ended = (try readReason(&r), try r.time())
        }
        let ownerDigest = try r.digest()
        let watchTokens = try readDigests(&r)
        let staleNotified = try r.bool()
        let capacity = try readHistoryCapacity(&r)
        let count = try r.count(of: "history event", minimumElementBytes: minimumEventBytes)
        var events: [PanicEvent] = []
        events.reserveCapacity(count)
        for _ in 0..<count { events.append(try readEvent(&r)) }
        var dueAt: Int64?, missedCheckInAt: Int64?, missedCheckInSentAt: Int64?
        if version >= 2 {
            dueAt = try readOptionalTime(&r)
            missedCheckInAt = try readOptionalTime(&r)
        }
        if version >= 6 {
            missedCheckInSentAt = try readOptionalTime(&r)
            // One form per value: absent exactly when there is no escalation (before 6 it is
            // absent always, and `restored` takes the escalation's time).
            guard (missedCheckInSentAt == nil) == (missedCheckInAt == nil) else {
                throw r.invalid("stream \(id): the escalation's sent_at does not match its escalation", at: start)
            }
        }
        var circle: CircleID?
        if version >= 7 {
            circle = try readOptional(&r) { (r: inout StateReader) throws(StateError) in try r.circleID() }
        }
        var e2e: E2EKeys?
        if version >= 9 {
            e2e = try readOptional(&r) { (r: inout StateReader) throws(StateError) in try E2EFields.readKeys(&r) }
        }
        do {
            return try PanicStream.restored(id: id, status: status, startedAt: startedAt, updatedAt: updatedAt, seq: seq,
                                            last: LastLocation(position: position, at: lastLocationAt), note: note, ended: ended,
                                            history: events, historyCapacity: capacity, ownerDigest: ownerDigest,
                                            watchTokens: watchTokens, staleNotified: staleNotified,
                                            dueAt: dueAt, missedCheckInAt: missedCheckInAt, missedCheckInSentAt: missedCheckInSentAt,
                                            circle: circle, e2e: e2e)
        } catch {
            throw r.invalid("stream \(id): \(error)", at: start)
        }
    }
}
