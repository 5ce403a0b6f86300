import Foundation
import Glibc
import Synchronization
import Testing
@testable import VigilClient

/// `SocketTransport` against a stand-in server that breaks the rules on purpose: every byte from
/// the network is hostile, and each breach ends in a clear error (and, once open, the close code
/// RFC 6455 asks for), never a crash or a hang.
@Suite struct HostileServerTests {
    func connect(_ server: StandInServer, _ options: SocketTransport.Options = .init(), timeout: Duration = .seconds(5)) async throws -> SocketConnection {
        try await SocketTransport(options: options).open(server.url(), timeout: timeout)
    }

    func failure(_ operation: () async throws -> Void) async -> TransportError? {
        do {
            try await operation()
            return nil
        } catch {
            return error as? TransportError
        }
    }

    // MARK: the opening handshake

    @Test func aWrongAcceptIsRefused() async throws {
        let server = try StandInServer { peer, _ in peer.handshake(accept: "AAAAAAAAAAAAAAAAAAAAAAAAAAA=") }
        let error = await failure { _ = try await connect(server) }
        #expect(error == .handshake("Sec-WebSocket-Accept does not match the key"))
    }

    @Test func anEndlessResponseHeadIsCutAt8KiB() async throws {
        let server = try StandInServer { peer, _ in
            _ = peer.readRequest()
            peer.write(Array("HTTP/1.1 101 Switching Protocols\r\n".utf8))
            let filler = Array("X-Filler: \(String(repeating: "f", count: 1000))\r\n".utf8)
            for _ in 0..<20 { peer.write(filler) }
        }
        let error = await failure { _ = try await connect(server) }
        #expect(error == .handshake("malformed response: response head larger than 8192 bytes"))
    }

    @Test func anExtensionNotOfferedIsRefused() async throws {
        let server = try StandInServer { peer, _ in peer.handshake(extra: "Sec-WebSocket-Extensions: permessage-deflate\r\n") }
        let error = await failure { _ = try await connect(server) }
        #expect(error == .handshake("the server agreed to an extension that was not offered"))
    }

    @Test func aServerThatClosesBeforeAnswering() async throws {
        let server = try StandInServer { peer, _ in _ = peer.readRequest() }
        let error = await failure { _ = try await connect(server) }
        #expect(error == .handshake("the server closed the connection before answering the upgrade"))
    }

    @Test func framesInTheSameWriteAsThe101AreDelivered() async throws {
        let server = try StandInServer { peer, found in
            peer.handshake(then: StandInPeer.text("{\"type\":\"welcome\"}") + StandInPeer.text("second"))
            found.yield(peer.readClose())
        }
        let connection = try await connect(server)
        #expect(try await connection.receive() == "{\"type\":\"welcome\"}")
        #expect(try await connection.receive() == "second")
        await connection.close(code: 1000, reason: "ok")
        #expect(try await server.next() == "close 1000 ok")
    }

    // MARK: frames that fail the connection

    /// Each breach: what the client reports, and the close frame the server gets.
    @Test(arguments: [
        (StandInPeer.frame(0x2, [1, 2, 3]), "1003 binary message"),
        (StandInPeer.frame(0x1, Array("hi".utf8), mask: [1, 2, 3, 4]), "1002 server frame masked"),
        (StandInPeer.frame(0x1, [0x68, 0xC3, 0x28]), "1007 invalid UTF-8"),
        (StandInPeer.frame(0x3, []), "1002 reserved opcode 3"),
        (StandInPeer.frame(0x8, [0x03]), "1002 close payload of 1 byte"),
        (StandInPeer.frame(0x8, [0x03, 0xED]), "1002 invalid close code 1005"),
        (StandInPeer.frame(0x9, [], fin: false), "1002 fragmented control frame"),
        (StandInPeer.frame(0x0, Array("x".utf8)), "1002 continuation without a message in progress"),
        // A 64-bit length of 2^40: refused on the header, before any payload is read.
        ([0x81, 127, 0, 0, 1, 0, 0, 0, 0, 0], "1009 message too big"),
    ])
    func aBreachFailsTheConnection(frame: [UInt8], expected: String) async throws {
        let server = try StandInServer { peer, found in
            peer.handshake(then: StandInPeer.text("before") + frame)
            found.yield(peer.readClose())
            found.yield(peer.readsEnd() ? "end" : "no end")
        }
        let connection = try await connect(server)
        #expect(try await connection.receive() == "before")
        let error = await failure { _ = try await within(.seconds(5)) { try await connection.receive() } }
        #expect(error == .protocolViolation(expected))
        let code = expected.prefix(4)
        #expect(try await server.next()?.hasPrefix("close \(code)") == true)
        #expect(try await server.next() == "end")
        #expect(await failure { try await connection.send("after") } == .protocolViolation(expected))
    }

    // MARK: control frames and fragments

    @Test func pingsGetPongsAndFragmentsAreReassembled() async throws {
        let server = try StandInServer { peer, found in
            peer.handshake(then: StandInPeer.text("frag", fin: false)
                + StandInPeer.frame(0x9, Array("p1".utf8))
                + StandInPeer.frame(0x0, Array("men".utf8), fin: false)
                + StandInPeer.frame(0x0, Array("ted ✓".utf8)))
            guard let pong = peer.readFrame() else {
                found.yield("no pong")
                return
            }
            found.yield("\(String(pong.first, radix: 16)) masked=\(pong.masked) \(String(decoding: pong.payload, as: UTF8.self))")
            found.yield(peer.readClose())
        }
        let connection = try await connect(server)
        #expect(try await connection.receive() == "fragmented ✓")
        #expect(try await server.next() == "8a masked=true p1")
        await connection.close(code: 1000, reason: "")
        #expect(try await server.next() == "close 1000 ")
    }

    /// A server that pings without reading: the client's pongs back up, and past a few unsent
    /// ones the pings go unanswered instead of growing the queue; the connection goes on.
    @Test func aPingFloodFromAServerThatDoesNotReadIsNotQueuedWithoutBound() async throws {
        let pings = 200_000
        // The server keeps its socket until the client has read everything: closing it with our
        // pongs unread would reset the connection under the client's last reads.
        let received = DispatchSemaphore(value: 0)
        let server = try StandInServer { peer, found in
            var small: Int32 = 4096
            setsockopt(peer.fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            peer.handshake()
            let ping = StandInPeer.frame(0x9, [UInt8](repeating: 0x70, count: 125))
            let burst = Array([[UInt8]](repeating: ping, count: 1000).joined())
            for _ in 0..<(pings / 1000) { peer.write(burst) }
            peer.write(StandInPeer.text("done"))
            found.yield("sent")
            _ = received.wait(timeout: .now() + 20)
        }
        let answered = Mutex(0)
        var options = SocketTransport.Options()
        options.pingObserver = { _ in answered.withLock { $0 += 1 } }
        let connection = try await connect(server, options)
        #expect(try await within(.seconds(20)) { try await connection.receive() } == "done")
        received.signal()
        #expect(try await server.next() == "sent")
        let count = answered.withLock { $0 }
        #expect(count >= 16 && count < pings)
        connection.abort()
    }

    @Test func aServerCloseIsAnsweredWithItsCode() async throws {
        let server = try StandInServer { peer, found in
            peer.handshake(then: StandInPeer.text("last") + StandInPeer.frame(0x8, [0x0F, 0xA1] + Array("moving".utf8)))
            found.yield(peer.readClose())
        }
        let connection = try await connect(server)
        #expect(try await connection.receive() == "last")
        let error = await failure { _ = try await connection.receive() }
        #expect(error == .closed(code: 4001, reason: "moving"))
        #expect(try await server.next() == "close 4001 ")
    }

    @Test func aCloseWithoutACodeReadsAs1005() async throws {
        let server = try StandInServer { peer, found in
            peer.handshake(then: StandInPeer.frame(0x8, []))
            found.yield(peer.readFrame().map { "\(String($0.first, radix: 16)) \($0.payload.count)" } ?? "none")
        }
        let connection = try await connect(server)
        let error = await failure { _ = try await connection.receive() }
        #expect(error == .closed(code: 1005, reason: ""))
        // Answered with an empty close: 1005 is never sent (RFC 6455 §7.4.1).
        #expect(try await server.next() == "88 0")
    }

    @Test func aConnectionDroppedMidFrameIsLost() async throws {
        let server = try StandInServer { peer, _ in
            peer.handshake(then: Array(StandInPeer.text(String(repeating: "z", count: 500)).prefix(100)))
        }
        let connection = try await connect(server)
        let error = await failure { _ = try await within(.seconds(5)) { try await connection.receive() } }
        #expect(error == .closed(code: nil, reason: "connection lost"))
    }

    /// A connection the app lets go of without closing it: its thread cuts the TCP connection
    /// and ends (nothing is left holding the socket).
    @Test func aForgottenConnectionIsCut() async throws {
        let server = try StandInServer { peer, found in
            peer.handshake()
            found.yield(peer.readsEnd() ? "end" : "no end")
        }
        var connection: SocketConnection? = try await connect(server)
        #expect(connection != nil)
        connection = nil
        #expect(try await server.next() == "end")
    }

    @Test func aCloseNobodyAnswersEndsAtTheCloseTimeout() async throws {
        let server = try StandInServer { peer, found in
            peer.handshake()
            found.yield(peer.readClose())
            // Neither answers nor closes: the client gives up at its close timeout.
            found.yield(peer.readsEnd() ? "end" : "no end")
        }
        var options = SocketTransport.Options()
        options.closeTimeout = .milliseconds(300)
        let connection = try await connect(server, options)
        let started = ContinuousClock.now
        await connection.close(code: 1001, reason: "leaving")
        let elapsed = ContinuousClock.now - started
        #expect(elapsed >= .milliseconds(250) && elapsed < .seconds(3))
        #expect(try await server.next() == "close 1001 leaving")
        #expect(try await server.next() == "end")
        let error = await failure { _ = try await connection.receive() }
        #expect(error == .closed(code: nil, reason: "no close frame from the server within the close timeout"))
    }
}
