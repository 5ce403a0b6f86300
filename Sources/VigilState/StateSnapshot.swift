import VigilCore

/// Everything durable at one moment: the pins and the panic streams, and the journal segment
/// that continues from here (records written after the snapshot was taken go to segments
/// `journalSegment`, `journalSegment + 1`, …).
public struct StateSnapshot: Sendable {
    /// When it was taken (unix ms), for the log and the inspector.
    public var takenAt: Int64
    /// The first journal segment whose records are not in this snapshot.
    public var journalSegment: UInt64
    /// In creation order (`Pin.sequence`), each with its votes and sequence.
    public var pins: [Pin]
    /// Ordered by id; owners and watchers are not part of the state.
    public var streams: [PanicStream]
    /// Check-in circles, ordered by id (snapshot version 4 and later).
    public var circles: [CheckinCircle]
    /// Notices' deliveries that are done, by circle (snapshot version 7 and later).
    public var settlements: [NoticeSettlement]
    /// Notices acknowledged, by circle, oldest first (snapshot version 7 and later).
    public var acks: [NoticeAck]
    /// For a cluster node, the last sequence of the replicated stream whose change this snapshot
    /// includes (a node restoring it consumes from the next one); nil for a standalone node
    /// (snapshot version 5 and later; older versions read as nil). 0 is a cluster node that had
    /// applied nothing yet, not the same as nil.
    public var replicatedSequence: UInt64?
    /// Answers kept for idempotency keys, oldest first (snapshot version 8 and later).
    public var keptAnswers: [KeptAnswer]

    public init(takenAt: Int64, journalSegment: UInt64, pins: [Pin], streams: [PanicStream], circles: [CheckinCircle] = [],
                settlements: [NoticeSettlement] = [], acks: [NoticeAck] = [], replicatedSequence: UInt64? = nil,
                keptAnswers: [KeptAnswer] = []) {
        self.keptAnswers = keptAnswers
        self.settlements = settlements
        self.acks = acks
        self.takenAt = takenAt
        self.journalSegment = journalSegment
        self.pins = pins
        self.streams = streams
        self.circles = circles
        self.replicatedSequence = replicatedSequence
    }

    /// The state of two hubs. Call it on copies (copy-on-write makes copying a hub O(1)) so
    /// the export and the encode can run on a writer thread while the loop thread goes on.
    public init(takenAt: Int64, journalSegment: UInt64, map: MapHub, panic: PanicHub, checkin: CheckinHub? = nil,
                replicatedSequence: UInt64? = nil) {
        self.init(takenAt: takenAt, journalSegment: journalSegment, pins: map.exportPins(), streams: panic.exportStreams(),
                  circles: checkin?.exportCircles() ?? [], settlements: checkin?.exportSettlements() ?? [],
                  acks: checkin?.exportAcks() ?? [],
                  replicatedSequence: replicatedSequence)
    }
}
