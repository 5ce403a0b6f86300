import Glibc

/// The application server's VAPID key on disk: one P-256 private key in PEM, readable only by its
/// owner. `create` is what `vigild push keygen FILE` runs once; the daemon `read`s it at start.
///
/// The key is the identity every subscription is bound to (browsers subscribe with its public
/// key), so `create` never replaces a file: losing the old key would silently end every
/// subscription. The file appears complete or not at all: written to a temporary name, made
/// durable, then linked to its name (`link` fails where a file exists, where `rename` would
/// replace it), and the directory made durable.
public enum VAPIDKeyFile {
    /// A PEM private key is a few hundred bytes; the bound keeps a wrong path from reading much.
    static let maxByteCount = 16 * 1024

    /// The key in `path` (PKCS#8 or SEC1 PEM). Like the cluster's nkey seed, a file that every
    /// user of the machine may read or write is refused (mode 600, or 640 for a service group), as
    /// is anything but a regular file.
    public static func read(_ path: String) throws(VAPIDError) -> P256PrivateKey {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .file(operation: "open \(path)", errno: errno) }
        defer { Glibc.close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .file(operation: "fstat \(path)", errno: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else { throw .notPrivate(path: path, why: "not a regular file") }
        guard info.st_mode & (S_IROTH | S_IWOTH) == 0 else {
            throw .notPrivate(path: path, why: "readable or writable by every user (mode \(String(info.st_mode & 0o777, radix: 8)))")
        }
        var bytes = [UInt8](repeating: 0, count: maxByteCount + 1)
        // The buffer held a private key: cleared whatever the outcome.
        defer { bytes.withUnsafeMutableBytes { _ = memset($0.baseAddress!, 0, $0.count) } }
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .file(operation: "read \(path)", errno: errno)
            }
            if n == 0 { break }
            count += n
        }
        guard count <= maxByteCount else { throw .file(operation: "read \(path) (more than \(maxByteCount) bytes)", errno: EFBIG) }
        do { return try P256PrivateKey(pem: String(decoding: bytes[..<count], as: UTF8.self)) } catch { throw .key(error) }
    }

    /// Generates a key and writes it to `path` (mode 0600) as PKCS#8 PEM; refuses when `path` exists.
    public static func create(_ path: String) throws(VAPIDError) -> P256PrivateKey {
        if access(path, F_OK) == 0 { throw .fileExists(path) }
        let key: P256PrivateKey
        let pem: String
        do {
            key = try P256PrivateKey.generate()
            pem = try key.pemPKCS8()
        } catch { throw .key(error) }
        let temporary = "\(path).tmp-\(getpid())"
        try writeDurably(Array(pem.utf8), to: temporary)
        if link(temporary, path) != 0 {
            let code = errno
            unlink(temporary)
            if code == EEXIST { throw .fileExists(path) }
            throw .file(operation: "link \(temporary) → \(path)", errno: code)
        }
        unlink(temporary)
        try syncDirectory(of: path)
        return key
    }

    /// `bytes` into a new file `path` (mode 0600, exclusive), fsynced; removed again on failure.
    private static func writeDurably(_ bytes: [UInt8], to path: String) throws(VAPIDError) {
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .file(operation: "open \(path)", errno: errno) }
        var failure: VAPIDError?
        // The umask can only take bits away from 0600; fchmod makes the mode exactly 0600 anyway.
        if fchmod(fd, 0o600) != 0 { failure = .file(operation: "fchmod \(path)", errno: errno) }
        var written = 0
        while failure == nil, written < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
            if n < 0 {
                if errno != EINTR { failure = .file(operation: "write \(path)", errno: errno) }
            } else {
                written += n
            }
        }
        if failure == nil, fsync(fd) != 0 { failure = .file(operation: "fsync \(path)", errno: errno) }
        if Glibc.close(fd) != 0, failure == nil { failure = .file(operation: "close \(path)", errno: errno) }
        if let failure {
            unlink(path)
            throw failure
        }
    }

    /// fsync of `path`'s directory, so the new name survives a crash.
    private static func syncDirectory(of path: String) throws(VAPIDError) {
        let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        let fd = Glibc.open(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .file(operation: "open \(directory)", errno: errno) }
        defer { Glibc.close(fd) }
        guard fsync(fd) == 0 else { throw .file(operation: "fsync \(directory)", errno: errno) }
    }
}
