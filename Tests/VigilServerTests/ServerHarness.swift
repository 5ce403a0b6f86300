import Glibc
import Logging
import VigilCore
import VigilLoop
import VigilTestSupport
import VigilWire
@testable import VigilServer

/// A real `Server` whose clients are socketpairs, driven one loop turn at a time by the test:
/// no listener, no threads, no sleeps. Everything the server does between two `turn()` calls is
/// exactly one loop turn (events, fan-out, journal, flush, deferred closes).
final class ServerHarness {
    let server: Server
    private var clients: [TestClient] = []

    init(logger: Logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, _ configure: (inout ServerConfig) -> Void = { _ in }) throws {
        ProcessLimits.ignoreSIGPIPE()
        var config = ServerConfig()
        config.echoEnabled = true
        config.messageBurst = 100_000
        config.messagesPerSecond = 100_000
        config.pins.writeBurst = 100_000
        config.pins.writesPerMinute = 1_000_000
        config.subscribeBurst = 100_000
        config.subscribesPerSecond = 100_000
        // Every socketpair client is the same local peer: lift its per-address budgets.
        config.addressBudgets.pinCreates = .perHour(10_000_000, capacity: 1_000_000)
        config.addressBudgets.panicStarts = .perHour(10_000_000, capacity: 1_000_000)
        config.addressBudgets.subscribes = .perSecond(1_000_000, capacity: 1_000_000)
        configure(&config)
        server = try Server(config: config, logger: logger, notifier: nil)
        try server.startTicker()  // deadlines and the hubs' timers, every 50 ms as in the daemon
    }

    deinit {
        for client in clients { client.close() }
    }

    var v1: V1Application { server.v1! }

    /// A client socket adopted by the server. `serverSendBuffer` shrinks the server end's kernel
    /// buffer, so that a client that stops reading backs up the server's queue quickly.
    func connect(serverSendBuffer: Int32? = nil, admin: Bool = false) -> TestClient {
        var fds: [Int32] = [0, 0]
        let rc = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
        precondition(rc == 0, "socketpair")
        if var size = serverSendBuffer {
            setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(4))
        }
        server.adopt(fd: fds[0], admin: admin)
        let client = TestClient(fd: fds[1])
        clients.append(client)
        return client
    }

    /// A client that completed the WebSocket handshake on `path` (and, on /v1, read its welcome).
    /// With `deflate`, the client offers permessage-deflate and inflates what it is sent.
    func open(_ path: String = "/v1", serverSendBuffer: Int32? = nil, deflate: Bool = false) throws -> TestClient {
        let client = connect(serverSendBuffer: serverSendBuffer)
        var request = Handshake.clientRequest(host: "test", path: path, key: "dGhlIHNhbXBsZSBub25jZQ==", subprotocols: [])
        if deflate {
            request.removeLast(2)
            request += Array("Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n".utf8)
            client.inflate()
        }
        client.write(request)
        try run(until: { client.poll(); return client.upgraded })
        if path == "/v1" {
            try run(until: { client.poll(); return !client.messages.isEmpty })
            let welcome = client.messages.removeFirst()
            precondition(welcome.type == "welcome", "expected the welcome, got \(welcome.text)")
        }
        return client
    }

    /// A plain HTTP GET on a new connection (to the admin listener with `admin`): the status and
    /// the body, once the server has answered and closed.
    func get(_ path: String, admin: Bool = false) throws -> (status: Int, body: String) {
        let client = connect(admin: admin)
        client.write(Array("GET \(path) HTTP/1.1\r\nHost: test\r\n\r\n".utf8))
        try run(until: { client.poll(); return client.ended })
        let head = String(decoding: client.responseHead, as: UTF8.self)
        let status = head.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return (status, String(decoding: client.raw, as: UTF8.self))
    }

    /// One loop turn, not waiting for events that are not there yet.
    func turn() throws {
        try server.loop.turn(timeoutMs: 0)
    }

    /// Turns until `done` holds (each turn waits at most 100 ms for an event); fails after `maxTurns`.
    /// Bytes the clients could not write yet (their socket was full) are written as it goes.
    func run(maxTurns: Int = 500, line: Int = #line, until done: () -> Bool) throws {
        for _ in 0..<maxTurns {
            for client in clients { client.writePending() }
            if done() { return }
            try server.loop.turn(timeoutMs: clients.contains { $0.hasPending } ? 0 : 100)
        }
        if done() { return }
        throw HarnessError("condition not reached in \(maxTurns) turns (line \(line))")
    }

    /// Turns until `client` holds `count` messages.
    func read(_ client: TestClient, count: Int, line: Int = #line) throws {
        try run(line: line, until: { client.poll(); return client.messages.count >= count })
    }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The test's end of a socketpair: writes masked frames, reads and decodes what the server sends.
final class TestClient {
    /// A message from the server.
    struct Message {
        let text: String
        let json: JSONValue?
        var type: String? { json?.object?["type"]?.string }
        subscript(_ key: String) -> JSONValue? { json?.object?[key] }
    }

    let fd: Int32
    private var response: [UInt8] = []
    /// The response head (status line and headers) once complete.
    var responseHead: [UInt8] { response }
    private(set) var upgraded = false
    private var assembler = MessageAssembler(reader: MessageReader(role: .client, maxMessageBytes: 1 << 24))
    var messages: [Message] = []
    /// Close frames received: their codes (nil for an empty close).
    private(set) var closes: [UInt16?] = []
    /// Pings received.
    private(set) var pings = 0
    /// The server closed or reset its side.
    private(set) var ended = false
    /// Raw bytes received after the handshake (for tests of the HTTP phase).
    private(set) var raw: [UInt8] = []
    private var maskKey: UInt32 = 0x1234_5678

    init(fd: Int32) { self.fd = fd }

    /// Inflates compressed frames from now on (the server agreed to permessage-deflate; the
    /// daemon always asks for no context takeover, and its window is at most 15 bits).
    func inflate() {
        let mirror = DeflateParameters(serverNoContextTakeover: true, clientNoContextTakeover: true,
                                       serverMaxWindowBits: 15, clientMaxWindowBits: 15)
        assembler = MessageAssembler(role: .client, maxMessageBytes: 1 << 24, inflation: mirror)
        inflating = true
    }

    private(set) var inflating = false

    /// Bytes written but not yet taken by the socket (the server has not read enough yet).
    private var pending: [UInt8] = []
    var hasPending: Bool { !pending.isEmpty }

    /// The test's end closed (by `close()`, or the harness at its end): closed once only. The
    /// tests of one suite run in parallel in one process, so an fd closed twice may close another
    /// test's socket that took the number meanwhile (a test once hung waiting for an upgrade that
    /// way).
    private(set) var isClosed = false

    /// Closes the test's end now (the peer going away); the harness will not close it again.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(fd)
    }

    /// Writes what the socket takes now and keeps the rest for `writePending` (the harness calls it
    /// every turn), so a test can send more than a socket buffer holds.
    func write(_ bytes: [UInt8]) {
        pending += bytes
        writePending()
    }

    func writePending() {
        var offset = 0
        while offset < pending.count {
            let n = pending[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            precondition(n > 0, "a test client's write failed (errno \(errno))")
            offset += n
        }
        pending.removeFirst(offset)
    }

    /// One masked frame (a new key each time).
    func frame(_ opcode: Opcode, _ payload: [UInt8]) -> [UInt8] {
        maskKey = maskKey &* 2_654_435_761 &+ 1
        return masked(opcode, payload, key: maskKey | 1)
    }

    func send(_ text: String) { write(frame(.text, Array(text.utf8))) }

    /// Reads everything available now and decodes it.
    func poll() {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n > 0 {
                consume(Array(buffer[0..<n]))
            } else {
                if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) { ended = true }
                return
            }
        }
    }

    private func consume(_ bytes: [UInt8]) {
        var bytes = bytes
        if !upgraded {
            response += bytes
            guard let end = Self.headEnd(response) else { return }
            upgraded = response.starts(with: Array("HTTP/1.1 101".utf8))
            bytes = Array(response[end...])
            response = Array(response[..<end])
            if !upgraded { raw += bytes; return }
        }
        raw += bytes
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while true {
                switch assembler.next(buffer, offset: &offset) {
                case .needMore: return
                case .message(_, let payload):
                    let text = String(decoding: payload, as: UTF8.self)
                    messages.append(Message(text: text, json: try? JSONParser.parse(Array(payload))))
                case .ping: pings += 1
                case .pong: break
                case .close(let code, _): closes.append(code); return
                case .failure(let error): preconditionFailure("the server broke RFC 6455: \(error)")
                }
            }
        }
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 3..<bytes.count where bytes[i - 3] == 13 && bytes[i - 2] == 10 && bytes[i - 1] == 13 && bytes[i] == 10 {
            return i + 1
        }
        return nil
    }

    /// The messages of one type, in order.
    func all(_ type: String) -> [Message] { messages.filter { $0.type == type } }
}

extension JSONValue {
    var int: Int? { int64.map(Int.init) }
}
