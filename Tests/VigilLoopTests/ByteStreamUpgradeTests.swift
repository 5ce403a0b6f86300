import Foundation
import Glibc
import Testing
@testable import VigilLoop
import VigilTestSupport

/// A recording stream that also hears the end of a mid-stream TLS upgrade.
final class UpgradingStream: ByteStream {
    var received: [UInt8] = []
    var failures: [SystemError] = []
    var upgraded = 0

    override func received(_ bytes: UnsafeMutableRawBufferPointer) { received.append(contentsOf: bytes) }
    override func failed(_ error: SystemError) { failures.append(error) }
    override func upgradedToTLS() { upgraded += 1 }
}

/// `ByteStream.startTLS`: plaintext first, then TLS on the same socket (NATS's order), on a
/// socketpair whose other end becomes a TLS server stream once the plaintext part is through.
@Suite(.serialized) struct ByteStreamUpgradeTests {
    static let pki = TestPKI.directory

    /// A client stream that got "INFO\r\n" in plaintext, and the server's end of its socket.
    private func plaintextFirst(_ loop: EventLoop) throws -> (UpgradingStream, Int32) {
        let (a, b) = Sockets.pair()
        let client = UpgradingStream(fd: a, loop: loop)
        try client.start()
        Sockets.write(b, Array("INFO\r\n".utf8))
        try loop.turn(timeoutMs: 1_000)
        #expect(client.received == Array("INFO\r\n".utf8))
        return (client, b)
    }

    private func serverStream(_ fd: Int32, _ loop: EventLoop) throws -> RecordingStream {
        let context = try TLSContext.server(certificateChain: Self.pki + "/server.pem", privateKey: Self.pki + "/server.key")
        let server = RecordingStream(fd: fd, loop: loop)
        try server.start(tls: context)
        return server
    }

    private func turn(_ loop: EventLoop, until condition: () -> Bool) throws -> Bool {
        let deadline = monotonicMilliseconds() + 5_000
        while !condition() {
            if monotonicMilliseconds() > deadline { return false }
            try loop.turn(timeoutMs: 20)
        }
        return true
    }

    @Test func upgradesAfterPlaintextAndBytesMoveEncryptedBothWays() throws {
        let loop = try EventLoop()
        let (client, b) = try plaintextFirst(loop)
        let server = try serverStream(b, loop)
        try client.startTLS(try TLSContext.verifyingClient(caFile: Self.pki + "/ca.pem"), verifyName: "localhost")
        #expect(client.usesTLS && !client.isTransportReady)
        // Queued during the handshake: goes out encrypted after it.
        Array("CONNECT {}\r\n".utf8).withUnsafeBytes { client.append($0) }
        #expect(try turn(loop, until: { client.upgraded == 1 && server.received == Array("CONNECT {}\r\n".utf8) }))
        Array("+OK\r\n".utf8).withUnsafeBytes { server.append($0) }
        #expect(try turn(loop, until: { client.received == Array("INFO\r\n+OK\r\n".utf8) }))
        #expect(client.failures.isEmpty && server.failures.isEmpty)
        client.close()
        server.close()
        try loop.turn(timeoutMs: 0)
    }

    @Test func aCertificateForAnotherNameFailsTheUpgradeWithTheVerdict() throws {
        let loop = try EventLoop()
        let (client, b) = try plaintextFirst(loop)
        let server = try serverStream(b, loop)
        try client.startTLS(try TLSContext.verifyingClient(caFile: Self.pki + "/ca.pem"), verifyName: "nats.example.org")
        #expect(try turn(loop, until: { !client.failures.isEmpty }))
        #expect(client.upgraded == 0 && client.failures[0].call == "TLS handshake")
        #expect(client.failures[0].detail?.contains("hostname mismatch") == true, "\(client.failures)")
        client.close()
        server.close()
        try loop.turn(timeoutMs: 0)
    }

    @Test func refusesWhatCannotBeUpgraded() throws {
        let loop = try EventLoop()
        let (client, b) = try plaintextFirst(loop)
        defer { close(b) }
        let context = try TLSContext.verifyingClient(caFile: Self.pki + "/ca.pem")
        // Plaintext still queued would go out on the wrong side of the upgrade.
        Array("PING\r\n".utf8).withUnsafeBytes { client.append($0) }
        #expect(throws: SystemError.self) { try client.startTLS(context, verifyName: nil) }
        try loop.turn(timeoutMs: 0)
        try client.startTLS(context, verifyName: nil)
        // Twice is once too many.
        #expect(throws: SystemError.self) { try client.startTLS(context, verifyName: nil) }
        client.close()
        try loop.turn(timeoutMs: 0)
    }
}
