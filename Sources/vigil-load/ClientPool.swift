import CLinux
import Glibc
import VigilLoop
import VigilWire

/// The monotonic clock every latency in a run is measured on (one process, one clock).
enum Clock {
    static func nowNs() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }
}

/// Where to connect: `ws://HOST:PORT/PATH`, or `wss://HOST:PORT/PATH` over TLS.
struct LoadURL: CustomStringConvertible {
    var host: String
    var port: UInt16
    var path: String
    var secure: Bool

    init?(_ text: String) {
        if text.hasPrefix("ws://") {
            secure = false
        } else if text.hasPrefix("wss://") {
            secure = true
        } else {
            return nil
        }
        let rest = text.dropFirst(secure ? 6 : 5)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = String(rest[..<slash])
        path = slash == rest.endIndex ? "/" : String(rest[slash...])
        guard let address = ListenAddress(parsing: authority) else { return nil }
        host = address.host
        port = address.port
    }

    var description: String {
        let scheme = secure ? "wss" : "ws"
        return host.contains(":") ? "\(scheme)://[\(host)]:\(port)\(path)" : "\(scheme)://\(host):\(port)\(path)"
    }
}

/// The client side's shared machinery: the loop (which owns the pooled output chunks and the
/// per-turn flush) and connection opening with source addresses spread over 127.0.0.0/8.
///
/// A run may target several nodes (`urls`, vigil-load's `--url` given more than once): a
/// connection goes to the node its scenario names (`NodeSpread`), and the pool counts per node.
///
/// One source address can reach one server port from about 28,000 ephemeral ports; spreading the
/// local side over 127.0.1.1, 127.0.1.2, ... (all loopback on Linux) lifts that limit, so a single
/// client process can hold 100,000+ connections when its fd limit allows.
final class ClientPool {
    let loop: EventLoop
    /// The nodes, in `--url` order; a connection's `node` indexes this.
    let urls: [LoadURL]
    private let hostHeaders: [String]
    let validateText: Bool
    /// Connections per source address before moving to the next one.
    let perSource: Int
    private let spreadSources: Bool
    /// Connections past the handshake right now, and ever.
    private(set) var openedConnections = 0
    private(set) var everOpened = 0
    /// Connections with an fd (connecting, handshaking, open or closing).
    private(set) var openCount = 0
    private(set) var attempts = 0
    /// Connections past the handshake ever, per node.
    private(set) var everOpenedByNode: [Int]
    private var live: [Int32: ClientConnection] = [:]
    private var seed: UInt64

    /// The TLS setup of every connection, for a wss:// URL.
    let tls: TLSContext?
    /// Offer permessage-deflate in every handshake (the server's events then arrive compressed).
    var offerDeflate = false
    /// Inflater streams shared by the connections (a message is inflated whole in one turn).
    let inflaters = InflaterPool()

    init(urls: [LoadURL], seed: UInt64, validateText: Bool, tls: TLSContext? = nil, perSource: Int = 20_000) throws {
        precondition(!urls.isEmpty)
        self.tls = tls
        loop = try EventLoop()
        // The client owns every connection on its loop: reading a few times per wake costs no
        // fairness and saves epoll_wait calls when it is the bottleneck.
        loop.readsPerWake = 4
        self.urls = urls
        self.hostHeaders = urls.map { $0.host.contains(":") ? "[\($0.host)]:\($0.port)" : "\($0.host):\($0.port)" }
        everOpenedByNode = Array(repeating: 0, count: urls.count)
        self.seed = seed
        self.validateText = validateText
        self.perSource = perSource
        // Only an IPv4 loopback target can be reached from other 127.x addresses.
        spreadSources = urls.allSatisfy { $0.host.hasPrefix("127.") }
    }

    /// The first node's URL (a one-URL run's only one).
    var url: LoadURL { urls[0] }

    /// What a connection to `node` sends as `Host` and as the request path.
    func hostHeader(_ node: Int) -> String { hostHeaders[node] }
    func path(_ node: Int) -> String { urls[node].path }

    /// The local address for the next connection: 127.0.1.1 for the first `perSource`, then 127.0.1.2, ...
    func sourceAddress(forAttempt n: Int) -> String? {
        guard spreadSources else { return nil }
        let k = n / perSource
        return "127.0.\(1 + k / 250).\(1 + k % 250)"
    }

    /// A source address of its own for client `n` of a role that must look like a different
    /// person to the daemon (vigild counts votes and some budgets per client address): 127.0.200.1,
    /// 127.0.200.2, ... (nil when the target is not IPv4 loopback: then they share one).
    func ownSource(_ n: Int) -> String? {
        guard spreadSources else { return nil }
        return "127.\(200 + n / 62_500).\(n / 250 % 250).\(1 + n % 250)"
    }

    /// Starts a non-blocking connect to `node` (from `source` when given, otherwise from the next
    /// spread address). The delegate hears `opened` or `closed(failure:)`.
    /// `stalled`: a client that will stop reading, with a small receive buffer (4 KiB) and an
    /// internet path's segment size (1,400 bytes) instead of loopback's 64 KiB, so the buffers
    /// between it and the server hold what they would for a phone, not megabytes.
    func connect(tag: Int, delegate: ClientDelegate, source: String? = nil, stalled: Bool = false, node: Int = 0) -> ClientConnection? {
        let source = source ?? sourceAddress(forAttempt: attempts)
        attempts += 1
        let url = urls[node]
        let fd: Int32
        do {
            fd = try Socket.connect(to: ListenAddress(host: url.host, port: url.port), source: source,
                                    receiveBuffer: stalled ? 4_096 : nil, maxSegment: stalled ? 1_400 : nil)
        } catch {
            return nil
        }
        seed = seed &+ 0x9E37_79B9_7F4A_7C15
        let connection = ClientConnection(fd: fd, tag: tag, pool: self, delegate: delegate, seed: seed, node: node)
        do {
            try connection.start(connecting: true, tls: url.secure ? tls : nil)
        } catch {
            close(fd)
            return nil
        }
        live[fd] = connection
        openCount += 1
        return connection
    }

    func connectionOpened(node: Int) {
        openedConnections += 1
        everOpened += 1
        everOpenedByNode[node] += 1
    }

    func connectionClosed(_ connection: ClientConnection, wasOpen: Bool) {
        live[connection.fd] = nil
        openCount -= 1
        if wasOpen { openedConnections -= 1 }
    }

    /// Connections still connecting or handshaking after `timeoutNs` are failed.
    func expireHandshakes(nowNs: UInt64, timeoutNs: UInt64) {
        var late: [ClientConnection] = []
        for c in live.values where c.phase == .connecting || c.phase == .handshaking {
            if nowNs > c.startedNs && nowNs - c.startedNs > timeoutNs { late.append(c) }
        }
        for c in late { c.failHandshake() }
    }

    var allConnections: Dictionary<Int32, ClientConnection>.Values { live.values }
}

/// Writes to standard error with one `write(2)` (Glibc's `stderr` is a global variable, which
/// Swift 6 does not let concurrent code touch; this tool writes from its one thread).
func writeStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let n = write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if n <= 0 { return }
            offset += n
        }
    }
}
