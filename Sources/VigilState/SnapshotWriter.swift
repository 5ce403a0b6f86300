import VigilCore

/// Builds a snapshot's bytes a piece at a time, so the loop thread can export a large map in
/// slices (a few thousand pins per turn) instead of stopping for the whole of it.
///
/// Why slices rather than handing a copy of the hubs to another thread: Swift's copy-on-write is
/// per collection, not per page, so the loop's first write after `let copy = hub` copies the
/// whole pin dictionary (0.8 s for a million pins, measured), a pause the clients would see.
///
/// A snapshot built in slices is "fuzzy": each pin is taken as it is when its slice is written,
/// not all at one instant. It restores correctly because replay is idempotent (see `StateImage`):
/// open journal segment N first, then walk the pins listed at that moment (`MapHub.pinIDs`,
/// skipping those gone by the time their slice comes), add the streams, and give the snapshot
/// `journalSegment: N`. Every change made while the walk went on is in segment N or later, and
/// replaying it over a pin or stream the walk already saw in its newer state changes nothing.
///
/// Pins and streams may be appended in any order (streams are kept apart and written after
/// the pins); `finish` writes the counts and the checksum and hands over the bytes.
public struct SnapshotWriter: Sendable {
    private var w: StateWriter
    private var streamBytes = StateWriter()
    private var circleBytes = StateWriter()
    private var pinCount: UInt32 = 0
    private var streamCount: UInt32 = 0
    private var circleCount: UInt32 = 0
    private var settlementBytes = StateWriter()
    private var settlementCount: UInt32 = 0
    private var ackBytes = StateWriter()
    private var ackCount: UInt32 = 0
    private var keptBytes = StateWriter()
    private var keptCount: UInt32 = 0
    /// Where the counts go once known.
    private static let countsOffset = 8 + 2 + 2 + 8 + 8

    /// `capacity`: bytes to reserve up front (an estimate of the finished snapshot; 0 is fine).
    /// `replicatedSequence`: see `StateSnapshot.replicatedSequence` (nil for a standalone node).
    public init(takenAt: Int64, journalSegment: UInt64, replicatedSequence: UInt64? = nil, capacity: Int = 0) {
        w = StateWriter(capacity: max(capacity, SnapshotCodec.headerBytes + SnapshotCodec.checksumBytes))
        SnapshotCodec.writeHeader(to: &w, takenAt: takenAt, journalSegment: journalSegment, replicatedSequence: replicatedSequence)
    }

    /// Bytes so far (pins and streams), for progress logs and capacity estimates.
    public var byteCount: Int { w.bytes.count + streamBytes.bytes.count + circleBytes.bytes.count + settlementBytes.bytes.count + ackBytes.bytes.count + keptBytes.bytes.count }
    public var pinsWritten: Int { Int(pinCount) }

    public mutating func append(_ pin: Pin) {
        PinFields.write(pin, to: &w)
        PinFields.writeRange(pin, to: &w)
        pinCount += 1
    }

    public mutating func append(_ stream: PanicStream) {
        PanicFields.write(stream, to: &streamBytes)
        streamCount += 1
    }

    public mutating func append(_ circle: CheckinCircle) {
        CircleFields.write(circle, to: &circleBytes)
        CircleFields.writeSubscriptions(circle.subscriptions, to: &circleBytes)
        circleCount += 1
    }

    public mutating func append(_ settlement: NoticeSettlement) {
        NoticeFields.write(settlement, to: &settlementBytes)
        settlementCount += 1
    }

    public mutating func append(_ ack: NoticeAck) {
        NoticeFields.write(ack, to: &ackBytes)
        ackCount += 1
    }

    public mutating func append(_ answer: KeptAnswer) {
        KeptAnswerFields.write(answer, to: &keptBytes)
        keptCount += 1
    }

    /// The snapshot's bytes. The writer is left empty; append nothing after this.
    public mutating func finish() -> [UInt8] {
        w.bytes.append(contentsOf: streamBytes.bytes)
        streamBytes.bytes = []
        w.u32(circleCount)
        w.bytes.append(contentsOf: circleBytes.bytes)
        circleBytes.bytes = []
        w.u32(settlementCount)
        w.bytes.append(contentsOf: settlementBytes.bytes)
        settlementBytes.bytes = []
        w.u32(ackCount)
        w.bytes.append(contentsOf: ackBytes.bytes)
        ackBytes.bytes = []
        w.u32(keptCount)
        w.bytes.append(contentsOf: keptBytes.bytes)
        keptBytes.bytes = []
        w.patchU32(pinCount, at: Self.countsOffset)
        w.patchU32(streamCount, at: Self.countsOffset + 4)
        w.u32(CRC32C.checksum(w.bytes))
        var out: [UInt8] = []
        swap(&out, &w.bytes)
        return out
    }
}
