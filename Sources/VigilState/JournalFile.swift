import Glibc

/// One journal segment open for appending.
///
/// Three steps, so the server chooses when each cost is paid: `append` encodes into a memory
/// buffer (cheap, on the loop thread if wanted), `write` hands the buffer to the kernel (one
/// write call for many records), `sync` makes it durable (fdatasync: the one slow step; group
/// commit = many records per sync). A write is acknowledged to a client only after the `sync`
/// that covers it.
///
/// Opened O_APPEND, so every write lands at the end even after a truncation. Not thread-safe:
/// one thread at a time (the persistence thread) uses it.
public final class JournalFile {
    public let segment: UInt64
    public let path: String
    private var fd: Int32
    private var buffer: [UInt8] = []
    /// Bytes handed to the kernel, header included (the file's size as far as this writer knows).
    public private(set) var writtenBytes: Int

    /// Opens (creating if needed, mode 0600) segment `segment` in `directory`. A new or empty
    /// file gets the segment header first; a file shorter than a header (its creation was cut
    /// short) holds no record and is started again. A new file's name is made durable at once
    /// (directory fsync): records synced into a file whose name a crash loses would be lost too.
    init(directory: String, segment: UInt64) throws(StateError) {
        self.segment = segment
        path = directory + "/" + StateFileName.journal(segment).name
        var created = true
        var opened: Int32
        do throws(StateError) {
            opened = try StateFiles.open(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL)
        } catch .system(_, _, EEXIST) {
            created = false
            opened = try StateFiles.open(path, O_WRONLY | O_APPEND)
        }
        fd = opened
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw .system(operation: "fstat", path: path, errno: code)
        }
        writtenBytes = Int(info.st_size)
        if writtenBytes < JournalCodec.headerBytes {
            if writtenBytes > 0 {
                guard ftruncate(fd, 0) == 0 else {
                    let code = errno
                    Glibc.close(fd)
                    throw .system(operation: "ftruncate", path: path, errno: code)
                }
                writtenBytes = 0
            }
            buffer = JournalCodec.header(segment: segment)
        }
        if created {
            do throws(StateError) {
                try StateFiles.fsyncDirectory(directory)
            } catch {
                Glibc.close(fd)
                throw error
            }
        }
    }

    deinit {
        if fd >= 0 { Glibc.close(fd) }
    }

    /// Bytes appended but not yet written.
    public var pendingBytes: Int { buffer.count }

    /// Appends framed record bytes (from `JournalCodec.append`), to be written by `write`.
    public func append(_ bytes: [UInt8]) {
        buffer.append(contentsOf: bytes)
    }

    /// Encodes and appends one record.
    public func append(_ record: JournalRecord) {
        JournalCodec.append(record, to: &buffer)
    }

    /// Hands everything appended to the kernel. On failure (ENOSPC, EIO) the bytes not written
    /// stay buffered, so a later `write` continues exactly where this one stopped and no record
    /// is split by a gap.
    public func write() throws(StateError) {
        guard !buffer.isEmpty else { return }
        guard fd >= 0 else { throw .system(operation: "write", path: path, errno: EBADF) }
        var written = 0
        let descriptor = fd, path = path
        let result: Result<Void, StateError> = buffer.withUnsafeBytes { raw in
            Result { () throws(StateError) in try StateFiles.writeAll(descriptor, raw, path: path, written: &written) }
        }
        writtenBytes += written
        if written == buffer.count {
            buffer.removeAll(keepingCapacity: true)
        } else if written > 0 {
            buffer.removeFirst(written)
        }
        try result.get()
    }

    /// Makes everything written so far durable (fdatasync: the file's size is flushed with its
    /// data, so appended records are found after a crash).
    ///
    /// After a failure do not retry and trust the next success: the kernel may have dropped the
    /// dirty pages and reports the error once. Treat the segment as lost from that record on:
    /// stop acknowledging, and start a new segment with a fresh snapshot (or stop the daemon).
    public func sync() throws(StateError) {
        guard fd >= 0 else { throw .system(operation: "fdatasync", path: path, errno: EBADF) }
        while fdatasync(fd) != 0 {
            if errno != EINTR { throw .system(operation: "fdatasync", path: path, errno: errno) }
        }
    }

    /// Gives the segment up after a failed write or sync: what is buffered is dropped, the file
    /// is cut back to `length` (the bytes whose records were acknowledged), so that no record the
    /// server refused is replayed at the next start, and closed without a sync. Returns whether
    /// the cut worked (ftruncate needs no free space, but the device may have failed).
    @discardableResult
    public func abandon(keeping length: Int) -> Bool {
        buffer.removeAll()
        guard fd >= 0 else { return false }
        defer {
            Glibc.close(fd)
            fd = -1
        }
        guard ftruncate(fd, off_t(length)) == 0 else { return false }
        writtenBytes = length
        // The cut itself reaches the disk only with a sync; after an I/O error that may fail too,
        // and then a power loss could bring the refused records back (docs/DURABILITY.md).
        return fdatasync(fd) == 0
    }

    /// Writes what is buffered, syncs it and closes the file. Further calls throw EBADF.
    public func close() throws(StateError) {
        guard fd >= 0 else { return }
        defer { fd = -1 }
        do throws(StateError) {
            try write()
            try sync()
        } catch {
            Glibc.close(fd)
            throw error
        }
        try StateFiles.close(fd, path: path)
    }
}

extension StateDirectory {
    /// Opens journal segment `segment` for appending (see `JournalFile.init`).
    public func openSegment(_ segment: UInt64) throws(StateError) -> JournalFile {
        try JournalFile(directory: path, segment: segment)
    }
}
