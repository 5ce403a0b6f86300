import Foundation
import Glibc
import Synchronization
import VigilLoop

/// A `nats-server -js` of the test's own, on a loopback port, storing in a temporary directory
/// (installed by Tests/setup-deps). Killed, restarted and removed by the test.
final class NATSServerProcess {
    let port: UInt16
    let storeDirectory: String
    let extraArguments: [String]
    private var process: Process?

    static let executable = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }

    init(port: UInt16? = nil, extraArguments: [String] = []) throws {
        self.port = try port ?? Self.freePort()
        storeDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("vigil-nats-\(getpid())-\(self.port)").path
        self.extraArguments = extraArguments
        try FileManager.default.createDirectory(atPath: storeDirectory, withIntermediateDirectories: true)
    }

    var url: String { "nats://127.0.0.1:\(port)" }

    /// Starts the server and returns once it accepts connections (at most 10 s).
    func start() throws {
        guard let executable = Self.executable else {
            throw TestFailure("nats-server is not installed (Tests/setup-deps installs it)")
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = ["-js", "-a", "127.0.0.1", "-p", String(port), "-sd", storeDirectory,
                       "-l", storeDirectory + "/server.log"] + extraArguments
        try p.run()
        process = p
        // The server has no readiness signal to wait on but its port: try connecting, 20 ms apart.
        let deadline = monotonicMilliseconds() + 10_000
        while monotonicMilliseconds() < deadline {
            if Self.accepts(port) { return }
            guard p.isRunning else { throw TestFailure("nats-server exited at start: \(log.suffix(500))") }
            usleep(20_000)
        }
        throw TestFailure("nats-server did not listen on port \(port) within 10 s")
    }

    var isRunning: Bool { process?.isRunning ?? false }

    /// SIGKILL, as a crash: nothing flushed, no goodbye to clients.
    func kill() {
        guard let p = process else { return }
        Glibc.kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        process = nil
    }

    var log: String { (try? String(contentsOfFile: storeDirectory + "/server.log", encoding: .utf8)) ?? "" }

    deinit {
        kill()
        try? FileManager.default.removeItem(atPath: storeDirectory)
    }

    static func accepts(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = port.bigEndian
        sin.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    /// A port the kernel just handed out on loopback (free unless someone takes it in between),
    /// and never one this process handed out before: the kernel may give a port it just took back
    /// to the next asker, and a cluster's route port once came back as one of its client ports
    /// ("bind: address already in use"), or as a port of the other cluster a parallel test was
    /// starting.
    static func freePort() throws -> UInt16 {
        for _ in 0..<100 {
            let fd = try Socket.listen(on: ListenAddress(host: "127.0.0.1", port: 0), backlog: 1)
            defer { close(fd) }
            guard let port = Socket.localPort(fd) else { throw TestFailure("getsockname") }
            if handedOut.withLock({ $0.insert(port).inserted }) { return port }
        }
        throw TestFailure("no loopback port this process has not used before in 100 tries")
    }

    private static let handedOut = Mutex<Set<UInt16>>([])
}

extension NATSServerProcess {
    /// `count` servers routed into one NATS cluster on loopback (named s1, s2…), all started and
    /// with a JetStream metadata leader. A cluster that does not get there (a chosen port taken by
    /// someone else before its server bound it: the route port is bound after the client port, so
    /// a server can accept clients and then exit; or, seen twice on a loaded machine, servers that
    /// kept closing each other's routes as duplicates for a minute) is killed and started again
    /// on new ports: at most three attempts, each one's reason in the failure.
    static func startCluster(named name: String, count: Int = 3) throws -> [NATSServerProcess] {
        var reasons: [String] = []
        for _ in 0..<3 {
            let routes = try (0..<count).map { _ in try freePort() }
            let routeList = routes.map { "nats://127.0.0.1:\($0)" }.joined(separator: ",")
            let servers = try routes.enumerated().map { i, route in
                try NATSServerProcess(extraArguments: ["--cluster", "nats://127.0.0.1:\(route)", "--routes", routeList,
                                                       "--cluster_name", name, "--server_name", "s\(i + 1)"])
            }
            do {
                for server in servers { try server.start() }
                try waitForMetadataLeader(servers, timeoutMs: 30_000)
                return servers
            } catch let failure as TestFailure {
                reasons.append(failure.description)
                for server in servers { server.kill() }
                FileHandle.standardError.write(Data("NATS cluster \(name): attempt \(reasons.count) failed, starting it again: \(failure.description.prefix(300))\n".utf8))
            }
        }
        throw TestFailure("the cluster did not start in 3 attempts: " + reasons.joined(separator: " | "))
    }

    /// Returns once every server of `servers` has logged that the JetStream cluster has a
    /// metadata leader (the servers' only signal of it; a put before it is refused with "JetStream
    /// system temporarily unavailable"). On a loaded machine the election takes several seconds.
    static func waitForMetadataLeader(_ servers: [NATSServerProcess], timeoutMs: Int64 = 60_000) throws {
        let deadline = monotonicMilliseconds() + timeoutMs
        while !servers.allSatisfy({ $0.log.contains("metadata leader") }) {
            if let gone = servers.first(where: { !$0.isRunning }) {
                throw TestFailure("nats-server on port \(gone.port) exited: \(gone.log.suffix(500))")
            }
            if monotonicMilliseconds() >= deadline {
                // The whole logs outlive the servers' directories, for whoever reads the failure.
                let kept = servers.map { server -> String in
                    let path = FileManager.default.temporaryDirectory
                        .appendingPathComponent("vigil-nats-no-leader-\(getpid())-\(server.port).log").path
                    try? server.log.write(toFile: path, atomically: true, encoding: .utf8)
                    return path
                }
                throw TestFailure("no JetStream metadata leader within \(timeoutMs) ms (whole logs: \(kept.joined(separator: ", "))): " +
                                  servers.map { String($0.log.suffix(300)) }.joined(separator: " | "))
            }
            usleep(50_000)
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Turns `loop` until `condition` holds; false when `timeoutMs` passed first.
func turn(_ loop: EventLoop, until condition: () -> Bool, timeoutMs: Int64 = 5_000) throws -> Bool {
    let deadline = monotonicMilliseconds() + timeoutMs
    while !condition() {
        if monotonicMilliseconds() >= deadline { return false }
        try loop.turn(timeoutMs: 20)
    }
    return true
}
