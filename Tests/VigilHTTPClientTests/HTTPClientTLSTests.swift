import Testing
import VigilLoop
import VigilWire
import VigilTestSupport
@testable import VigilHTTPClient

/// https origins against the test server with certificates of the test PKI (Tests/make-test-pki):
/// the chain checked against the configured CA, the certificate against the origin's host.
@Suite(.serialized) struct HTTPClientTLSTests {
    static func tlsFailure(_ rig: Rig, _ i: Int) -> String? {
        if case .tls(let reason) = rig.outcomes.failure(i) { return reason }
        return nil
    }

    @Test func aVerifiedServerByNameAndByAddressWithKeepAlive() throws {
        let rig = try Rig(certificate: TestPKI.file("server")) { $0.caFile = TestPKI.file("ca.pem") }
        #expect(try rig.exchange("/ok", host: "localhost"))
        #expect(try rig.exchange("/ok", host: "localhost"))
        #expect(try rig.exchange("/ok"))  // 127.0.0.1, against the certificate's IP entry
        #expect((0..<3).map { rig.outcomes.body($0) } == ["ok", "ok", "ok"])
        #expect((0..<3).map { rig.outcomes.response($0)?.value("x-connection") } == ["1", "1", "2"])
        #expect(rig.client.snapshot.connectionReuses == 1)
    }

    @Test func aCertificateForAnotherNameIsRefusedWithTheReason() throws {
        let rig = try Rig(certificate: TestPKI.file("elsewhere")) { $0.caFile = TestPKI.file("ca.pem") }
        #expect(try rig.exchange("/ok", host: "localhost"))
        let reason = Self.tlsFailure(rig, 0) ?? ""
        #expect(reason.contains("certificate verify failed") && reason.contains("hostname mismatch"), "\(reason)")
        // The same by address: the certificate has no IP entry.
        #expect(try rig.exchange("/ok"))
        #expect((Self.tlsFailure(rig, 1) ?? "").contains("IP address mismatch"))
        #expect(rig.client.snapshot.failures[.tls] == 2 && rig.client.snapshot.connections == 0)
    }

    @Test func aChainToAnotherCAIsRefused() throws {
        let rig = try Rig(certificate: TestPKI.file("server")) { $0.caFile = TestPKI.file("other-ca.pem") }
        #expect(try rig.exchange("/ok", host: "localhost"))
        let reason = Self.tlsFailure(rig, 0) ?? ""
        #expect(reason.contains("certificate verify failed") && reason.contains("unable to get local issuer certificate"), "\(reason)")
    }

    @Test func theSystemStoreDoesNotTrustTheTestCA() throws {
        let rig = try Rig(certificate: TestPKI.file("server"))
        #expect(try rig.exchange("/ok", host: "localhost"))
        #expect((Self.tlsFailure(rig, 0) ?? "").contains("certificate verify failed"))
    }

    /// A plain server waits for a request line that a ClientHello never completes: the attempt
    /// ends at the connect timeout, and the request waiting for it with it.
    @Test func aHandshakeThatNeverEndsFailsAtTheConnectTimeout() throws {
        let rig = try Rig {
            $0.caFile = TestPKI.file("ca.pem")
            $0.connectTimeoutMs = 300
        }
        let start = monotonicMilliseconds()
        rig.client.send(try OutgoingURL(parsing: "https://localhost:\(rig.server.port)/ok"), into: rig.outcomes)
        #expect(try rig.wait(for: 1))
        let waited = rig.outcomes.list[0].atMs - start
        #expect(rig.outcomes.failure(0) == .timeout(.connecting))
        #expect(waited >= 300 && waited < 500, "failed after \(waited) ms")
    }

    @Test func aCAFileThatCannotBeReadFailsAtTheStart() throws {
        var settings = HTTPClientSettings()
        settings.caFile = "/nonexistent/ca.pem"
        let loop = try EventLoop()
        #expect(throws: TLSError.self) { try HTTPClient(settings: settings, loop: loop) }
    }
}
