import COpenSSL
import Foundation
import Testing
import VigilReplication
import VigilCore
import VigilLoop
import VigilNATS
import VigilTestSupport

/// The nats-server configurations of these tests, next to the certificates (`TestPKI`).
extension TestPKI {
    /// A nats-server configuration file holding `body`, next to the certificates.
    static func serverConfig(_ body: String) throws -> String {
        let path = directory + "/nats-\(UUID().uuidString).conf"
        try body.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static var serverTLS: String {
        "tls { cert_file: \"\(file("server.pem"))\", key_file: \"\(file("server.key"))\" }"
    }
}

/// Records every reason the client gave for a disconnection.
final class Reasons {
    var all: [String] = []
    init(_ client: NATSClient) {
        client.addStateObserver { state, reason in if state == .disconnected { self.all.append(reason) } }
    }
}

/// TLS, nkeys and host names against a real `nats-server` on loopback (and a scripted server for
/// what nats-server cannot be made to do without `nsc`: a JWT user's CONNECT).
@Suite(.serialized) struct NATSSecureConnectionTests {
    private func tls(ca: String = "ca.pem", client: Bool = false, serverName: String? = nil, everyServer: Bool = true) throws -> NATSTLS {
        let context = try TLSContext.verifyingClient(caFile: TestPKI.file(ca),
                                                     certificateChain: client ? TestPKI.file("client.pem") : nil,
                                                     privateKey: client ? TestPKI.file("client.key") : nil)
        return NATSTLS(context: context, serverName: serverName, everyServer: everyServer)
    }

    private func tlsServer(_ extra: String = "") throws -> NATSServerProcess {
        let conf = try TestPKI.serverConfig(extra.isEmpty ? TestPKI.serverTLS : extra)
        let server = try NATSServerProcess(extraArguments: ["-c", conf])
        try server.start()
        return server
    }

    @Test func upgradesToTLSAfterInfoAndVerifiesTheHostName() throws {
        let server = try tlsServer()
        let loop = try EventLoop()
        // tls:// with a host name: resolved off the loop, the certificate checked against it.
        let client = try makeClient(["tls://localhost:\(server.port)"], loop: loop, tls: tls(everyServer: false))
        defer { client.close() }
        var longestTurn: Int64 = 0
        #expect(try turn(loop, until: {
            let before = monotonicMilliseconds()
            try? loop.turn(timeoutMs: 10)
            longestTurn = max(longestTurn, monotonicMilliseconds() - before)
            return client.state == .connected
        }))
        #expect(client.serverInfo?.tlsRequired == true)
        #expect(longestTurn < 200, "a loop turn took \(longestTurn) ms during the TLS connection")
        print("NATS over TLS: longest loop turn (each waits up to 10 ms in epoll) while resolving, connecting and upgrading: \(longestTurn) ms")
        // Bytes move both ways through TLS: a round trip through the server.
        var got: [UInt8] = []
        try client.subscribe(subject: "secure") { got = $0.payload }
        try client.publish(subject: "secure", payload: Array("over tls".utf8))
        #expect(try turn(loop, until: { got == Array("over tls".utf8) }))
        withExtendedLifetime(server) {}
    }

    @Test func anIPAddressIsCheckedAgainstTheCertificatesIPEntries() throws {
        let server = try tlsServer()
        let loop = try EventLoop()
        let client = try makeClient([server.url], loop: loop, tls: tls())
        defer { client.close() }
        #expect(try turn(loop, until: { client.state == .connected }))
        withExtendedLifetime(server) {}
    }

    @Test func aWrongCAOrNameIsRefusedWithTheReason() throws {
        let server = try tlsServer()
        let loop = try EventLoop()
        let wrongCA = try makeClient([server.url], loop: loop, tls: tls(ca: "other-ca.pem"))
        let wrongName = try makeClient([server.url], loop: loop, tls: tls(serverName: "nats.example.org"))
        let (a, b) = (Reasons(wrongCA), Reasons(wrongName))
        #expect(try turn(loop, until: { !a.all.isEmpty && !b.all.isEmpty }))
        #expect(a.all[0].hasPrefix("TLS handshake: ") && a.all[0].contains("certificate verify failed")
                && a.all[0].contains("unable to get local issuer certificate"), "\(a.all)")
        #expect(b.all[0].contains("certificate verify failed") && b.all[0].contains("hostname mismatch"), "\(b.all)")
        #expect(wrongCA.state != .connected && wrongName.state != .connected)
        wrongCA.close()
        wrongName.close()
        withExtendedLifetime(server) {}
    }

    @Test func aServerThatVerifiesClientsGetsTheNodesCertificate() throws {
        let server = try tlsServer("""
            tls { cert_file: "\(TestPKI.file("server.pem"))", key_file: "\(TestPKI.file("server.key"))",
                  ca_file: "\(TestPKI.file("ca.pem"))", verify: true }
            """)
        let loop = try EventLoop()
        let without = try makeClient([server.url], loop: loop, tls: tls())
        let reasons = Reasons(without)
        let with = try makeClient([server.url], loop: loop, tls: tls(client: true))
        defer { with.close() }
        #expect(try turn(loop, until: { with.state == .connected && !reasons.all.isEmpty }))
        #expect(without.state != .connected)
        without.close()
        withExtendedLifetime(server) {}
    }

    @Test func neverPlaintextWhenTLSIsAskedAndNeverTLSLessWhenRequired() throws {
        let plain = try NATSServerProcess()
        try plain.start()
        let secure = try tlsServer()
        let loop = try EventLoop()
        let wantsTLS = try makeClient([plain.url], loop: loop, tls: tls())
        let noTLS = try makeClient([secure.url], loop: loop)
        let (a, b) = (Reasons(wantsTLS), Reasons(noTLS))
        #expect(try turn(loop, until: { !a.all.isEmpty && !b.all.isEmpty }))
        #expect(a.all[0] == "the server does not offer TLS, which tls:// or cluster.tls asks for (never downgraded)")
        #expect(b.all[0] == "the server requires TLS: use tls:// URLs or a cluster.tls section")
        wantsTLS.close()
        noTLS.close()
        withExtendedLifetime((plain, secure)) {}
    }

    @Test func authenticatesAnNkeyUserBySigningTheNonce() throws {
        let seed = NKey.Seed(role: .user, raw: (0..<32).map { _ in UInt8.random(in: 0...255) })
        let publicKey = try NATSNKeySigner.publicKey(of: seed)
        // nats-server checks the key's text (prefix and checksum) when it reads its config.
        let conf = try TestPKI.serverConfig("authorization { users: [ { nkey: \(publicKey) } ] }")
        let server = try NATSServerProcess(extraArguments: ["-c", conf])
        try server.start()
        let loop = try EventLoop()
        let right = try makeClient([server.url], loop: loop, credentials: .nkey(publicKey: publicKey, seed: seed))
        defer { right.close() }
        // Another seed claiming the same public key: its signature does not verify.
        let impostor = NKey.Seed(role: .user, raw: seed.raw.map { $0 ^ 1 })
        let wrong = try makeClient([server.url], loop: loop, credentials: .nkey(publicKey: publicKey, seed: impostor))
        let reasons = Reasons(wrong)
        #expect(try turn(loop, until: { right.state == .connected && !reasons.all.isEmpty }))
        #expect(reasons.all[0] == "server error: Authorization Violation")
        #expect(!reasons.all[0].contains(NKey.encodeSeed(seed)))
        wrong.close()
        withExtendedLifetime(server) {}
    }

    @Test func nkeyOverTLSWithAHostName() throws {
        let seed = NKey.Seed(role: .user, raw: (0..<32).map { UInt8($0) })
        let publicKey = try NATSNKeySigner.publicKey(of: seed)
        let server = try tlsServer(TestPKI.serverTLS + "\nauthorization { users: [ { nkey: \(publicKey) } ] }")
        let loop = try EventLoop()
        let client = try makeClient(["nats://localhost:\(server.port)"], loop: loop,
                                    credentials: .nkey(publicKey: publicKey, seed: seed), tls: tls())
        defer { client.close() }
        #expect(try turn(loop, until: { client.state == .connected }))
        withExtendedLifetime(server) {}
    }

    /// A JWT user's CONNECT, checked field by field: the JWT as given, and a signature of the
    /// INFO's nonce that verifies with the seed's public key (OpenSSL's Ed25519 verify).
    @Test func aCredsUserSendsItsJWTAndTheNoncesSignature() throws {
        let seed = NKey.Seed(role: .user, raw: (0..<32).map { UInt8(255 - $0) })
        let jwt = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVIn0.c2ln"
        let nonce = "pq7Xw-3_bZ9aR2tYcVfE1w"
        let server = try ScriptedServer(info: #"{"server_id":"S","max_payload":1024,"headers":true,"nonce":"\#(nonce)"}"#)
        let loop = try EventLoop()
        let client = try makeClient([server.url], loop: loop, credentials: .jwt(jwt, seed: seed))
        defer { client.close() }
        #expect(try turn(loop, until: { server.poll(); return client.state == .connected }))
        let sent = String(decoding: server.received, as: UTF8.self)
        let line = sent.split(separator: "\r\n").first { $0.hasPrefix("CONNECT ") }!
        let connect = try JSONParser.parse(Array(line.dropFirst(8).utf8), maxDepth: 4).object!
        #expect(connect["jwt"]?.string == jwt && connect["nkey"] == nil)
        let signature = try #require(connect["sig"]?.string)
        #expect(signature.count == 86 && !sent.contains(NKey.encodeSeed(seed)))
        let publicRaw = try NKey.decodePublicKey(try NATSNKeySigner.publicKey(of: seed), role: .user)
        #expect(verify(signature: signature, of: Array(nonce.utf8), publicKey: publicRaw))
        #expect(!verify(signature: signature, of: Array("another nonce".utf8), publicKey: publicRaw))
    }

    @Test func withoutANonceASigningUserLeavesWithTheReason() throws {
        let seed = NKey.Seed(role: .user, raw: [UInt8](repeating: 9, count: 32))
        let server = try ScriptedServer()
        let loop = try EventLoop()
        let client = try makeClient([server.url], loop: loop, credentials: .nkey(publicKey: try NATSNKeySigner.publicKey(of: seed), seed: seed))
        defer { client.close() }
        let reasons = Reasons(client)
        #expect(try turn(loop, until: { server.poll(); return !reasons.all.isEmpty }))
        #expect(reasons.all[0] == "the server sent no nonce to sign: it does not take nkey or JWT users")
    }

    /// A client made from a config's options that ask for TLS, but without the TLS setup
    /// (`NATSClient(urls:options:)` instead of `ReplicationSettings.makeClient`): it must not fall
    /// back to plaintext with a server that allows it.
    @Test func optionsThatAskForTLSNeverConnectInPlaintext() throws {
        let server = try ScriptedServer(info: #"{"server_id":"S","max_payload":1024,"headers":true,"tls_available":true}"#)
        let loop = try EventLoop()
        var cluster = ReplicationSettings()
        cluster.urls = [server.url]
        cluster.nodeID = "n1"
        cluster.tlsEnabled = true
        let client = NATSClient(urls: cluster.serverURLs, options: cluster.connectOptions, loop: loop)
        try client.start()
        let reasons = Reasons(client)
        #expect(try turn(loop, until: { server.poll(); return !reasons.all.isEmpty }))
        #expect(reasons.all[0].hasPrefix("TLS is asked for (tls:// or cluster.tls) but the client was made without a TLS setup"))
        #expect(!String(decoding: server.received, as: UTF8.self).contains("CONNECT"))
        client.close()
        // The same settings' own client starts TLS after INFO: its first bytes are a TLS record.
        let accepted = server.accepted
        let proper = try cluster.makeClient(loop: loop)
        try proper.start()
        defer { proper.close() }
        #expect(try turn(loop, until: { server.poll(); return server.accepted > accepted && !server.received.isEmpty }))
        #expect(server.received.first == 0x16, "a TLS handshake record, not plaintext")
    }

    @Test func aServerThatSendsMoreThanInfoBeforeTLSIsLeft() throws {
        let server = try ScriptedServer(info: #"{"server_id":"S","max_payload":1024,"headers":true,"tls_required":true}"# + "\r\nPONG")
        let loop = try EventLoop()
        let client = try makeClient([server.url], loop: loop, tls: tls())
        defer { client.close() }
        let reasons = Reasons(client)
        #expect(try turn(loop, until: { server.poll(); return !reasons.all.isEmpty }))
        #expect(reasons.all[0] == "the server sent more than INFO before TLS")
        #expect(client.state != .connected)
    }

    @Test func aServerThatNeverAnswersTheTLSHandshakeTimesOut() throws {
        let server = try ScriptedServer(info: #"{"server_id":"S","max_payload":1024,"headers":true,"tls_required":true}"#,
                                        answerHandshake: false)
        let loop = try EventLoop()
        let client = try makeClient([server.url], loop: loop, tls: tls())
        defer { client.close() }
        let reasons = Reasons(client)
        #expect(try turn(loop, until: { server.poll(); return !reasons.all.isEmpty }, timeoutMs: 3_000))
        #expect(reasons.all[0] == "the TLS handshake did not finish within 1000 ms")
        // What reached the server after INFO is a TLS record (a handshake's first byte), no CONNECT.
        #expect(server.received.first == 0x16 && !String(decoding: server.received, as: UTF8.self).contains("CONNECT"))
    }

    @Test func aHostNameIsResolvedOffTheLoopOnEveryAttempt() throws {
        let server = try NATSServerProcess()
        try server.start()
        let loop = try EventLoop()
        // localhost may resolve to ::1 first, where nothing listens: the next address follows.
        let client = try makeClient(["nats://localhost:\(server.port)"], loop: loop)
        defer { client.close() }
        #expect(try turn(loop, until: { client.state == .connected }))
        server.kill()
        #expect(try turn(loop, until: { client.state != .connected }))
        try server.start()
        #expect(try turn(loop, until: { client.state == .connected }, timeoutMs: 5_000))
        #expect(client.connectionCount == 2)
        // A name that cannot resolve (RFC 6761 reserves .invalid): a reason, and no connection.
        let nowhere = try makeClient(["nats://nats.invalid:4222"], loop: loop)
        defer { nowhere.close() }
        let reasons = Reasons(nowhere)
        var longestTurn: Int64 = 0
        #expect(try turn(loop, until: {
            let before = monotonicMilliseconds()
            try? loop.turn(timeoutMs: 10)
            longestTurn = max(longestTurn, monotonicMilliseconds() - before)
            return !reasons.all.isEmpty
        }, timeoutMs: 3_000))
        #expect(reasons.all[0].hasPrefix("resolving the server's name: ") || reasons.all[0] == "the server's name was not resolved within 1000 ms",
                "\(reasons.all)")
        #expect(longestTurn < 200, "a loop turn took \(longestTurn) ms while a name was resolved")
        print("NATS host name that does not resolve: \(reasons.all[0]); longest loop turn meanwhile: \(longestTurn) ms")
    }

    /// `handshake_first` (NATS 2.10's option, newer than Debian's nats-server): a scripted server
    /// that speaks TLS from the first byte, with the loop's own server-side TLS; INFO, CONNECT and
    /// the handshake's PING and PONG all go encrypted.
    @Test func handshakeFirstStartsTLSAtTheFirstByte() throws {
        let loop = try EventLoop()
        let listener = try Socket.listen(on: ListenAddress(host: "127.0.0.1", port: 0), backlog: 4)
        defer { close(listener) }
        let serverContext = try TLSContext.server(certificateChain: TestPKI.file("server.pem"), privateKey: TestPKI.file("server.key"))
        let context = try TLSContext.verifyingClient(caFile: TestPKI.file("ca.pem"))
        let client = try makeClient(["tls://localhost:\(Socket.localPort(listener)!)"], loop: loop,
                                    tls: NATSTLS(context: context, everyServer: false, handshakeFirst: true))
        defer { client.close() }
        var peer: TLSScriptedPeer?
        #expect(try turn(loop, until: {
            let fd = accept(listener, nil, nil)
            if fd >= 0 {
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                let p = TLSScriptedPeer(fd: fd, loop: loop)
                try? p.start(tls: serverContext)
                Array("INFO {\"server_id\":\"S\",\"max_payload\":1024,\"headers\":true,\"tls_required\":true}\r\n".utf8)
                    .withUnsafeBytes { p.append($0) }
                peer = p
            }
            return client.state == .connected
        }))
        let got = String(decoding: peer?.got ?? [], as: UTF8.self)
        #expect(got.hasPrefix("CONNECT {") && got.contains("\"tls_required\":true"), "\(got.prefix(200))")
        peer?.close()
    }

    /// RFC 8032's first test key: the public key and a signature Python's `cryptography` made.
    @Test func signsAsEd25519Does() throws {
        let seed = try NKey.decodeSeed("SUAJ2YNRTXX72WTAXKCEV5ES5QWMIRCJYVUXWMTJDFYDXLADDSXH6YALCA")
        #expect(try NATSNKeySigner.publicKey(of: seed) == "UDLVVGABQKYQVN6VJP7NHSLEA45A5YLS6PNKMIZFV4BBU2HXA5IRUVAL")
        #expect(try NATSNKeySigner.signNonce("nonce-123", with: seed)
                == "k812VekZAQGrwfQQB0-qx69JqgntiRWKzZoRc2nLmVr1m09-vTQQlh7B4tYNK7VWs9-vWWsC4HsJkOjomw8rCw")
    }
}

/// Ed25519 verification with OpenSSL, for the tests (the client only signs).
func verify(signature: String, of message: [UInt8], publicKey: [UInt8]) -> Bool {
    var base64 = signature.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while base64.count % 4 != 0 { base64 += "=" }
    guard let sig = Data(base64Encoded: base64).map(Array.init),
          let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, publicKey, publicKey.count),
          let context = EVP_MD_CTX_new() else { return false }
    defer {
        EVP_MD_CTX_free(context)
        EVP_PKEY_free(key)
    }
    guard EVP_DigestVerifyInit(context, nil, nil, nil, key) == 1 else { return false }
    return EVP_DigestVerify(context, sig, sig.count, message, message.count) == 1
}

/// The server side of `handshakeFirstStartsTLSAtTheFirstByte`: records the client's decrypted
/// bytes and answers its first PING.
final class TLSScriptedPeer: ByteStream {
    var got: [UInt8] = []

    override func received(_ bytes: UnsafeMutableRawBufferPointer) {
        let before = String(decoding: got, as: UTF8.self).contains("PING\r\n")
        got.append(contentsOf: bytes)
        if !before && String(decoding: got, as: UTF8.self).contains("PING\r\n") {
            Array("PONG\r\n".utf8).withUnsafeBytes { append($0) }
        }
    }
}
