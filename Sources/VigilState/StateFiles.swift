import Glibc
import VigilCore

/// The few system calls the state files need, each retried on EINTR and failing with a
/// `StateError.system` that names the call and the path. Nothing here keeps state between calls.
enum StateFiles {
    static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws(StateError) -> Int32 {
        while true {
            let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 {
                // A file re-used for writing gets `mode` too, whatever it had before (O_CREAT's
                // mode only applies to a new file): state files hold locations and are 0600.
                if flags & (O_WRONLY | O_RDWR) != 0 && fchmod(fd, mode) != 0 {
                    let code = errno
                    Glibc.close(fd)
                    throw .system(operation: "fchmod", path: path, errno: code)
                }
                return fd
            }
            if errno != EINTR { throw .system(operation: "open", path: path, errno: errno) }
        }
    }

    /// Closes `fd`; a failure is reported (on some filesystems close reports a failed write-back).
    static func close(_ fd: Int32, path: String) throws(StateError) {
        // Not retried on EINTR: on Linux the descriptor is released whatever close returns.
        if Glibc.close(fd) != 0 && errno != EINTR { throw .system(operation: "close", path: path, errno: errno) }
    }

    /// Writes all of `bytes`, going on after short writes. On failure, `written` says how much
    /// reached the kernel before it.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String, written: inout Int) throws(StateError) {
        while written < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + written, bytes.count - written)
            if n > 0 {
                written += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                throw .system(operation: "write", path: path, errno: n < 0 ? errno : EIO)
            }
        }
    }

    static func fsync(_ fd: Int32, path: String) throws(StateError) {
        while Glibc.fsync(fd) != 0 {
            if errno != EINTR { throw .system(operation: "fsync", path: path, errno: errno) }
        }
    }

    /// Makes the directory's entries durable (a rename or a new file is not, until this).
    static func fsyncDirectory(_ path: String) throws(StateError) {
        let fd = try open(path, O_RDONLY | O_DIRECTORY)
        defer { Glibc.close(fd) }
        try fsync(fd, path: path)
    }

    /// The whole file. Sized by fstat, then read to the end (a file that grows meanwhile is read
    /// as far as it goes).
    static func readAll(_ path: String) throws(StateError) -> [UInt8] {
        let fd = try open(path, O_RDONLY)
        defer { Glibc.close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .system(operation: "fstat", path: path, errno: errno) }
        var bytes = [UInt8](repeating: 0, count: max(Int(info.st_size), 0))
        var filled = 0
        while filled < bytes.count {
            let count = bytes.count
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, count - filled) }
            if n > 0 {
                filled += n
            } else if n == 0 {
                break
            } else if errno != EINTR {
                throw .system(operation: "read", path: path, errno: errno)
            }
        }
        if filled < bytes.count {
            bytes.removeSubrange(filled...)
            return bytes
        }
        // Read on in case the file grew, through a small buffer: growing `bytes` to probe for
        // the end (as this did) held twice the file in memory for a moment, which for a large
        // snapshot read after each one is written was a good part of the snapshot's peak RSS.
        var extra = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = extra.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n > 0 {
                bytes.append(contentsOf: extra[0..<n])
            } else if n == 0 {
                break
            } else if errno != EINTR {
                throw .system(operation: "read", path: path, errno: errno)
            }
        }
        return bytes
    }

    /// Names in `directory`, without "." and "..", in no particular order.
    static func list(_ directory: String) throws(StateError) -> [String] {
        guard let dir = opendir(directory) else { throw .system(operation: "opendir", path: directory, errno: errno) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    static func unlink(_ path: String) throws(StateError) {
        if Glibc.unlink(path) != 0 && errno != ENOENT { throw .system(operation: "unlink", path: path, errno: errno) }
    }

    static func rename(_ from: String, to: String) throws(StateError) {
        if Glibc.rename(from, to) != 0 { throw .system(operation: "rename", path: "\(from) → \(to)", errno: errno) }
    }

    /// Cuts the file to `length` bytes and makes the cut durable.
    static func truncate(_ path: String, to length: Int) throws(StateError) {
        let fd = try open(path, O_WRONLY)
        defer { Glibc.close(fd) }
        guard ftruncate(fd, off_t(length)) == 0 else { throw .system(operation: "ftruncate", path: path, errno: errno) }
        try fsync(fd, path: path)
    }

    /// Whether `path` exists and is a directory; nil when it does not exist.
    static func isDirectory(_ path: String) throws(StateError) -> Bool? {
        var info = stat()
        if stat(path, &info) == 0 { return info.st_mode & S_IFMT == S_IFDIR }
        if errno == ENOENT { return nil }
        throw .system(operation: "stat", path: path, errno: errno)
    }

    /// Sets `path`'s permission bits.
    static func setMode(_ path: String, _ mode: mode_t) throws(StateError) {
        if chmod(path, mode) != 0 { throw .system(operation: "chmod", path: path, errno: errno) }
    }

    /// Creates `path` (mode `mode`) and any missing parents (0755), like `mkdir -p`.
    static func makeDirectory(_ path: String, mode: mode_t) throws(StateError) {
        switch try isDirectory(path) {
        case true?: return
        case false?: throw .notADirectory(path: path)
        case nil: break
        }
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try makeDirectory(String(path[..<slash]), mode: 0o755)
        }
        if mkdir(path, mode) != 0 {
            let code = errno
            // Lost a race with another creator: fine if what exists now is a directory.
            if code == EEXIST, try isDirectory(path) == true { return }
            throw .system(operation: "mkdir", path: path, errno: code)
        }
    }
}

/// The names of the files in a state directory; the segment is 16 lowercase hex digits, so that
/// names sort in segment order and a listing reads in order.
enum StateFileName: Equatable {
    case snapshot(UInt64)
    case snapshotTemp(UInt64)
    case journal(UInt64)
    /// A journal segment being rewritten without removed streams (see `scrub`), renamed over it.
    case journalTemp(UInt64)

    init?(_ name: String) {
        if let n = Self.segment(name, prefix: "snapshot-", suffix: ".vgs") {
            self = .snapshot(n)
        } else if let n = Self.segment(name, prefix: "snapshot-", suffix: ".vgs.tmp") {
            self = .snapshotTemp(n)
        } else if let n = Self.segment(name, prefix: "journal-", suffix: ".vgj") {
            self = .journal(n)
        } else if let n = Self.segment(name, prefix: "journal-", suffix: ".vgj.tmp") {
            self = .journalTemp(n)
        } else {
            return nil
        }
    }

    var name: String {
        switch self {
        case .snapshot(let n): return "snapshot-\(Self.hex(n)).vgs"
        case .snapshotTemp(let n): return "snapshot-\(Self.hex(n)).vgs.tmp"
        case .journal(let n): return "journal-\(Self.hex(n)).vgj"
        case .journalTemp(let n): return "journal-\(Self.hex(n)).vgj.tmp"
        }
    }

    static func hex(_ n: UInt64) -> String {
        Hex.lowercase(n)
    }

    private static func segment(_ name: String, prefix: String, suffix: String) -> UInt64? {
        let utf8 = Array(name.utf8)
        let p = Array(prefix.utf8), s = Array(suffix.utf8)
        guard utf8.count == p.count + 16 + s.count, utf8.starts(with: p), utf8.suffix(s.count).elementsEqual(s) else { return nil }
        var n: UInt64 = 0
        for byte in utf8[p.count..<(p.count + 16)] {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): n = n << 4 | UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): n = n << 4 | UInt64(byte - UInt8(ascii: "a") + 10)
            default: return nil
            }
        }
        return n
    }
}
