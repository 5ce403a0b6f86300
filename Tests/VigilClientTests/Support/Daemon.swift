import Foundation
import Glibc
import Synchronization

/// What a test daemon runs with. The config file is written from these; `extraYAML` adds whole
/// top-level sections the fields do not cover (not `server`, `admin`, `websocket`, `tls`, `state`
/// or `log`, which are written here).
struct DaemonConfig: Sendable {
    /// `/echo` on (`websocket.echo`).
    var echo = true
    var maxMessageBytes = 16 << 20
    /// `websocket.ping_interval_ms` and `pong_timeout_ms` (vigild's defaults when nil).
    var pingIntervalMs: Int?
    var pongTimeoutMs: Int?
    /// A TLS listener with this certificate chain and key (PEM files).
    var tls: (certificate: String, privateKey: String)?
    /// Keep state in a directory of the daemon's own (kept across `restart`); false: in memory.
    var persistentState = true
    /// `shutdown_grace_ms`: how long a SIGTERM waits for clients to answer the 1001.
    var shutdownGraceMs = 2000
    var extraYAML = ""
}

/// Why a daemon did not do what a test needed.
struct DaemonError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A real vigild started by a test, on loopback ports of the kernel's choosing, with its config
/// and state in a temporary directory of its own (removed when the object goes).
///
/// Which binary: `$VIGILD`, else `<repo>/.build/release/vigild`, else the `vigild` next to the
/// test bundle (the debug build `swift test` makes). Its ports are read from its log ("listening
/// on HOST:PORT", "listening for TLS on HOST:PORT"), as Tests/e2e/vigilproc.py does; `restart`
/// runs it again on the same ports with the same state directory, after `stop` (SIGTERM) or
/// `kill` (SIGKILL, a crash).
final class Daemon: Sendable {
    let config: DaemonConfig
    let directory: String
    let binary: String

    private struct State {
        var process: Process?
        var port: Int?
        var tlsPort: Int?
        var log: [String] = []
        /// Where the current run's lines start in `log`.
        var runStart = 0
        var partial: [UInt8] = []
        var exited = true
        var exitStatus: Int32?
        var lineWaiters: [(id: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    /// Every daemon process running and every directory made, so that the test process's exit
    /// takes them along: a daemon held by a `static let` is never deinitialised.
    private static let leftovers = Mutex<(pids: Set<pid_t>, directories: Set<String>)>(([], []))
    private static let cleanupAtExit: Void = {
        atexit {
            let (pids, directories) = Daemon.leftovers.withLock { ($0.pids, $0.directories) }
            for pid in pids {
                Glibc.kill(pid, SIGKILL)
                var status: Int32 = 0
                waitpid(pid, &status, 0)
            }
            for directory in directories { try? FileManager.default.removeItem(atPath: directory) }
        }
    }()

    static func findBinary() -> String? {
        if let path = ProcessInfo.processInfo.environment["VIGILD"], !path.isEmpty { return path }
        let repo = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let release = repo.appendingPathComponent(".build/release/vigild").path
        if FileManager.default.isExecutableFile(atPath: release) { return release }
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            let beside = URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("vigild").path
            if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        }
        return nil
    }

    init(_ config: DaemonConfig = DaemonConfig()) throws {
        guard let binary = Self.findBinary() else {
            throw DaemonError("no vigild: set VIGILD, or `swift build -c release --product vigild`")
        }
        self.binary = binary
        self.config = config
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("vigil-client-test-\(getpid())-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory + "/state", withIntermediateDirectories: true)
        Self.cleanupAtExit
        let made = directory
        Self.leftovers.withLock { _ = $0.directories.insert(made) }
    }

    deinit {
        if let process = state.withLock({ $0.process }), process.isRunning {
            Glibc.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
        let made = directory
        Self.leftovers.withLock { _ = $0.directories.remove(made) }
    }

    var port: Int { state.withLock { $0.port ?? 0 } }
    var tlsPort: Int? { state.withLock { $0.tlsPort } }
    var isRunning: Bool { state.withLock { !$0.exited } }
    var stateDirectory: String { directory + "/state" }
    /// Everything the daemon logged, over all its runs.
    var log: String { state.withLock { $0.log.joined(separator: "\n") } }

    /// `ws://127.0.0.1:PORT/path` (or `wss://HOST:TLSPORT/path`).
    func url(_ path: String = "/v1", tls: Bool = false, host: String = "127.0.0.1") -> URL {
        let port = tls ? (tlsPort ?? 0) : self.port
        return URL(string: "\(tls ? "wss" : "ws")://\(host):\(port)\(path)")!
    }

    private func yaml() -> String {
        let (port, tlsPort) = state.withLock { ($0.port, $0.tlsPort) }
        var text = """
            server:
              listen: "127.0.0.1:\(port ?? 0)"
              shutdown_grace_ms: \(config.shutdownGraceMs)
            admin:
              listen: "127.0.0.1:0"
            websocket:
              max_message_bytes: \(config.maxMessageBytes)
              max_output_buffer_bytes: \(max(64 << 20, config.maxMessageBytes * 4))
              echo: \(config.echo)

            """
        if let ping = config.pingIntervalMs { text += "  ping_interval_ms: \(ping)\n" }
        if let pong = config.pongTimeoutMs { text += "  pong_timeout_ms: \(pong)\n" }
        if let tls = config.tls {
            text += """
                tls:
                  listen: "127.0.0.1:\(tlsPort ?? 0)"
                  certificate: "\(tls.certificate)"
                  private_key: "\(tls.privateKey)"

                """
        }
        if config.persistentState {
            text += "state:\n  directory: \"\(stateDirectory)\"\n"
        }
        text += "log:\n  level: info\n"
        return text + config.extraYAML
    }

    /// Starts the daemon (on the ports of its previous run, if it had one) and returns once it
    /// logged its listening lines, at most `timeout`.
    func start(timeout: Duration = .seconds(20)) async throws {
        let configPath = directory + "/vigild.yaml"
        try yaml().write(toFile: configPath, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--config", configPath]
        var environment = ProcessInfo.processInfo.environment
        environment["VIGIL_LISTEN"] = nil
        environment["NOTIFY_SOCKET"] = nil
        environment["VIGIL_ADMIN_LISTEN"] = "127.0.0.1:0"
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        process.terminationHandler = { [weak self] p in self?.exited(p.terminationStatus, pid: p.processIdentifier) }
        state.withLock { s in
            s.runStart = s.log.count
            s.exited = false
            s.exitStatus = nil
            s.process = process
        }
        try process.run()
        let pid = process.processIdentifier
        Self.leftovers.withLock { _ = $0.pids.insert(pid) }
        let reader = errors.fileHandleForReading
        let drain = Thread { [weak self] in
            while true {
                let data = reader.availableData
                guard let self else { return }
                self.received(data)
                if data.isEmpty { return }
            }
        }
        drain.start()
        let port = try await waitForLine(timeout: timeout) { Self.listening(in: $0, prefix: "listening on ") }
        state.withLock { $0.port = port }
        if config.tls != nil {
            let tlsPort = try await waitForLine(timeout: timeout) { Self.listening(in: $0, prefix: "listening for TLS on ") }
            state.withLock { $0.tlsPort = tlsPort }
        }
    }

    /// SIGTERM (the daemon closes 1001 to everyone and exits); waits for the exit, then SIGKILL
    /// after `timeout`. Returns the exit status (nil if it had to be killed).
    @discardableResult
    func stop(timeout: Duration = .seconds(10)) async -> Int32? {
        guard let process = state.withLock({ $0.exited ? nil : $0.process }) else { return state.withLock { $0.exitStatus } }
        Glibc.kill(process.processIdentifier, SIGTERM)
        if await waitForExit(timeout: timeout) { return state.withLock { $0.exitStatus } }
        Glibc.kill(process.processIdentifier, SIGKILL)
        _ = await waitForExit(timeout: .seconds(10))
        return nil
    }

    /// SIGKILL, as a crash: no close frames, nothing flushed; returns once the process is gone.
    func kill() async {
        guard let process = state.withLock({ $0.exited ? nil : $0.process }) else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        _ = await waitForExit(timeout: .seconds(10))
    }

    /// Starts it again on the same ports with the same state directory (stopped first if running).
    func restart(timeout: Duration = .seconds(20)) async throws {
        if isRunning { await stop() }
        try await start(timeout: timeout)
    }

    // MARK: the log and the exit

    /// The port in a "…listening on 127.0.0.1:PORT…" line.
    static func listening(in line: String, prefix: String) -> Int? {
        guard let range = line.range(of: prefix) else { return nil }
        let address = line[range.upperBound...].prefix { $0 != " " && $0 != "\"" }
        guard let colon = address.lastIndex(of: ":") else { return nil }
        return Int(address[address.index(after: colon)...])
    }

    /// Waits until a line of the current run gives a value, the daemon exits or `timeout` passes.
    func waitForLine<T>(timeout: Duration, _ match: @escaping (String) -> T?) async throws -> T {
        let deadline = ContinuousClock.now + timeout
        var seen = state.withLock { $0.runStart }
        while true {
            let (lines, exited) = state.withLock { s in (Array(s.log[seen...]), s.exited) }
            seen += lines.count
            for line in lines {
                if let value = match(line) { return value }
            }
            if exited { throw DaemonError("vigild exited (status \(state.withLock { $0.exitStatus ?? -1 })): \(log.suffix(2000))") }
            guard ContinuousClock.now < deadline else { throw DaemonError("vigild did not log what was awaited within \(timeout): \(log.suffix(2000))") }
            await nextLogEvent(after: seen, until: deadline)
        }
    }

    /// Returns when the log has more than `seen` lines, the daemon exits, or the deadline passes.
    private func nextLogEvent(after seen: Int, until deadline: ContinuousClock.Instant) async {
        let id = state.withLock { s in
            s.nextWaiter += 1
            return s.nextWaiter
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(until: deadline)
            self?.wakeLineWaiter(id)
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.exited || s.log.count > seen { return true }
                s.lineWaiters.append((id, continuation))
                return false
            }
            if now { continuation.resume() }
        }
        timer.cancel()
    }

    private func wakeLineWaiter(_ id: Int) {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard let index = s.lineWaiters.firstIndex(where: { $0.id == id }) else { return nil }
            return s.lineWaiters.remove(at: index).continuation
        }
        waiter?.resume()
    }

    private func received(_ data: Data) {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.partial.append(contentsOf: data)
            if data.isEmpty && !s.partial.isEmpty { s.partial.append(0x0A) }
            while let newline = s.partial.firstIndex(of: 0x0A) {
                s.log.append(String(decoding: s.partial[..<newline], as: UTF8.self))
                s.partial.removeSubrange(...newline)
            }
            defer { s.lineWaiters = [] }
            return s.lineWaiters.map(\.continuation)
        }
        for waiter in waiters { waiter.resume() }
    }

    private func exited(_ status: Int32, pid: pid_t) {
        Self.leftovers.withLock { _ = $0.pids.remove(pid) }
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            // A run before the current one (its handler late): nothing to tell.
            guard s.process?.processIdentifier == pid else { return [] }
            s.exited = true
            s.exitStatus = status
            defer {
                s.lineWaiters = []
                s.exitWaiters = []
            }
            return s.lineWaiters.map(\.continuation) + s.exitWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Whether the process exited within `timeout`.
    private func waitForExit(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !state.withLock({ $0.exited }) {
            guard ContinuousClock.now < deadline else { return false }
            let timer = Task { [weak self] in
                try? await Task.sleep(until: deadline)
                self?.wakeExitWaiters()
            }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.exited { return true }
                    s.exitWaiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
            timer.cancel()
        }
        return true
    }

    private func wakeExitWaiters() {
        let waiters = state.withLock { s in
            defer { s.exitWaiters = [] }
            return s.exitWaiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
