import Glibc
import Logging

/// vigild's log lines: one event per line, logfmt (`key=value`, values quoted when they need it),
/// written to stderr with one `write(2)` per line.
///
///     ts=2026-11-24T03:10:00.123Z level=info msg="listening on 127.0.0.1:8080" echo=false
///
/// Under systemd (stderr is the journal stream named by `$JOURNAL_STREAM`) each line starts with
/// its syslog priority instead of a timestamp (`<6>msg=…`): journald keeps the level as the
/// entry's PRIORITY and adds its own time.
///
/// What is never logged (at any level) is the callers' business, not this handler's: no client
/// address, token, session id, stream id or coordinate is passed to a logger (docs/OPERATIONS.md;
/// the end-to-end suite scans a debug-level run for them).
public struct LogfmtHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    /// Prefix lines with `<priority>` and omit the timestamp (stderr is journald's stream).
    public var journald: Bool
    /// Where lines go (stderr).
    private let fd: Int32

    public init(level: Logger.Level = .info, journald: Bool = Self.stderrIsJournal(), fd: Int32 = 2) {
        self.logLevel = level
        self.journald = journald
        self.fd = fd
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { _, new in new } }
        if let extra = event.metadata { all.merge(extra) { _, new in new } }
        var line = Self.format(level: event.level, message: event.message.description, metadata: all,
                               timestamp: journald ? nil : Self.timestamp())
        if journald { line = "<\(Self.priority(event.level))>" + line }
        line += "\n"
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return }
            }
        }
    }

    /// One line without its newline: `ts=… level=… msg=…` then the metadata, keys sorted.
    public static func format(level: Logger.Level, message: String, metadata: Logger.Metadata, timestamp: String?) -> String {
        var out = ""
        if let timestamp { out += "ts=\(timestamp) " }
        out += "level=\(level.rawValue) msg=\(quoted(message))"
        for key in metadata.keys.sorted() {
            out += " \(sanitizedKey(key))=\(quoted(render(metadata[key]!)))"
        }
        return out
    }

    static func render(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let s): return s
        case .stringConvertible(let c): return c.description
        case .array(let items): return items.map(render).joined(separator: ",")
        case .dictionary(let d): return d.keys.sorted().map { "\($0):\(render(d[$0]!))" }.joined(separator: ",")
        }
    }

    /// A value as logfmt writes it: bare when it is a plain token, else in double quotes with
    /// `"` and `\` escaped and control characters (a newline above all) spelled out, so that
    /// every event stays one line whatever a message holds.
    public static func quoted(_ value: String) -> String {
        let plain = !value.isEmpty && value.unicodeScalars.allSatisfy { s in
            s.value > 0x20 && s.value != 0x7F && s != "\"" && s != "=" && s != "\\"
        }
        if plain { return value }
        return doubleQuoted(value) { "\\u{\(String($0, radix: 16))}" }
    }

    /// Keys are code, but a space or `=` in one would break the line's grammar.
    static func sanitizedKey(_ key: String) -> String {
        String(key.unicodeScalars.map { $0.value > 0x20 && $0 != "=" && $0 != "\"" ? Character($0) : "_" })
    }

    /// syslog priority of a level (sd-daemon(3)).
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    /// UTC, milliseconds: 2026-11-24T03:10:00.123Z.
    static func timestamp() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var seconds = ts.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ v: Int32, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(ts.tv_nsec / 1_000_000), 3))Z"
    }

    /// True when stderr is the stream `$JOURNAL_STREAM` names (`device:inode`), as systemd sets it
    /// for a service whose output goes to the journal.
    public static func stderrIsJournal() -> Bool {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        var st = stat()
        guard fstat(2, &st) == 0 else { return false }
        return value == "\(st.st_dev):\(st.st_ino)"
    }
}
