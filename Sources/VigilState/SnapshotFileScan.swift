import Glibc
import VigilCore

/// Reads what the cleanup after each snapshot needs from an older snapshot file (does it
/// verify? which panic streams does it hold?) a chunk at a time, without reading the whole
/// file into memory or decoding its pins: the previous snapshot is as large as the new one,
/// and reading and decoding it after every snapshot (`removeObsolete`, `scrub`) put a second
/// copy of the whole map in memory (issue 28).
enum SnapshotFileScan {
    static let chunkBytes = 1 << 20

    /// What `SnapshotCodec.verify` says of the file's bytes, reading it in chunks.
    static func verifies(_ path: String) -> Bool {
        guard let file = try? ChunkedFile(path) else { return false }
        return file.verifies()
    }

    /// The ids of the panic streams the snapshot holds, skipping over its pins; nil when the file
    /// does not verify or does not parse (the caller then decodes it the usual way).
    static func streamIDs(_ path: String) -> [StreamID]? {
        guard let file = try? ChunkedFile(path), file.verifies(), let version = file.version else { return nil }
        var file2 = file
        return try? file2.streamIDs(version: version)
    }

    /// A file read with `pread` through one buffer of `chunkBytes`.
    struct ChunkedFile {
        let fd: FileDescriptor
        let size: Int
        var window: [UInt8] = []
        var windowStart = 0

        final class FileDescriptor {
            let fd: Int32
            init(_ fd: Int32) { self.fd = fd }
            deinit { Glibc.close(fd) }
        }

        init(_ path: String) throws(StateError) {
            let raw = try StateFiles.open(path, O_RDONLY)
            fd = FileDescriptor(raw)
            var info = stat()
            guard fstat(raw, &info) == 0 else { throw .system(operation: "fstat", path: path, errno: errno) }
            size = Int(info.st_size)
        }

        /// Reads `count` bytes at `offset` into `into`; false if the file ends first.
        func read(at offset: Int, count: Int, into buffer: inout [UInt8]) -> Bool {
            buffer.removeAll(keepingCapacity: true)
            guard offset >= 0, count >= 0, offset + count <= size else { return false }
            buffer = [UInt8](repeating: 0, count: count)
            var filled = 0
            while filled < count {
                let n = buffer.withUnsafeMutableBytes { Glibc.pread(fd.fd, $0.baseAddress! + filled, count - filled, off_t(offset + filled)) }
                if n > 0 {
                    filled += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    return false
                }
            }
            return true
        }

        /// The header's version when magic, version, flags and length are right (the checks of
        /// `SnapshotCodec.checkHeader`, without the checksum).
        var version: UInt16? {
            var prefix: [UInt8] = []
            guard read(at: 0, count: min(size, 64), into: &prefix) else { return nil }
            return prefix.withUnsafeBytes { raw -> UInt16? in
                var r = StateReader(raw, what: "snapshot header")
                guard let found = try? SnapshotCodec.checkHeader(&r, verifyingChecksum: false) else { return nil }
                // checkHeader checked the prefix's length; the file's is what matters.
                return size >= SnapshotCodec.headerBytes(version: found) + SnapshotCodec.checksumBytes ? found : nil
            }
        }

        /// The header checks and the checksum, as `SnapshotCodec.verify`.
        func verifies() -> Bool {
            guard version != nil else { return false }
            let payloadEnd = size - SnapshotCodec.checksumBytes
            var register: UInt32 = ~0
            var chunk: [UInt8] = []
            var offset = 0
            while offset < payloadEnd {
                let count = min(SnapshotFileScan.chunkBytes, payloadEnd - offset)
                guard read(at: offset, count: count, into: &chunk) else { return false }
                register = chunk.withUnsafeBytes { CRC32C.update(register, $0) }
                offset += count
            }
            guard read(at: payloadEnd, count: 4, into: &chunk) else { return false }
            let stored = UInt32(chunk[0]) | UInt32(chunk[1]) << 8 | UInt32(chunk[2]) << 16 | UInt32(chunk[3]) << 24
            return stored == ~register
        }

        /// A little-endian u32 at `offset`, through the window.
        mutating func u32(at offset: Int) -> UInt32? {
            if offset < windowStart || offset + 4 > windowStart + window.count {
                windowStart = offset
                let count = min(SnapshotFileScan.chunkBytes, size - offset)
                guard count >= 4, read(at: offset, count: count, into: &window) else { return nil }
            }
            let i = offset - windowStart
            return UInt32(window[i]) | UInt32(window[i + 1]) << 8 | UInt32(window[i + 2]) << 16 | UInt32(window[i + 3]) << 24
        }

        /// Skips the pins (their fixed fields, three strings, the votes and, since version 3, the
        /// range), then reads the streams from the bytes after them.
        mutating func streamIDs(version: UInt16) throws(StateError) -> [StreamID]? {
            guard let pinCount = u32(at: SnapshotCodec.countsOffset), let streamCount = u32(at: SnapshotCodec.countsOffset + 4) else {
                return nil
            }
            let payloadEnd = size - SnapshotCodec.checksumBytes
            let fixedBytes = PinFields.minimumBytes - 3 * 4 - 4
            var offset = SnapshotCodec.headerBytes(version: version)
            for _ in 0..<pinCount {
                offset += fixedBytes
                for _ in 0..<3 {
                    guard let length = u32(at: offset) else { return nil }
                    offset += 4 + Int(length)
                }
                guard let votes = u32(at: offset) else { return nil }
                offset += 4 + Int(votes) * PinFields.voteBytes
                if version >= 3 { offset += PinFields.rangeBytes }
                guard offset <= payloadEnd else { return nil }
            }
            // The streams a window at a time, each decoded and dropped at once (only its id is
            // kept): the stream section can be most of the file (long location histories).
            var ids: [StreamID] = []
            ids.reserveCapacity(Int(streamCount))
            var windowBytes = SnapshotFileScan.chunkBytes
            var bytes: [UInt8] = []
            var start = offset
            var loaded = false
            while ids.count < Int(streamCount) {
                if !loaded {
                    guard read(at: start, count: min(windowBytes, payloadEnd - start), into: &bytes) else { return nil }
                    loaded = true
                }
                let atEnd = start + bytes.count == payloadEnd
                let step = bytes.withUnsafeBytes { raw -> (consumed: Int, id: StreamID?, truncated: Bool) in
                    var r = StateReader(raw, offset: offset - start, what: "panic stream")
                    do throws(StateError) {
                        let stream = try PanicFields.readStream(&r, version: version)
                        return (r.offset - (offset - start), stream.id, false)
                    } catch {
                        // The file verified, so short of its end any failure is the window's end
                        // (a count checked against the bytes left, or a field cut off).
                        return (0, nil, !atEnd)
                    }
                }
                if let id = step.id {
                    ids.append(id)
                    offset += step.consumed
                } else if step.truncated {
                    // The stream runs past the window: the next window starts at it, larger if it
                    // already started at the window's start.
                    if offset == start { windowBytes *= 2 }
                    start = offset
                    loaded = false
                } else {
                    return nil
                }
            }
            return ids
        }
    }
}
