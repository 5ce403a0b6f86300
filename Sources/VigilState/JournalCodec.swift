import VigilCore

/// The journal's byte format.
///
/// A segment file starts with a 24-byte header, then holds records back to back:
///
///     header   magic 89 'V' 'G' 'J' 0D 0A 1A 0A, version u16 = 1, flags u16 = 0,
///              segment u64, crc32c u32 of the 20 bytes before it
///     record   length u32 (of the payload), crc32c u32 (of the payload), payload
///     payload  kind u8, then the fields of that kind:
///              1 pinPut       pin (see `PinFields`)
///              2 pinRemove    pin id 16
///              3 panicStart   id 16, status u8, location, startedAt i64, note, owner digest 32,
///                             watch tokens (u32 count × 32), history capacity u32
///              4 panicEvent   id 16, event (see `PanicFields`)
///              5 panicInvite  id 16, digest 32
///              6 panicRevoke  id 16, digest 32
///              7 panicRemove  id 16
///              8 pinVote      pin id 16, voter u64, value i8 (+1 or -1)
///              9 panicStart   as 3, then the safety timer's due i64 (a start with a timer;
///                  with timer                  one without is still written as 3)
///             10 pinPut       as 1, then range_m u32 > 0 (a pin with a reach; one without is
///                  with range                  still written as 1, so a journal without ranged
///                                              pins stays readable by older builds)
///             11 panicStart   as 3, then the safety timer (u8 0/1 + due i64), then the check-in
///                  for a circle               circle's id 16 (a start for a circle; one for none
///                                              is still written as 3 or 9)
///             20 circlePut    circle (see `CircleFields`), without subscriptions
///             21 circleRemove circle id 16
///             30 noticeSettled circle id 16, notice id 30 (see `NoticeID.bytes`), subscription id
///                              16, settlement u8 (1 delivered, 2 gone, 3 refused, 4 expired,
///                              5 cancelled)
///             31 noticeAcked  circle id 16, notice id 30, by u32 (0 the owner, else the member's
///                              number), at i64
///             33 panicStart   id 16, status u8, startedAt i64, owner digest 32, watch tokens (u32
///                  end-to-end  count × 32), history capacity u32, safety timer (u8 0/1 + due i64),
///                  encrypted   circle (u8 0/1 + id 16), keys (see `E2EFields`), the first point's
///                              sealed value (sealed for seq 1 and the status); no location, no note
///             34 panicRekey   id 16, keys (see `E2EFields`)
///             32 answerKept   lookup 32, request digest 32, created i64, sealed answer (u32
///                              length ≤ 1 MiB, ≥ 28 + bytes: nonce 12 ‖ ciphertext ‖ tag 16)
///             22 circlePut    as 20, then the circle's subscriptions (u32 count ≥ 1 ×
///                  with subscriptions          subscription, see `CircleFields`); a circle
///                                              without any is still written as 20, so a journal
///                                              without subscriptions stays readable by older
///                                              builds (and a 22 with none is refused: one form
///                                              per value)
///
/// A kind is only ever added (a build that meets a kind it does not know stops there and says so,
/// see `JournalStop.undecodable`, rather than skipping it), so the version stays 1.
/// A crash can cut the last write anywhere, so `scan` stops at the first record that is cut
/// short, has an impossible length, or fails its checksum; the bytes before it are the journal.
public enum JournalCodec {
    public static let magic: [UInt8] = [0x89, 0x56, 0x47, 0x4A, 0x0D, 0x0A, 0x1A, 0x0A]
    public static let version: UInt16 = 1
    public static let headerBytes = 24
    /// Length and checksum in front of each payload.
    public static let frameBytes = 8
    /// The longest payload `scan` believes (1 GiB): a longer length is damage. Real records are
    /// under a kilobyte except a `pinPut` with very many votes (9 bytes each).
    public static let maxPayloadBytes = 1 << 30

    // MARK: header

    /// The header that opens segment `segment`.
    public static func header(segment: UInt64) -> [UInt8] {
        var w = StateWriter(capacity: headerBytes)
        w.bytes.append(contentsOf: magic)
        w.u16(version)
        w.u16(0)
        w.u64(segment)
        w.u32(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    /// The segment number a header names. A file shorter than the header throws `.truncated`
    /// (a segment whose creation was cut short: it holds no records).
    public static func readHeader(_ bytes: [UInt8]) throws(StateError) -> UInt64 {
        guard bytes.count >= magic.count, bytes[0..<magic.count].elementsEqual(magic) else {
            if bytes.count < magic.count, bytes.elementsEqual(magic.prefix(bytes.count)) { throw .truncated(what: "journal header", offset: bytes.count) }
            throw .badMagic(kind: "journal")
        }
        return try bytes.withStateBytes { (raw: UnsafeRawBufferPointer) throws(StateError) -> UInt64 in
            var r = StateReader(raw, offset: magic.count, what: "journal header")
            let found = try r.u16()
            guard found == version else { throw .unsupportedVersion(kind: "journal", found: found, supported: version) }
            let flags = try r.u16()
            guard flags == 0 else { throw r.invalid("unknown flags \(flags)", at: r.offset - 2) }
            let segment = try r.u64()
            let stored = try r.u32()
            let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<(headerBytes - 4)]))
            guard stored == computed else { throw .checksumMismatch(kind: "journal header", stored: stored, computed: computed) }
            return segment
        }
    }

    // MARK: records

    /// Appends one framed record to `buffer` (the caller's, reused across records: no other
    /// allocation than its growth).
    public static func append(_ record: JournalRecord, to buffer: inout [UInt8]) {
        var w = StateWriter()
        swap(&w.bytes, &buffer)
        let frame = w.bytes.count
        w.u32(0)
        w.u32(0)
        writePayload(record, to: &w)
        let payload = frame + frameBytes
        let length = w.bytes.count - payload
        w.patchU32(UInt32(truncatingIfNeeded: length), at: frame)
        w.patchU32(CRC32C.checksum(w.bytes, range: payload..<w.bytes.count), at: frame + 4)
        swap(&w.bytes, &buffer)
    }

    /// The framed bytes of one record.
    public static func encode(_ record: JournalRecord) -> [UInt8] {
        var out: [UInt8] = []
        append(record, to: &out)
        return out
    }

    /// The records in `bytes[start...]`, up to the first one that is cut short, has an impossible
    /// length, fails its checksum or cannot be decoded. `validLength` is the offset (from the
    /// start of `bytes`) just past the last good record: the length to truncate the file to when
    /// the stop is a torn write at the tail.
    public static func scan(_ bytes: [UInt8], from start: Int = 0) -> JournalScan {
        var records: [JournalRecord] = []
        let (validLength, stop) = forEachRecord(bytes, from: start) { records.append($0) }
        return JournalScan(records: records, validLength: validLength, stop: stop)
    }

    /// `scan` one record at a time, keeping none (the scrub after each snapshot asks only whether
    /// a segment mentions a removed stream: an array of every record of a busy segment was a good
    /// part of the snapshot's peak RSS). Returns the valid length and why the scan stopped.
    static func forEachRecord(_ bytes: [UInt8], from start: Int = 0,
                              _ body: (JournalRecord) -> Void) -> (validLength: Int, stop: JournalStop?) {
        bytes.withUnsafeBytes { raw in
            var position = max(0, min(start, raw.count))
            while position < raw.count {
                guard raw.count - position >= frameBytes else {
                    return (position, .incomplete(offset: position))
                }
                let length = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: position, as: UInt32.self))
                let stored = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: position + 4, as: UInt32.self))
                guard length >= 1, Int(length) <= maxPayloadBytes else {
                    return (position, .badLength(offset: position, length: length))
                }
                let payloadStart = position + frameBytes
                guard raw.count - payloadStart >= Int(length) else {
                    return (position, .incomplete(offset: position))
                }
                let payload = UnsafeRawBufferPointer(rebasing: raw[payloadStart..<(payloadStart + Int(length))])
                guard CRC32C.checksum(payload) == stored else {
                    return (position, .checksumMismatch(offset: position))
                }
                do throws(StateError) {
                    body(try decodePayload(payload))
                } catch {
                    return (position, .undecodable(offset: position, reason: error.description))
                }
                position = payloadStart + Int(length)
            }
            return (position, nil)
        }
    }

    /// One record's payload (the bytes after a frame's length and checksum), decoded on its own:
    /// the entry point for a fuzzer, which would rarely get past the frame checksum in `scan`.
    public static func decodeRecord(payload: [UInt8]) throws(StateError) -> JournalRecord {
        try payload.withStateBytes { (raw: UnsafeRawBufferPointer) throws(StateError) -> JournalRecord in
            try decodePayload(raw)
        }
    }

    // MARK: payloads

    static func writePayload(_ record: JournalRecord, to w: inout StateWriter) {
        switch record {
        case .pinPut(let pin):
            w.u8(pin.rangeMeters == nil ? 1 : 10)
            PinFields.write(pin, to: &w)
            if pin.rangeMeters != nil { PinFields.writeRange(pin, to: &w) }
        case .pinRemove(let id):
            w.u8(2)
            w.pinID(id)
        case .panicStart(let start):
            guard case .clear(let location, let note) = start.origin else {
                writeE2EStart(start, to: &w)
                return
            }
            w.u8(start.circle != nil ? 11 : start.dueAt == nil ? 3 : 9)
            w.streamID(start.id)
            w.u8(PanicFields.code(start.status))
            PanicFields.write(location, to: &w)
            w.i64(start.startedAt)
            PanicFields.writeNote(note, to: &w)
            w.digest(start.ownerDigest)
            PanicFields.writeDigests(start.watchTokens, to: &w)
            w.u32(UInt32(truncatingIfNeeded: start.historyCapacity))
            if let circle = start.circle {
                PanicFields.writeOptionalTime(start.dueAt, to: &w)
                w.circleID(circle)
            } else if let due = start.dueAt {
                w.i64(due)
            }
        case .panicEvent(let id, let event):
            w.u8(4)
            w.streamID(id)
            PanicFields.write(event, to: &w)
        case .panicInvite(let id, let digest):
            w.u8(5)
            w.streamID(id)
            w.digest(digest)
        case .panicRevoke(let id, let digest):
            w.u8(6)
            w.streamID(id)
            w.digest(digest)
        case .panicRemove(let id):
            w.u8(7)
            w.streamID(id)
        case .panicRekey(let id, let keys):
            w.u8(34)
            w.streamID(id)
            E2EFields.write(keys, to: &w)
        case .pinVote(let id, let voter, let value):
            w.u8(8)
            w.pinID(id)
            w.u64(voter)
            w.u8(UInt8(bitPattern: value))
        case .circlePut(let circle):
            w.u8(circle.subscriptions.isEmpty ? 20 : 22)
            CircleFields.write(circle, to: &w)
            if !circle.subscriptions.isEmpty { CircleFields.writeSubscriptions(circle.subscriptions, to: &w) }
        case .circleRemove(let id):
            w.u8(21)
            w.circleID(id)
        case .noticeSettled(let s):
            w.u8(30)
            NoticeFields.write(s, to: &w)
        case .noticeAcked(let a):
            w.u8(31)
            NoticeFields.write(a, to: &w)
        case .answerKept(let a):
            w.u8(32)
            KeptAnswerFields.write(a, to: &w)
        }
    }

    /// One payload, which must be consumed exactly.
    static func decodePayload(_ payload: UnsafeRawBufferPointer) throws(StateError) -> JournalRecord {
        var r = StateReader(payload, what: "journal record")
        let record: JournalRecord
        switch try r.u8() {
        case let kind where kind == 1 || kind == 10:
            r.what = "pinPut record"
            var pin = try PinFields.read(from: &r)
            if kind == 10 { pin.rangeMeters = try PinFields.readRange(&r, required: true) }
            record = .pinPut(pin)
        case 2:
            record = .pinRemove(try r.pinID())
        case let kind where kind == 3 || kind == 9 || kind == 11:
            r.what = "panicStart record"
            let id = try r.streamID()
            let status = try PanicFields.readStatus(&r)
            let location = try PanicFields.readLocation(&r)
            let startedAt = try r.time()
            let note = try PanicFields.readNote(&r)
            let ownerDigest = try r.digest()
            let watchTokens = try PanicFields.readDigests(&r)
            let historyCapacity = try PanicFields.readHistoryCapacity(&r)
            var dueAt: Int64?, circle: CircleID?
            switch kind {
            case 9: dueAt = try r.time()
            case 11:
                dueAt = try PanicFields.readOptionalTime(&r)
                circle = try r.circleID()
            default: break
            }
            record = .panicStart(PanicStartRecord(id: id, status: status, location: location, note: note, startedAt: startedAt,
                                                  ownerDigest: ownerDigest, watchTokens: watchTokens, historyCapacity: historyCapacity,
                                                  dueAt: dueAt, circle: circle))
        case 4:
            r.what = "panicEvent record"
            record = .panicEvent(try r.streamID(), try PanicFields.readEvent(&r))
        case 5:
            record = .panicInvite(try r.streamID(), try r.digest())
        case 6:
            record = .panicRevoke(try r.streamID(), try r.digest())
        case 7:
            record = .panicRemove(try r.streamID())
        case 8:
            r.what = "pinVote record"
            let id = try r.pinID()
            let voter = try r.u64()
            let at = r.offset
            let value = Int8(bitPattern: try r.u8())
            guard value == 1 || value == -1 else { throw r.invalid("vote value \(value) is not ±1", at: at) }
            record = .pinVote(id, voter: voter, value: value)
        case let kind where kind == 20 || kind == 22:
            r.what = "circlePut record"
            let circle = try CircleFields.read(&r, subscriptions: kind == 22)
            if kind == 22 && circle.subscriptions.isEmpty { throw r.invalid("a circlePut with subscriptions holds none", at: 0) }
            record = .circlePut(circle)
        case 21:
            record = .circleRemove(try r.circleID())
        case 30:
            r.what = "noticeSettled record"
            record = .noticeSettled(try NoticeFields.read(&r))
        case 31:
            r.what = "noticeAcked record"
            record = .noticeAcked(try NoticeFields.readAck(&r))
        case 32:
            r.what = "answerKept record"
            record = .answerKept(try KeptAnswerFields.read(&r))
        case 33:
            r.what = "e2e panicStart record"
            record = .panicStart(try readE2EStart(&r))
        case 34:
            r.what = "panicRekey record"
            record = .panicRekey(try r.streamID(), try E2EFields.readKeys(&r))
        case let kind:
            throw r.invalid("unknown record kind \(kind)", at: 0)
        }
        guard r.isAtEnd else { throw r.invalid("\(r.remaining) bytes after the record's fields") }
        return record
    }

    /// Kind 33: an end-to-end encrypted stream's start (see the format above).
    static func writeE2EStart(_ start: PanicStartRecord, to w: inout StateWriter) {
        guard case .e2e(let e2e) = start.origin else { preconditionFailure("a clear start is kind 3, 9 or 11") }
        w.u8(33)
        w.streamID(start.id)
        w.u8(PanicFields.code(start.status))
        w.i64(start.startedAt)
        w.digest(start.ownerDigest)
        PanicFields.writeDigests(start.watchTokens, to: &w)
        w.u32(UInt32(truncatingIfNeeded: start.historyCapacity))
        PanicFields.writeOptionalTime(start.dueAt, to: &w)
        PanicFields.writeOptional(start.circle, to: &w) { $1.circleID($0) }
        E2EFields.write(e2e.keys, to: &w)
        E2EFields.write(e2e.sealed, to: &w)
    }

    static func readE2EStart(_ r: inout StateReader) throws(StateError) -> PanicStartRecord {
        let id = try r.streamID()
        let status = try PanicFields.readStatus(&r)
        let startedAt = try r.time()
        let ownerDigest = try r.digest()
        let watchTokens = try PanicFields.readDigests(&r)
        let historyCapacity = try PanicFields.readHistoryCapacity(&r)
        let dueAt = try PanicFields.readOptionalTime(&r)
        let circle = try PanicFields.readOptional(&r) { (r: inout StateReader) throws(StateError) in try r.circleID() }
        let keys = try E2EFields.readKeys(&r)
        let sealed = try E2EFields.readSealed(&r)
        return PanicStartRecord(id: id, status: status, origin: .e2e(E2EStart(keys: keys, sealed: sealed)), startedAt: startedAt,
                                ownerDigest: ownerDigest, watchTokens: watchTokens, historyCapacity: historyCapacity,
                                dueAt: dueAt, circle: circle)
    }
}
