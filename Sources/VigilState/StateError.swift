import Glibc
import VigilCore

/// Everything that can go wrong reading or writing durable state, each with a message for the
/// log that names the file or field and, for system calls, the call and its errno text.
public enum StateError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes end inside `what`, at byte offset `offset`.
    case truncated(what: String, offset: Int)
    /// The file does not start with the magic bytes of a `kind` ("snapshot", "journal").
    case badMagic(kind: String)
    /// Written by a format version this build does not read.
    case unsupportedVersion(kind: String, found: UInt16, supported: UInt16)
    /// The stored checksum does not match the content.
    case checksumMismatch(kind: String, stored: UInt32, computed: UInt32)
    /// A field holds a value the format does not allow (an out-of-range count, an unknown enum
    /// code, invalid UTF-8, a stream whose parts contradict each other…).
    case invalid(what: String, offset: Int, reason: String)
    /// A system call failed: `operation` is the call, `path` what it was called on.
    case system(operation: String, path: String, errno: Int32)
    /// `path` exists but is not a directory.
    case notADirectory(path: String)
    /// A journal that cannot be replayed past some point (damage before its last segment, a
    /// missing segment, a record this build cannot read). `readJournal` reports such damage in
    /// `JournalReadReport.corruption` rather than throwing; this case is for a caller that
    /// refuses to start on it.
    case journalCorrupt(String)
    /// Another process holds the state directory's lock.
    case locked(path: String)

    public var description: String {
        switch self {
        case .truncated(let what, let offset):
            return "data ends inside \(what) at byte \(offset)"
        case .badMagic(let kind):
            return "not a Vigil \(kind) file (wrong magic bytes)"
        case .unsupportedVersion(let kind, let found, let supported):
            return "\(kind) format version \(found) is not supported (this build reads version \(supported))"
        case .checksumMismatch(let kind, let stored, let computed):
            return "\(kind) checksum mismatch (stored \(Self.hex(stored)), computed \(Self.hex(computed))): the file is damaged"
        case .invalid(let what, let offset, let reason):
            return "invalid \(what) at byte \(offset): \(reason)"
        case .system(let operation, let path, let code):
            return "\(operation) \(path): \(Self.errnoText(code)) (errno \(code))"
        case .notADirectory(let path):
            return "\(path) exists but is not a directory"
        case .journalCorrupt(let reason):
            return "journal damaged: \(reason)"
        case .locked(let path):
            return "state directory \(path) is locked by another process (is another vigild running with it?)"
        }
    }

    /// A write that failed for want of room or because the device failed (ENOSPC, EDQUOT, EFBIG,
    /// EIO): the daemon stops recording changes and waits for the disk, rather than stopping.
    /// Anything else (permissions, a lock held, damage) means the directory itself is wrong.
    public var isStorageExhaustion: Bool {
        guard case .system(_, _, let code) = self else { return false }
        return code == ENOSPC || code == EDQUOT || code == EFBIG || code == EIO
    }

    /// A short name for the metrics (`vigil_storage_errors_total{kind}`) and the log: never a path.
    public var storageErrorKind: String {
        guard case .system(_, _, let code) = self else { return "other" }
        switch code {
        case ENOSPC: return "no_space"
        case EDQUOT: return "quota"
        case EFBIG: return "file_too_big"
        case EIO: return "io"
        default: return "other"
        }
    }

    /// The failing call and its errno text, without the path (for the log line of an outage).
    public var withoutPath: String {
        guard case .system(let operation, _, let code) = self else { return description }
        return "\(operation): \(Self.errnoText(code)) (errno \(code))"
    }

    /// strerror's text for `code`.
    static func errnoText(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "unknown error" }
        return String(cString: text)
    }

    static func hex(_ value: UInt32) -> String {
        "0x" + Hex.lowercase(value)
    }
}
