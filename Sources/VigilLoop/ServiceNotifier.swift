import Glibc

/// systemd's readiness protocol (`sd_notify(3)`): datagrams such as `READY=1`, `STATUS=…`,
/// `STOPPING=1` and `WATCHDOG=1` to the socket named by `$NOTIFY_SOCKET`. The protocol is one
/// `sendto` on a Unix datagram socket, so no libsystemd is linked.
///
/// Sends never block (the socket is non-blocking) and a failed send is reported, not retried:
/// systemd reads its notification socket promptly, and a lost `STATUS=` line only loses text.
public final class ServiceNotifier {
    private let fd: Int32
    private var address = sockaddr_un()
    private let addressLength: socklen_t
    /// How often to send `WATCHDOG=1` (half the `WatchdogSec=` systemd set), or nil without a watchdog.
    public let watchdogIntervalMs: Int64?

    /// A notifier for the socket `$NOTIFY_SOCKET` names, or nil when systemd did not ask for
    /// notifications (the variable is unset) or the name cannot be used.
    public convenience init?() {
        guard let path = getenv("NOTIFY_SOCKET").map({ String(cString: $0) }) else { return nil }
        let usec = getenv("WATCHDOG_USEC").map { String(cString: $0) }
        let pid = getenv("WATCHDOG_PID").map { String(cString: $0) }
        self.init(socketPath: path, watchdogUsec: usec, watchdogPid: pid, ownPid: getpid())
    }

    /// `socketPath`: a filesystem path, or `@name` for an abstract socket (as systemd writes it).
    public init?(socketPath: String, watchdogUsec: String? = nil, watchdogPid: String? = nil, ownPid: pid_t = getpid()) {
        guard let length = Self.fill(&address, path: socketPath) else { return nil }
        addressLength = length
        watchdogIntervalMs = Self.watchdogInterval(usec: watchdogUsec, pid: watchdogPid, ownPid: ownPid)
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return nil }
    }

    deinit { close(fd) }

    /// Sends one notification (newline-separated `KEY=value` assignments). False when it could not be sent.
    @discardableResult
    public func send(_ state: String) -> Bool {
        var message = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                message.withUnsafeMutableBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, addressLength) }
            }
        }
        return sent == message.count
    }

    /// The address for `path`, or nil when it is empty, relative or too long. A leading `@`
    /// names an abstract socket: the name starts with a NUL byte and its length is exact.
    static func fill(_ address: inout sockaddr_un, path: String) -> socklen_t? {
        var bytes = Array(path.utf8)
        guard let first = bytes.first, first == UInt8(ascii: "/") || first == UInt8(ascii: "@") else { return nil }
        let abstract = first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        // A path needs its terminating NUL; an abstract name is counted by the length alone.
        guard bytes.count + (abstract ? 0 : 1) <= capacity, !bytes.dropFirst().contains(0) else { return nil }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.initializeMemory(as: UInt8.self, repeating: 0)
            raw.copyBytes(from: bytes)
        }
        let offset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        return socklen_t(offset + bytes.count + (abstract ? 0 : 1))
    }

    /// Half the watchdog timeout, in milliseconds (what sd_watchdog_enabled(3) advises), when
    /// `WATCHDOG_USEC` is a positive number and `WATCHDOG_PID`, if set, is this process.
    static func watchdogInterval(usec: String?, pid: String?, ownPid: pid_t) -> Int64? {
        guard let usec, let micros = Int64(usec), micros > 0 else { return nil }
        if let pid, Int32(pid) != ownPid { return nil }
        return max(1, micros / 2_000)
    }
}
