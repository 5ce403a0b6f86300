/// What `readJournal` found, for the startup log.
public struct JournalReadReport: Sendable {
    /// One segment read.
    public struct Segment: Sendable {
        public var segment: UInt64
        public var file: String
        public var size: Int
        /// Bytes up to the end of the last good record (header included).
        public var validLength: Int
        public var records: Int
        /// Why reading stopped before the end of the file, if it did.
        public var stop: String?
    }

    /// A torn tail cut off the last segment.
    public struct TailCut: Sendable, Equatable {
        public var file: String
        /// The file's size before, and the bytes kept.
        public var size: Int
        public var keptBytes: Int
    }

    /// The segments read, in order.
    public var segments: [Segment] = []
    /// Records fed to the body.
    public var records = 0
    /// Set when the last segment ended in a torn write (and was truncated if repair was asked).
    public var truncatedTail: TailCut?
    /// Set when replay stopped at damage before the end of the journal.
    public var corruption: String?
    /// The highest segment present in the directory, whether read or not.
    public var lastSegment: UInt64?

    init(lastSegment: UInt64?) {
        self.lastSegment = lastSegment
    }
}
