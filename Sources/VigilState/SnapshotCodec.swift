import VigilCore

/// The snapshot file format, version 9:
///
///     magic           8 bytes  89 'V' 'G' 'S' 0D 0A 1A 0A
///     version         u16      9 (1 to 8 are read too: 1's streams lack the safety timer's
///                              fields, the pins of 1 and 2 lack range_m, before 4 there are no
///                              circles, before 5 no cluster sequence, before 6 the streams
///                              lack their escalation's sent_at, and before 7 their circle
///                              and the circles their subscriptions, before 8 there
///                              are no kept answers, before 9 no stream is end-to-end
///                              encrypted: its last position is a location, and it has no
///                              e2e part)
///     flags           u16      0 (reserved: a reader refuses what it does not know)
///     takenAt         i64      unix ms
///     journalSegment  u64
///     pin count       u32,  stream count u32
///     cluster         u8       0 standalone, 1 a cluster node                 since version 5
///     replicatedSequence u64      the last replicated-stream sequence included
///                              (0 when standalone)                            since version 5
///     pins            (see `PinFields`), each followed by range_m u32 (0: none) since version 3
///     streams         (see `PanicFields`)
///     circle count    u32,  circles (see `CircleFields`)      since version 4,
///                              each followed by its subscriptions  since version 7
///     settlement count u32, settlements (see `NoticeFields`)  since version 7
///     ack count       u32,  acknowledgements (see `NoticeFields`)   since version 7
///     kept count      u32,  kept answers, oldest first (see `KeptAnswerFields`) since version 8
///     crc32c          u32      CRC-32C of every byte before it
///
/// Little-endian throughout. The magic's high first byte and CR LF / ^Z / LF catch a file that
/// went through a text-mode transfer, as PNG's does. The version is checked before the checksum,
/// so a file from a newer Vigil says "version 2 is not supported", not "damaged".
public enum SnapshotCodec {
    public static let magic: [UInt8] = [0x89, 0x56, 0x47, 0x53, 0x0D, 0x0A, 0x1A, 0x0A]
    /// The version written. Every version from `oldestReadable` up is read.
    public static let version: UInt16 = 9
    public static let oldestReadable: UInt16 = 1
    /// The header `version` writes (the cluster fields make it 9 bytes longer since version 5).
    static let headerBytes = headerBytes(version: version)
    static let clusterFieldBytes = 1 + 8

    static func headerBytes(version: UInt16) -> Int {
        8 + 2 + 2 + 8 + 8 + 4 + 4 + (version >= 5 ? clusterFieldBytes : 0)
    }
    static let checksumBytes = 4
    /// Where the pin and stream counts are in the header.
    static let countsOffset = 8 + 2 + 2 + 8 + 8

    /// The header of the version written, with the counts given (0 when they are patched later).
    static func writeHeader(to w: inout StateWriter, takenAt: Int64, journalSegment: UInt64, replicatedSequence: UInt64?,
                            pins: UInt32 = 0, streams: UInt32 = 0) {
        w.bytes.append(contentsOf: magic)
        w.u16(version)
        w.u16(0)
        w.i64(takenAt)
        w.u64(journalSegment)
        w.u32(pins)
        w.u32(streams)
        w.u8(replicatedSequence == nil ? 0 : 1)
        w.u64(replicatedSequence ?? 0)
    }

    /// The snapshot's bytes, ready to write. Sizes the buffer exactly for the pins (the bulk)
    /// and generously for the streams, so it grows at most once. (`SnapshotWriter` builds the
    /// same bytes in slices.)
    public static func encode(_ snapshot: StateSnapshot) -> [UInt8] {
        var capacity = headerBytes + checksumBytes
        for pin in snapshot.pins { capacity += PinFields.size(pin) }
        for stream in snapshot.streams { capacity += PanicFields.estimatedSize(stream) }
        for circle in snapshot.circles { capacity += CircleFields.estimatedSize(circle) }
        capacity += 4 + snapshot.settlements.count * NoticeFields.byteCount + 4 + snapshot.acks.count * NoticeFields.ackByteCount
        var writer = SnapshotWriter(takenAt: snapshot.takenAt, journalSegment: snapshot.journalSegment,
                                    replicatedSequence: snapshot.replicatedSequence, capacity: capacity)
        for pin in snapshot.pins { writer.append(pin) }
        for stream in snapshot.streams { writer.append(stream) }
        for circle in snapshot.circles { writer.append(circle) }
        for settlement in snapshot.settlements { writer.append(settlement) }
        for ack in snapshot.acks { writer.append(ack) }
        for answer in snapshot.keptAnswers { writer.append(answer) }
        return writer.finish()
    }

    /// Reads a snapshot, refusing anything not exactly as `encode` writes it: wrong magic,
    /// unknown version or flags, a checksum mismatch, a count or length past the end, a field out
    /// of range, bytes left over. Never traps, whatever the input (the decoder is fuzzed).
    ///
    /// `verifyingChecksum: false` is for fuzzing only: it lets random inputs reach the field
    /// decoders, which a checksum would otherwise stop at the door.
    public static func decode(_ bytes: [UInt8], verifyingChecksum: Bool = true) throws(StateError) -> StateSnapshot {
        try bytes.withStateBytes { (raw: UnsafeRawBufferPointer) throws(StateError) -> StateSnapshot in
            try decode(raw, verifyingChecksum: verifyingChecksum)
        }
    }

    /// Whether `bytes` has the magic, a known version and a matching checksum: the cheap check
    /// (no field decoding) used to pick which old snapshot to keep as a fallback.
    public static func verify(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw in
            var r = StateReader(raw, what: "snapshot header")
            return (try? checkHeader(&r, verifyingChecksum: true)) != nil
        }
    }

    static func decode(_ raw: UnsafeRawBufferPointer, verifyingChecksum: Bool) throws(StateError) -> StateSnapshot {
        var r = StateReader(raw, what: "snapshot header")
        let found = try checkHeader(&r, verifyingChecksum: verifyingChecksum)
        // The payload ends where the checksum begins; `checkHeader` made sure the file is that long.
        let payloadEnd = raw.count - checksumBytes
        var body = StateReader(UnsafeRawBufferPointer(rebasing: raw[0..<payloadEnd]), offset: r.offset, what: "snapshot header")
        let takenAt = try body.i64()
        let journalSegment = try body.u64()
        let pinCount = try body.count(of: "pin", minimumElementBytes: PinFields.minimumBytes)
        let streamCount = try body.count(of: "stream", minimumElementBytes: PanicFields.minimumStreamBytes)
        let replicatedSequence = found >= 5 ? try readReplicatedSequence(&body) : nil
        body.what = "pin"
        var pins: [Pin] = []
        pins.reserveCapacity(pinCount)
        for _ in 0..<pinCount {
            var pin = try PinFields.read(from: &body)
            if found >= 3 { pin.rangeMeters = try PinFields.readRange(&body) }
            pins.append(pin)
        }
        body.what = "panic stream"
        var streams: [PanicStream] = []
        streams.reserveCapacity(streamCount)
        for _ in 0..<streamCount { streams.append(try PanicFields.readStream(&body, version: found)) }
        var circles: [CheckinCircle] = []
        if found >= 4 {
            body.what = "check-in circle"
            let circleCount = try body.count(of: "circle", minimumElementBytes: CircleFields.minimumCircleBytes)
            circles.reserveCapacity(circleCount)
            for _ in 0..<circleCount { circles.append(try CircleFields.read(&body, subscriptions: found >= 7)) }
        }
        let settlements = found >= 7 ? try readList(&body, "notice settlement", minimumBytes: NoticeFields.byteCount) { (r: inout StateReader) throws(StateError) in
            try NoticeFields.read(&r)
        } : []
        let acks = found >= 7 ? try readList(&body, "notice acknowledgement", minimumBytes: NoticeFields.ackByteCount) { (r: inout StateReader) throws(StateError) in
            try NoticeFields.readAck(&r)
        } : []
        let kept = found >= 8 ? try readList(&body, "kept answer", minimumBytes: KeptAnswerFields.minimumBytes) { (r: inout StateReader) throws(StateError) in
            try KeptAnswerFields.read(&r)
        } : []
        guard body.isAtEnd else {
            throw .invalid(what: "snapshot", offset: body.offset, reason: "\(body.remaining) bytes after the last stream or circle")
        }
        return StateSnapshot(takenAt: takenAt, journalSegment: journalSegment, pins: pins, streams: streams, circles: circles,
                             settlements: settlements, acks: acks, replicatedSequence: replicatedSequence, keptAnswers: kept)
    }

    /// A u32 count of `what`, then that many elements read by `read` (the count is checked against
    /// the bytes left first, see `StateReader.count`).
    static func readList<Element>(_ r: inout StateReader, _ what: String, minimumBytes: Int,
                                  _ read: (inout StateReader) throws(StateError) -> Element) throws(StateError) -> [Element] {
        r.what = what
        let count = try r.count(of: what, minimumElementBytes: minimumBytes)
        var list: [Element] = []
        list.reserveCapacity(count)
        for _ in 0..<count { list.append(try read(&r)) }
        return list
    }

    /// The cluster fields of a version 5 header: a standalone node's sequence must be 0, so that
    /// each value has one form.
    static func readReplicatedSequence(_ r: inout StateReader) throws(StateError) -> UInt64? {
        let at = r.offset
        let clustered = try r.u8()
        let sequence = try r.u64()
        switch clustered {
        case 0:
            guard sequence == 0 else { throw r.invalid("a standalone snapshot has cluster sequence \(sequence)", at: at + 1) }
            return nil
        case 1:
            return sequence
        default:
            throw r.invalid("unknown cluster flag \(clustered)", at: at)
        }
    }

    /// Magic, version, flags and (optionally) checksum; leaves `r` after the flags and returns the version.
    @discardableResult
    static func checkHeader(_ r: inout StateReader, verifyingChecksum: Bool) throws(StateError) -> UInt16 {
        let raw = r.base
        guard raw.count >= magic.count, raw.prefix(magic.count).elementsEqual(magic) else {
            if raw.count < magic.count, raw.elementsEqual(magic.prefix(raw.count)) { throw .truncated(what: "snapshot header", offset: raw.count) }
            throw .badMagic(kind: "snapshot")
        }
        r = StateReader(raw, offset: magic.count, what: "snapshot header")
        let found = try r.u16()
        guard found >= oldestReadable && found <= version else { throw .unsupportedVersion(kind: "snapshot", found: found, supported: version) }
        let flags = try r.u16()
        guard flags == 0 else { throw .invalid(what: "snapshot header", offset: r.offset - 2, reason: "unknown flags \(flags)") }
        guard raw.count >= headerBytes(version: found) + checksumBytes else { throw .truncated(what: "snapshot header", offset: raw.count) }
        if verifyingChecksum {
            let payloadEnd = raw.count - checksumBytes
            let stored = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: payloadEnd, as: UInt32.self))
            let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<payloadEnd]))
            guard stored == computed else { throw .checksumMismatch(kind: "snapshot", stored: stored, computed: computed) }
        }
        return found
    }
}
