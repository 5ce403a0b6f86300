import COpenSSL
import Glibc

/// A TLS setup shared by the streams of one listener (or of a load client): OpenSSL's `SSL_CTX`
/// with Vigil's choices made once.
///
/// Server: TLS 1.2 minimum and 1.3 preferred, a modern cipher list (AEAD with forward secrecy
/// only) unless the config names another, ALPN `http/1.1` (RFC 7301; clients that offer only
/// other protocols proceed without ALPN), SNI accepted (any name: one certificate serves all),
/// no TLS compression, no renegotiation. `SSL_MODE_RELEASE_BUFFERS` lets an idle connection give
/// its record buffers back (33 KB of OpenSSL heap each otherwise). What an idle connection keeps,
/// about 13.4 KiB of OpenSSL heap with TLS 1.3 (7.4 KiB of it the `SSL` object itself, then the
/// two record ciphers, the session), is listed site by site by benchmarks/tls_session_memory.c;
/// docs/BENCHMARKS.md has the daemon's RSS per idle wss connection. Tickets and the session
/// cache stay at OpenSSL's defaults on purpose: the tickets are stateless (the session travels
/// encrypted to the client) and TLS 1.3 puts nothing in the cache, so resumption costs an idle
/// connection nothing. Measured with that program: `SSL_CTX_set_num_tickets(0)` (no resumption)
/// and `SSL_SESS_CACHE_OFF` each save 0 B per connection; `SSL_OP_NO_TICKET` adds 1 KB (sessions
/// kept in the cache). Partial writes and a moving write buffer are allowed, which
/// makes OpenSSL's retry rule (retry a write with the same bytes) hold by construction for
/// `ByteStream`'s queue (its head bytes do not move until they are written).
///
/// Reloading (SIGHUP) builds a new context; connections keep the one they started with (OpenSSL
/// counts the references), new handshakes use the new one.
public final class TLSContext {
    let ctx: OpaquePointer
    public let isServer: Bool
    /// The host name a client sends as SNI (client contexts only).
    let serverName: String?

    /// The ciphers offered with TLS 1.2 (OpenSSL's syntax): ECDHE key exchange and AEAD only.
    public static let defaultCiphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
    /// TLS 1.3's suites (all three are AEAD; the order is the server's preference).
    public static let defaultCiphersuites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

    private init(ctx: OpaquePointer, isServer: Bool, serverName: String?) {
        self.ctx = ctx
        self.isServer = isServer
        self.serverName = serverName
    }

    deinit { SSL_CTX_free(ctx) }

    /// A server context from PEM files: the certificate chain (leaf first) and its private key.
    /// Every failure names the file and OpenSSL's reason.
    public static func server(certificateChain: String, privateKey: String, minimumVersion: TLSVersion = .tls12,
                              ciphers: String = defaultCiphers, ciphersuites: String = defaultCiphersuites) throws(TLSError) -> TLSContext {
        guard let ctx = SSL_CTX_new(TLS_server_method()) else { throw TLSError("SSL_CTX_new") }
        let context = TLSContext(ctx: ctx, isServer: true, serverName: nil)
        try context.configure(minimumVersion: minimumVersion, ciphers: ciphers, ciphersuites: ciphersuites)
        guard SSL_CTX_use_certificate_chain_file(ctx, certificateChain) == 1 else {
            throw TLSError("cannot load the certificate chain \(certificateChain)")
        }
        guard SSL_CTX_use_PrivateKey_file(ctx, privateKey, VIGIL_SSL_FILETYPE_PEM) == 1 else {
            let error = TLSError("cannot load the private key \(privateKey)")
            if error.reasons.contains(where: { $0.contains("key values mismatch") }) {
                throw TLSError("the private key \(privateKey) does not match the certificate \(certificateChain)", reasons: error.reasons)
            }
            throw error
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            throw TLSError("the private key \(privateKey) does not match the certificate \(certificateChain)")
        }
        SSL_CTX_set_options(ctx, VIGIL_SSL_OP_CIPHER_SERVER_PREFERENCE | VIGIL_SSL_OP_NO_RENEGOTIATION)
        vigil_ssl_ctx_select_http11(ctx)
        return context
    }

    /// A client context (the load client, tests): verifies the server against `caFile` (PEM) when
    /// given, otherwise does not verify (loopback benchmarks with a throwaway certificate).
    public static func client(caFile: String?, serverName: String? = nil) throws(TLSError) -> TLSContext {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw TLSError("SSL_CTX_new") }
        let context = TLSContext(ctx: ctx, isServer: false, serverName: serverName)
        try context.configure(minimumVersion: .tls12, ciphers: defaultCiphers, ciphersuites: defaultCiphersuites)
        if let caFile {
            guard SSL_CTX_load_verify_locations(ctx, caFile, nil) == 1 else { throw TLSError("cannot load the CA file \(caFile)") }
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        } else {
            SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
        }
        _ = vigil_ssl_ctx_offer_http11(ctx)
        return context
    }

    /// A client context that always verifies the server (a service's outgoing connections, such as
    /// NATS): against `caFile` (PEM) when given, otherwise the system's trusted CAs; the name is
    /// checked per session (`makeSession(fd:verifyName:)`). With `certificateChain` and
    /// `privateKey`, the client presents that certificate when the server asks (mutual TLS). No
    /// ALPN is offered. Every failure names the file and OpenSSL's reason.
    public static func verifyingClient(caFile: String?, certificateChain: String? = nil,
                                       privateKey: String? = nil) throws(TLSError) -> TLSContext {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw TLSError("SSL_CTX_new") }
        let context = TLSContext(ctx: ctx, isServer: false, serverName: nil)
        try context.configure(minimumVersion: .tls12, ciphers: defaultCiphers, ciphersuites: defaultCiphersuites)
        if let caFile {
            guard SSL_CTX_load_verify_locations(ctx, caFile, nil) == 1 else { throw TLSError("cannot load the CA file \(caFile)") }
        } else {
            guard SSL_CTX_set_default_verify_paths(ctx) == 1 else { throw TLSError("cannot load the system's trusted CAs") }
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        if let certificateChain, let privateKey {
            guard SSL_CTX_use_certificate_chain_file(ctx, certificateChain) == 1 else {
                throw TLSError("cannot load the client certificate \(certificateChain)")
            }
            guard SSL_CTX_use_PrivateKey_file(ctx, privateKey, VIGIL_SSL_FILETYPE_PEM) == 1,
                  SSL_CTX_check_private_key(ctx) == 1 else {
                throw TLSError("cannot use the client key \(privateKey) with the certificate \(certificateChain)")
            }
        }
        return context
    }

    private func configure(minimumVersion: TLSVersion, ciphers: String, ciphersuites: String) throws(TLSError) {
        guard vigil_ssl_ctx_set_min_proto_version(ctx, minimumVersion.openSSL) == 1 else {
            throw TLSError("cannot set the minimum TLS version")
        }
        guard SSL_CTX_set_cipher_list(ctx, ciphers) == 1 else { throw TLSError("invalid TLS 1.2 cipher list \"\(ciphers)\"") }
        guard SSL_CTX_set_ciphersuites(ctx, ciphersuites) == 1 else {
            throw TLSError("invalid TLS 1.3 ciphersuites \"\(ciphersuites)\"")
        }
        SSL_CTX_set_options(ctx, VIGIL_SSL_OP_NO_COMPRESSION)
        _ = vigil_ssl_ctx_set_mode(ctx, VIGIL_SSL_MODE_RELEASE_BUFFERS | VIGIL_SSL_MODE_ENABLE_PARTIAL_WRITE
                                       | VIGIL_SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER)
    }

    /// A new session for a connected socket, in the server or client role of this context. A
    /// client session with `verifyName` checks the server's certificate names it (a DNS name, or
    /// an IP address against the certificate's IP entries) and sends it as SNI when it is a name.
    func makeSession(fd: Int32, verifyName: String? = nil) throws(TLSError) -> OpaquePointer {
        guard let ssl = SSL_new(ctx) else { throw TLSError("SSL_new") }
        guard SSL_set_fd(ssl, fd) == 1 else {
            SSL_free(ssl)
            throw TLSError("SSL_set_fd")
        }
        if isServer {
            SSL_set_accept_state(ssl)
        } else {
            if let serverName { _ = vigil_ssl_set_tlsext_host_name(ssl, serverName) }
            if let verifyName {
                let isIP = verifyName.contains(":") || verifyName.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || $0 == 46 }
                let set = isIP ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), verifyName)
                               : SSL_set1_host(ssl, verifyName)
                if !isIP { _ = vigil_ssl_set_tlsext_host_name(ssl, verifyName) }
                guard set == 1 else {
                    SSL_free(ssl)
                    throw TLSError("cannot check the server's name \(verifyName)")
                }
            }
            SSL_set_connect_state(ssl)
        }
        return ssl
    }
}

/// The lowest TLS version a context accepts.
public enum TLSVersion: String, Sendable, CaseIterable {
    case tls12 = "1.2"
    case tls13 = "1.3"

    var openSSL: Int32 {
        switch self {
        case .tls12: return VIGIL_TLS1_2_VERSION
        case .tls13: return VIGIL_TLS1_3_VERSION
        }
    }
}

/// A TLS setup or handshake failure, with OpenSSL's own reasons (its error queue, drained).
public struct TLSError: Error, CustomStringConvertible, Sendable {
    public let what: String
    public let reasons: [String]

    /// `what` failed; OpenSSL's reasons are taken from its error queue (which is emptied).
    public init(_ what: String) {
        self.init(what, reasons: TLSError.drainErrorQueue())
    }

    public init(_ what: String, reasons: [String]) {
        self.what = what
        self.reasons = reasons
    }

    public var description: String {
        reasons.isEmpty ? what : "\(what): \(reasons.joined(separator: "; "))"
    }

    /// OpenSSL's pending errors for this thread, oldest first (the queue is emptied).
    static func drainErrorQueue() -> [String] {
        var out: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { return out }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            out.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
    }
}
