import Glibc

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

    /// strerror's text for `code`.
    static func errnoText(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "unknown error" }
        return String(cString: text)
    }

    static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
    }
}
