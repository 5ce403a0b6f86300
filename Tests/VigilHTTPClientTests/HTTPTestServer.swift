import Foundation
import Glibc
import VigilHTTPClient
import VigilLoop
import VigilWire

/// Tests/http-test-server, started by a test on a loopback port of its own (plain, or TLS with
/// a certificate of the test PKI) and ended with it. It checks what it receives as a real server
/// would (request line, Host, Content-Length) and answers 400 otherwise; see the script for its paths.
final class HTTPTestServer {
    let port: UInt16
    let usesTLS: Bool
    private let process = Process()

    init(certificate: String? = nil, host: String = "127.0.0.1") throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("http-test-server").path
        var arguments = ["python3", script, "--host", host]
        if let certificate {
            arguments += ["--cert", "\(certificate).pem", "--key", "\(certificate).key"]
        }
        usesTLS = certificate != nil
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        // The server also ends by itself once this process is gone, however it ends.
        try process.run()
        var line: [UInt8] = []
        while !line.contains(10) {
            let data = output.fileHandleForReading.availableData
            guard !data.isEmpty else { throw TestFailure("http-test-server exited before listening") }
            line += data
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix("PORT "), let port = UInt16(text.dropFirst(5)) else { throw TestFailure("http-test-server said \(text)") }
        self.port = port
    }

    /// SIGKILL: the test process's threads may block SIGTERM, and the child inherits the mask.
    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// A URL of this server: `path` at `host` (127.0.0.1, or localhost to resolve a name).
    func url(_ path: String, host: String = "127.0.0.1") -> OutgoingURL {
        try! OutgoingURL(parsing: "\(usesTLS ? "https" : "http")://\(host):\(port)\(path)")
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Outcomes as they arrive, and when.
final class Outcomes {
    var list: [(outcome: HTTPOutcome, atMs: Int64)] = []

    var count: Int { list.count }

    func response(_ i: Int) -> HTTPClientResponse? {
        guard i < list.count, case .response(let r) = list[i].outcome else { return nil }
        return r
    }

    func failure(_ i: Int) -> HTTPClientFailure? {
        guard i < list.count, case .failure(let f) = list[i].outcome else { return nil }
        return f
    }

    func body(_ i: Int) -> String? { response(i).map { String(decoding: $0.body, as: UTF8.self) } }
}

extension HTTPClient {
    /// Sends `method` to `url` with `timeoutMs` to go; the outcome lands in `outcomes`.
    func send(_ url: OutgoingURL, method: String = "GET", headers: [(name: String, value: String)] = [], body: [UInt8] = [],
              timeoutMs: Int64 = 5_000, into outcomes: Outcomes) {
        let request = OutgoingRequest(method: method, target: url.target, headers: headers, body: body)
        send(request, to: url.origin, deadline: monotonicMilliseconds() + timeoutMs) { outcome in
            outcomes.list.append((outcome, monotonicMilliseconds()))
        }
    }
}

/// Runs loop turns until `condition` holds (true) or `timeoutMs` passes (false).
func turn(_ loop: EventLoop, until condition: () -> Bool, timeoutMs: Int64 = 5_000) throws -> Bool {
    let deadline = monotonicMilliseconds() + timeoutMs
    while !condition() {
        if monotonicMilliseconds() > deadline { return false }
        try loop.turn(timeoutMs: 20)
    }
    return true
}

/// A test server, a client on a loop of its own (a fast clock; `configure` adjusts the
/// settings), and the outcomes of what the client sent.
struct Rig {
    let server: HTTPTestServer
    let loop: EventLoop
    let client: HTTPClient
    let outcomes = Outcomes()

    init(certificate: String? = nil, _ configure: (inout HTTPClientSettings) -> Void = { _ in }) throws {
        ProcessLimits.ignoreSIGPIPE()
        server = try HTTPTestServer(certificate: certificate)
        var settings = HTTPClientSettings()
        settings.tickMs = 10
        configure(&settings)
        loop = try EventLoop()
        client = try HTTPClient(settings: settings, loop: loop)
    }

    /// Sends to the server's `path` at `host`, without waiting.
    func send(_ path: String, host: String = "127.0.0.1", method: String = "GET", headers: [(name: String, value: String)] = [],
              body: [UInt8] = [], timeoutMs: Int64 = 5_000) {
        client.send(server.url(path, host: host), method: method, headers: headers, body: body, timeoutMs: timeoutMs, into: outcomes)
    }

    /// Sends, then runs the loop until its outcome (and every earlier one) is in.
    func exchange(_ path: String, host: String = "127.0.0.1", method: String = "GET") throws -> Bool {
        let expected = outcomes.count + 1
        send(path, host: host, method: method)
        return try wait(for: expected)
    }

    /// Runs the loop until `count` outcomes are in; false after 5 s.
    func wait(for count: Int) throws -> Bool {
        try turn(loop, until: { outcomes.count >= count })
    }
}
