import Glibc

/// An exclusive lock on a state directory, held for as long as this object lives.
///
/// Two daemons appending to the same journal would interleave records and each believe its
/// own state; the lock makes the second one fail at startup instead. flock on a `lock` file:
/// released by the kernel when the process dies, so a kill -9 leaves no stale lock behind.
public final class StateLock {
    public let path: String
    private let fd: Int32

    public init(_ directory: StateDirectory) throws(StateError) {
        path = directory.file("lock")
        fd = try StateFiles.open(path, O_RDWR | O_CREAT)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            Glibc.close(fd)
            if code == EWOULDBLOCK { throw .locked(path: directory.path) }
            throw .system(operation: "flock", path: path, errno: code)
        }
    }

    deinit {
        Glibc.close(fd)
    }
}
