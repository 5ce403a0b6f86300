import Glibc
import Testing
import VigilReplication
import VigilLoop
import VigilNATS

/// A scripted stand-in for a NATS server on a loopback port: it accepts, sends INFO, answers
/// the handshake's PING if told to, then sends what the test gives it and nothing else. Driven
/// from the test's loop turns (`poll`), non-blocking.
final class ScriptedServer {
    let listener: Int32
    let port: UInt16
    var connection: Int32 = -1
    var accepted = 0
    var received: [UInt8] = []
    let info: String
    let answerHandshake: Bool
    let afterHandshake: [UInt8]

    init(info: String = #"{"server_id":"S","version":"2.9.10","max_payload":1024,"headers":true}"#,
         answerHandshake: Bool = true, afterHandshake: String = "") throws {
        listener = try Socket.listen(on: ListenAddress(host: "127.0.0.1", port: 0), backlog: 8)
        port = Socket.localPort(listener)!
        self.info = info
        self.answerHandshake = answerHandshake
        self.afterHandshake = Array(afterHandshake.utf8)
    }

    deinit {
        if connection >= 0 { close(connection) }
        close(listener)
    }

    var url: String { "nats://127.0.0.1:\(port)" }

    func poll() {
        let fd = accept(listener, nil, nil)  // the listener is non-blocking
        if fd >= 0 {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            if connection >= 0 { close(connection) }
            connection = fd
            accepted += 1
            received = []
            send("INFO \(info)\r\n")
        }
        guard connection >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = read(connection, &buffer, buffer.count)
        guard n > 0 else { return }
        let before = String(decoding: received, as: UTF8.self)
        received.append(contentsOf: buffer[0..<n])
        let now = String(decoding: received, as: UTF8.self)
        // The handshake ends with the client's first PING (after CONNECT and its SUBs).
        if answerHandshake && !before.contains("PING\r\n") && now.contains("PING\r\n") {
            send("PONG\r\n")
            afterHandshake.withUnsafeBytes { _ = write(connection, $0.baseAddress, $0.count) }
        }
    }

    private func send(_ text: String) {
        _ = Array(text.utf8).withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
    }
}

@Suite(.serialized) struct NATSClientHostileServerTests {
    /// The client, and every disconnection reason it reports.
    private func client(for server: ScriptedServer, loop: EventLoop) throws -> (NATSClient, Box) {
        let client = try makeClient([server.url], loop: loop)
        let box = Box()
        client.addStateObserver { state, reason in
            if state == .disconnected { box.reasons.append(reason) }
            if state == .connected { box.connectedAtMs = monotonicMilliseconds() }
        }
        return (client, box)
    }

    final class Box {
        var reasons: [String] = []
        var connectedAtMs: Int64?
    }

    @Test func aServerThatStopsAnsweringPingsIsDropped() throws {
        let server = try ScriptedServer()
        let loop = try EventLoop()
        let (client, box) = try client(for: server, loop: loop)
        defer { client.close() }
        #expect(try turn(loop, until: { server.poll(); return client.state == .connected }))
        #expect(String(decoding: server.received, as: UTF8.self).hasPrefix("CONNECT {"))
        // Pings every 300 ms, two may be unanswered: dropped at the third, after 900 ms or so.
        #expect(try turn(loop, until: { server.poll(); return !box.reasons.isEmpty }, timeoutMs: 3_000))
        #expect(box.reasons.first == "2 PINGs unanswered")
        let lived = monotonicMilliseconds() - (box.connectedAtMs ?? 0)
        #expect(lived >= 850 && lived < 3_000, "dropped after \(lived) ms")
        // And it tries again.
        #expect(try turn(loop, until: { server.poll(); return server.accepted == 2 }))
    }

    @Test(arguments: [
        ("MSG a 1 99999\r\n", "NATS protocol: payload of 99999 bytes over the limit of 1024"),
        ("BOGUS\r\n", "NATS protocol: unknown operation 'BOGUS'"),
        ("-ERR 'Stale Connection'\r\n", "server error: Stale Connection"),
    ])
    func brokenBytesDropTheConnectionWithTheReason(_ bytes: String, _ reason: String) throws {
        let server = try ScriptedServer(afterHandshake: bytes)
        let loop = try EventLoop()
        let (client, box) = try client(for: server, loop: loop)
        defer { client.close() }
        #expect(try turn(loop, until: { server.poll(); return !box.reasons.isEmpty }))
        #expect(box.reasons.first == reason)
        #expect(try turn(loop, until: { server.poll(); return server.accepted >= 2 }))
    }

    @Test(arguments: [
        (#"{"server_id":"S","max_payload":1024}"#, "the server does not support headers (NATS 2.2 or later needed)"),
        (#"{"server_id":"S","max_payload":1024,"headers":true,"tls_required":true}"#, "the server requires TLS: use tls:// URLs or a cluster.tls section"),
        (#"{"server_id":"S","max_payload":-1,"headers":true}"#, "NATS protocol: bad INFO: max_payload missing or not a positive integer"),
    ])
    func aServerVigilCannotUseIsLeft(_ info: String, _ reason: String) throws {
        let server = try ScriptedServer(info: info)
        let loop = try EventLoop()
        let (client, box) = try client(for: server, loop: loop)
        defer { client.close() }
        #expect(try turn(loop, until: { server.poll(); return !box.reasons.isEmpty }))
        #expect(box.reasons.first == reason)
        #expect(client.state != .connected)
    }

    @Test func aServerThatNeverFinishesTheHandshakeTimesOut() throws {
        let server = try ScriptedServer(answerHandshake: false)
        let loop = try EventLoop()
        let (client, box) = try client(for: server, loop: loop)
        defer { client.close() }
        #expect(try turn(loop, until: { server.poll(); return !box.reasons.isEmpty }, timeoutMs: 3_000))
        #expect(box.reasons.first == "no answer to CONNECT within 1000 ms")
    }
}
