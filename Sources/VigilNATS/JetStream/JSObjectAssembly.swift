/// The rules of reading one object back, as a value: its meta says how many chunks and bytes;
/// the chunks go in as they arrive, in stream order, then the end of the subject; what to do
/// comes out. No I/O and no hashing
/// (the connection layer hashes what it hands in and compares with `info.digest` at the end).
///
/// Memory is bounded by the meta's size, which the caller has checked against its maximum before
/// the first chunk: nothing beyond `info.size` bytes or `info.chunks` chunks is ever kept, and a
/// chunk over `maxChunkBytes` is refused before it is copied.
public struct JSObjectAssembly: Sendable {
    public let info: JSObjectInfo
    public let maxChunkBytes: Int
    public private(set) var bytes: [UInt8] = []
    public private(set) var chunksReceived = 0

    public enum Verdict: Equatable, Sendable {
        /// Keep reading (to the end of the chunk subject, even once every announced chunk is in:
        /// the official clients read it to its end, so more there is not this object).
        case more
        /// Every chunk is in, none more, and the sizes add up: check the digest.
        case complete
        /// The stream holds something other than what the meta describes.
        case corrupt(String)
        /// The stream has no more chunks for the object, but the meta announced more (the object
        /// was replaced and its chunks purged while it was read, or they were lost).
        case incomplete(String)
    }

    /// Starts reading `info`'s object; the caller has checked `info.size` against its maximum.
    public init(info: JSObjectInfo, maxChunkBytes: Int) {
        self.info = info
        self.maxChunkBytes = maxChunkBytes
        bytes.reserveCapacity(Int(clamping: info.size))
    }

    /// Whether every announced chunk and byte is in.
    public var isComplete: Bool { chunksReceived == info.chunks && UInt64(bytes.count) == info.size }

    /// The next chunk of the subject, in stream order: `.more`, or `.corrupt` with what was wrong.
    public mutating func add(_ chunk: [UInt8]) -> Verdict {
        guard chunk.count <= maxChunkBytes else {
            return .corrupt("a chunk of \(chunk.count) bytes, above the \(maxChunkBytes) allowed")
        }
        guard chunksReceived < info.chunks else { return .corrupt("more than the \(info.chunks) chunks the meta announces") }
        guard UInt64(bytes.count) + UInt64(chunk.count) <= info.size else {
            return .corrupt("more than the \(info.size) bytes the meta announces")
        }
        bytes.append(contentsOf: chunk)
        chunksReceived += 1
        if chunksReceived == info.chunks && UInt64(bytes.count) != info.size {
            return .corrupt("\(info.chunks) chunks hold \(bytes.count) bytes, not the \(info.size) the meta announces")
        }
        return .more
    }

    /// The subject has no more chunks: `.complete`, or `.incomplete` with how many were there.
    public func finish() -> Verdict {
        isComplete ? .complete : .incomplete("the stream holds \(chunksReceived) of the \(info.chunks) chunks the meta announces")
    }

    /// Hands the bytes over (the assembly is spent).
    public mutating func takeBytes() -> [UInt8] {
        defer { bytes = [] }
        return bytes
    }
}

/// What a Vigil node says about a snapshot it publishes, kept in the object's `metadata` (so that
/// `nats object info` shows it) under these keys, as decimal strings:
/// - `cluster_sequence`: the last stream sequence the snapshot includes (consume from the next);
/// - `node_id`: the node that took it;
/// - `format_version`: the snapshot codec's version (a node refuses one it cannot read);
/// - `taken_at_ms`: when it was taken, Unix milliseconds of that node's clock.
public struct SnapshotMetadata: Equatable, Sendable {
    public var replicatedSequence: UInt64
    public var nodeID: String
    public var formatVersion: Int
    public var takenAtMs: Int64

    public init(replicatedSequence: UInt64, nodeID: String, formatVersion: Int, takenAtMs: Int64) {
        self.replicatedSequence = replicatedSequence
        self.nodeID = nodeID
        self.formatVersion = formatVersion
        self.takenAtMs = takenAtMs
    }

    static let keys = (sequence: "cluster_sequence", node: "node_id", format: "format_version", taken: "taken_at_ms")

    /// The node id's bound (ids are short names; this only keeps a hostile meta small).
    public static let maxNodeIDBytes = 128

    public var entries: [String: String] {
        [Self.keys.sequence: String(replicatedSequence), Self.keys.node: nodeID,
         Self.keys.format: String(formatVersion), Self.keys.taken: String(takenAtMs)]
    }

    /// Reads the entries back; nil when one is missing or not a number (not a Vigil snapshot).
    /// Other entries are ignored.
    public init?(entries: [String: String]) {
        guard let sequence = entries[Self.keys.sequence].flatMap({ UInt64($0) }),
              let node = entries[Self.keys.node], node.utf8.count <= Self.maxNodeIDBytes,
              let format = entries[Self.keys.format].flatMap({ Int($0) }),
              let taken = entries[Self.keys.taken].flatMap({ Int64($0) }) else { return nil }
        self.init(replicatedSequence: sequence, nodeID: node, formatVersion: format, takenAtMs: taken)
    }
}
