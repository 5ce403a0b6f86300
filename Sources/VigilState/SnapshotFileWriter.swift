import Glibc
import VigilCore

/// Writes a snapshot straight into its temporary file, a chunk at a time, so that making one
/// never holds the whole encoded snapshot in memory: the same bytes as `SnapshotWriter` (and
/// `SnapshotCodec.encode`) give for the same appends, in at most `chunkBytes` (plus one pin or
/// stream) of buffer.
///
/// Why: the periodic snapshot used to grow one `[UInt8]` to the whole snapshot (doubling as it
/// grew, so up to twice its size for a moment) and keep it until the file was written. With a
/// large map that, plus reading the previous snapshot back, was the daemon's peak RSS: about
/// twice its steady state (issue 28). Here the checksum is computed as the chunks go out; the
/// header's counts, known only at the end, are written over the placeholder then, and the
/// header's checksum is folded in with `CRC32C.combine`.
///
/// Order: pins (`append(_:)`, any number, e.g. a slice per loop turn), then streams (the same,
/// or in `appendRest`), then everything else at once (`appendRest`), then `finish`, which syncs the file and renames it into place as
/// `StateDirectory.writeSnapshot` does. A failed write is kept and reported by `finish`; the
/// appends after it do nothing. `abandon` removes the temporary file.
///
/// A reference type used by one thread at a time (the loop for the pins, then the snapshot
/// thread): no copy of its buffer is ever made.
public final class SnapshotFileWriter: @unchecked Sendable {
    /// Buffered bytes that trigger a write to the file.
    public static let chunkBytes = 1 << 20

    private let directory: StateDirectory
    private let segment: UInt64
    private let tempPath: String
    private var fd: Int32
    private let takenAt: Int64
    private let replicatedSequence: UInt64?
    private var buffer = StateWriter(capacity: SnapshotFileWriter.chunkBytes + 64 * 1024)
    /// The running (pre-inverted) CRC-32C of the bytes after the header written so far.
    private var bodyRegister: UInt32 = ~0
    private var bodyLength = 0
    private var pinCount: UInt32 = 0
    private var streamCount: UInt32 = 0
    private var failure: StateError?
    private var done = false

    public var pinsWritten: Int { Int(pinCount) }

    /// Opens (truncating) the temporary file of the snapshot for `segment` and writes the header
    /// with its counts still 0.
    public init(directory: StateDirectory, segment: UInt64, takenAt: Int64, replicatedSequence: UInt64? = nil) throws(StateError) {
        self.directory = directory
        self.segment = segment
        self.takenAt = takenAt
        self.replicatedSequence = replicatedSequence
        tempPath = directory.file(StateFileName.snapshotTemp(segment).name)
        fd = try StateFiles.open(tempPath, O_WRONLY | O_CREAT | O_TRUNC)
        var header = StateWriter()
        SnapshotCodec.writeHeader(to: &header, takenAt: takenAt, journalSegment: segment, replicatedSequence: replicatedSequence)
        write(header.bytes)
    }

    deinit {
        if fd >= 0 { Glibc.close(fd) }
    }

    public func append(_ pin: Pin) {
        PinFields.write(pin, to: &buffer)
        PinFields.writeRange(pin, to: &buffer)
        pinCount += 1
        flushIfFull()
    }

    /// A stream, after every pin (e.g. a slice per loop turn, as the pins).
    public func append(_ stream: PanicStream) {
        PanicFields.write(stream, to: &buffer)
        streamCount += 1
        flushIfFull()
    }

    /// Everything after the pins, in the file's order (`streams`: those not appended already).
    public func appendRest(streams: [PanicStream] = [], circles: [CheckinCircle] = [], settlements: [NoticeSettlement] = [],
                           acks: [NoticeAck] = [], kept: [KeptAnswer] = []) {
        for stream in streams { append(stream) }
        buffer.u32(UInt32(truncatingIfNeeded: circles.count))
        for circle in circles {
            CircleFields.write(circle, to: &buffer)
            CircleFields.writeSubscriptions(circle.subscriptions, to: &buffer)
            flushIfFull()
        }
        buffer.u32(UInt32(truncatingIfNeeded: settlements.count))
        for settlement in settlements {
            NoticeFields.write(settlement, to: &buffer)
            flushIfFull()
        }
        buffer.u32(UInt32(truncatingIfNeeded: acks.count))
        for ack in acks {
            NoticeFields.write(ack, to: &buffer)
            flushIfFull()
        }
        buffer.u32(UInt32(truncatingIfNeeded: kept.count))
        for answer in kept {
            KeptAnswerFields.write(answer, to: &buffer)
            flushIfFull()
        }
    }

    /// The counts and the checksum written, the file synced, renamed into place and the
    /// directory synced; returns the snapshot's size in bytes. On failure the temporary file is
    /// removed.
    public func finish() throws(StateError) -> Int {
        flush()
        var header = StateWriter()
        SnapshotCodec.writeHeader(to: &header, takenAt: takenAt, journalSegment: segment, replicatedSequence: replicatedSequence,
                                  pins: pinCount, streams: streamCount)
        let headerCRC = CRC32C.checksum(header.bytes)
        let crc = CRC32C.combine(headerCRC, ~bodyRegister, lengthB: bodyLength)
        var trailer = StateWriter()
        trailer.u32(crc)
        write(trailer.bytes)
        if failure == nil {
            // Over the placeholder counts (the descriptor's own offset, at the end, is not moved).
            let n = header.bytes.withUnsafeBytes { Glibc.pwrite(fd, $0.baseAddress!, $0.count, 0) }
            if n != header.bytes.count { failure = .system(operation: "pwrite", path: tempPath, errno: n < 0 ? errno : EIO) }
        }
        do throws(StateError) {
            if let failure { throw failure }
            try StateFiles.fsync(fd, path: tempPath)
            let closing = fd
            fd = -1
            try StateFiles.close(closing, path: tempPath)
            try StateFiles.rename(tempPath, to: directory.file(StateFileName.snapshot(segment).name))
        } catch {
            abandon()
            throw error
        }
        done = true
        try StateFiles.fsyncDirectory(directory.path)
        return header.bytes.count + bodyLength + SnapshotCodec.checksumBytes
    }

    /// Closes and removes the temporary file (a snapshot given up, or one that failed).
    public func abandon() {
        guard !done else { return }
        done = true
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
        _ = try? StateFiles.unlink(tempPath)
    }

    private func flushIfFull() {
        if buffer.bytes.count >= Self.chunkBytes { flush() }
    }

    /// The buffer to the file, folded into the body's checksum.
    private func flush() {
        guard !buffer.bytes.isEmpty else { return }
        bodyRegister = buffer.bytes.withUnsafeBytes { CRC32C.update(bodyRegister, $0) }
        bodyLength += buffer.bytes.count
        write(buffer.bytes)
        buffer.bytes.removeAll(keepingCapacity: true)
    }

    private func write(_ bytes: [UInt8]) {
        guard failure == nil, fd >= 0 else { return }
        var written = 0
        do throws(StateError) {
            try bytes.withStateBytes { (raw: UnsafeRawBufferPointer) throws(StateError) in
                try StateFiles.writeAll(fd, raw, path: tempPath, written: &written)
            }
        } catch {
            failure = error
        }
    }
}
