import Foundation
@testable import VigilClient

/// A queue one task reads with `next()` and any task writes: what the fakes pass around.
final class AsyncChannel<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var buffer: [T] = []
    private var waiters: [CheckedContinuation<T, any Error>] = []
    private var end: (any Error)?

    func send(_ value: T) {
        lock.lock()
        if !waiters.isEmpty {
            let w = waiters.removeFirst()
            lock.unlock()
            w.resume(returning: value)
            return
        }
        buffer.append(value)
        lock.unlock()
    }

    func finish(_ error: any Error) {
        lock.lock()
        if end == nil { end = error }
        let ws = waiters
        waiters = []
        lock.unlock()
        for w in ws { w.resume(throwing: error) }
    }

    func next() async throws -> T {
        try await withCheckedThrowingContinuation { c in
            lock.lock()
            if !buffer.isEmpty {
                let v = buffer.removeFirst()
                lock.unlock()
                c.resume(returning: v)
            } else if let end {
                lock.unlock()
                c.resume(throwing: end)
            } else {
                waiters.append(c)
                lock.unlock()
            }
        }
    }

    /// What is buffered now, taken.
    func drain() -> [T] {
        lock.lock()
        defer { lock.unlock() }
        let b = buffer
        buffer = []
        return b
    }
}

struct FakeError: Error {}

/// A test's stand-in for vigild: each `connect` makes a ``FakeConnection`` the test drives
/// (welcome, replies, events, a cut), or is refused while `refusals` lasts.
final class FakeServer: VigilTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var refusalsLeft = 0
    private var welcomes = true
    private var sessionCounter = 0
    let connections = AsyncChannel<FakeConnection>()
    let attempts = AsyncChannel<Int>()
    private var attemptCount = 0

    init(autoWelcome: Bool = true) { welcomes = autoWelcome }

    /// The next `n` attempts are refused.
    func refuse(_ n: Int) { lock.lock(); refusalsLeft = n; lock.unlock() }
    /// Whether new connections are welcomed at once.
    func setAutoWelcome(_ on: Bool) { lock.lock(); welcomes = on; lock.unlock() }
    var attemptsMade: Int { lock.lock(); defer { lock.unlock() }; return attemptCount }

    func connect(to url: URL, timeout: Duration) async throws(TransportError) -> any VigilConnection {
        let (n, refuse, session, welcome) = lock.withLock {
            attemptCount += 1
            let refuse = refusalsLeft > 0
            if refuse { refusalsLeft -= 1 }
            sessionCounter += 1
            return (attemptCount, refuse, "session-\(sessionCounter)", welcomes)
        }
        attempts.send(n)
        if refuse { throw .connectFailed("refused") }
        let conn = FakeConnection(session: session)
        if welcome { conn.welcome() }
        connections.send(conn)
        return conn
    }

    /// The next connection made.
    func nextConnection() async throws -> FakeConnection { try await connections.next() }
}

/// One fake WebSocket: the test pushes the server's messages and reads the client's.
final class FakeConnection: VigilConnection, @unchecked Sendable {
    let session: String
    let inbound = AsyncChannel<String>()
    let sent = AsyncChannel<JSONObject>()
    private let lock = NSLock()
    private var isClosed = false
    private(set) var closeCode: UInt16?

    init(session: String) { self.session = session }

    static let limits: JSONValue = [
        "max_message_bytes": 65536, "title_max_chars": 80, "title_max_bytes": 640, "description_max_chars": 1000,
        "description_max_bytes": 8000, "categories": ["general", "sighting", "hazard", "help", "social"],
        "ttl_s": ["default": 14400, "min": 60, "max": 86400], "vote_flag_threshold": 5, "writes_per_minute": 30,
        "write_burst": 30, "messages_per_second": 50, "message_burst": 100, "max_subscribe_pins": 10000, "max_range_m": 50000,
    ]

    func welcome() { push(["type": "welcome", "session": .string(session), "protocol": 1, "limits": FakeConnection.limits]) }

    func send(_ text: String) async throws(TransportError) {
        let closed = lock.withLock { isClosed }
        if closed { throw .closed(code: nil, reason: "") }
        guard case .object(let o)? = JSONValue.parse(text) else { fatalError("the client sent no JSON object: \(text)") }
        sent.send(o)
    }

    func receive() async throws(TransportError) -> String {
        do {
            return try await inbound.next()
        } catch let e as TransportError {
            throw e
        } catch {
            throw .closed(code: nil, reason: "")
        }
    }

    func close(code: UInt16, reason: String) async {
        lock.withLock {
            isClosed = true
            if closeCode == nil { closeCode = code }
        }
        inbound.finish(TransportError.closed(code: code, reason: reason))
    }

    /// The connection is lost without a close (a network that went away).
    func cut() {
        lock.lock()
        isClosed = true
        lock.unlock()
        inbound.finish(TransportError.closed(code: nil, reason: ""))
    }

    func push(_ o: JSONObject) { inbound.send(JSONValue.object(o).jsonText) }
    func pushRaw(_ text: String) { inbound.send(text) }

    /// The client's next message.
    func next() async throws -> JSONObject { try await sent.next() }

    /// The client's next message, which must be `op`.
    func expect(_ op: String, sourceLocation: String = #function) async throws -> JSONObject {
        let m = try await next()
        guard m["op"]?.stringValue == op else { throw Unexpected(message: "expected \(op), got \(JSONValue.object(m).jsonText)") }
        return m
    }

    func ok(_ request: JSONObject, _ fields: JSONObject = [:]) {
        var o = fields
        o["type"] = "ok"
        o["ref"] = request["ref"]
        push(o)
    }

    func error(_ request: JSONObject, _ code: String, _ fields: JSONObject = [:]) {
        var o = fields
        o["type"] = "error"
        o["code"] = .string(code)
        o["message"] = .string("\(code) (fake)")
        o["ref"] = request["ref"]
        push(o)
    }
}

struct Unexpected: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// The result of `body`, success or its typed error.
func outcome<T>(_ body: () async throws(VigilError) -> T) async -> Result<T, VigilError> {
    do throws(VigilError) {
        return .success(try await body())
    } catch {
        return .failure(error)
    }
}

/// A clock the test moves: sleepers wake when `advance` passes their deadline.
final class TestClock: VigilClock, @unchecked Sendable {
    private let lock = NSLock()
    private var current: Duration = .zero
    private var sleepers: [Int: (Duration, CheckedContinuation<Void, any Error>)] = [:]
    private var cancelled: Set<Int> = []
    private var nextID = 0
    let sleeps = AsyncChannel<Duration>()

    var now: Duration { lock.lock(); defer { lock.unlock() }; return current }

    func sleep(until deadline: Duration) async throws {
        let id: Int? = lock.withLock {
            if deadline <= current { return nil }
            nextID += 1
            return nextID
        }
        guard let id else { return }
        sleeps.send(deadline)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                lock.lock()
                if cancelled.contains(id) {
                    lock.unlock()
                    c.resume(throwing: CancellationError())
                } else if deadline <= current {
                    lock.unlock()
                    c.resume()
                } else {
                    sleepers[id] = (deadline, c)
                    lock.unlock()
                }
            }
        } onCancel: {
            lock.lock()
            cancelled.insert(id)
            let s = sleepers.removeValue(forKey: id)
            lock.unlock()
            s?.1.resume(throwing: CancellationError())
        }
    }

    /// Moves time on and wakes every sleeper whose deadline passed.
    func advance(by d: Duration) {
        lock.lock()
        current += d
        let due = sleepers.filter { $0.value.0 <= current }
        for id in due.keys { sleepers[id] = nil }
        lock.unlock()
        for (_, s) in due.sorted(by: { $0.value.0 < $1.value.0 }) { s.1.resume() }
    }

    /// How many sleepers wait.
    var waiting: Int { lock.lock(); defer { lock.unlock() }; return sleepers.count }
}

/// Reads an AsyncStream one element at a time.
final class Reader<T: Sendable>: @unchecked Sendable {
    private var iterator: AsyncStream<T>.Iterator
    init(_ stream: AsyncStream<T>) { iterator = stream.makeAsyncIterator() }
    func next() async -> T? { await iterator.next() }
    /// The next element that matches (others are skipped).
    func next(where match: (T) -> Bool) async -> T? {
        while let e = await iterator.next() {
            if match(e) { return e }
        }
        return nil
    }
}

extension FakeServer {
    /// A client of this fake with a test clock; connected, its first connection returned.
    func client(_ configure: (inout VigilClientOptions) -> Void = { _ in }) async throws -> (VigilClient, FakeConnection, TestClock) {
        let clock = TestClock()
        var o = VigilClientOptions()
        o.clock = clock
        o.random = { 0.5 }
        configure(&o)
        let c = VigilClient(url: URL(string: "ws://fake/v1")!, options: o, transport: self)
        try await c.connect()
        let conn = try await nextConnection()
        return (c, conn, clock)
    }
}

extension ConnectionEvent {
    var isOpen: Bool { if case .open = self { true } else { false } }
    var isReconnected: Bool { if case .open(_, true) = self { true } else { false } }
    var isClosed: Bool { if case .closed = self { true } else { false } }
    var reconnecting: (Int, Duration)? { if case .reconnecting(let a, let d) = self { (a, d) } else { nil } }
}

struct NoReconnect: Error {}

/// Cuts `conn`, waits until the client scheduled its retry, moves the clock past the delay:
/// the connection the client makes then.
func cutAndReconnect(_ c: VigilClient, _ conn: FakeConnection, _ server: FakeServer, _ clock: TestClock) async throws -> FakeConnection {
    let events = Reader(await c.events())
    conn.cut()
    guard let (_, delay) = await events.next(where: { $0.reconnecting != nil })?.reconnecting else { throw NoReconnect() }
    clock.advance(by: delay)
    return try await server.nextConnection()
}
