#if os(Linux)
import COpenSSL
import Glibc

/// One client TLS session (OpenSSL) over memory BIOs: ciphertext in and out as bytes, so the
/// socket I/O stays the connection's own (`send` with `MSG_NOSIGNAL`: a peer gone is EPIPE, never
/// SIGPIPE, and the library changes no signal disposition of the app).
///
/// Verification: the system's default trust store (`SSL_CTX_set_default_verify_paths`) plus the
/// PEM certificates the options add, the peer's certificate required (`SSL_VERIFY_PEER`) and its
/// name checked against the URL's host (`SSL_set1_host`, or its IP entries for an address), SNI
/// sent for a name. TLS 1.2 at least, ALPN `http/1.1`, renegotiation and compression off.
///
/// Owned by one thread (the connection's socket thread); OpenSSL's error queue is per thread.
final class TLSClientSession {
    private let ctx: OpaquePointer
    private let ssl: OpaquePointer
    /// Ciphertext from the network, read by OpenSSL (owned by `ssl` once set).
    private let input: OpaquePointer
    /// Ciphertext OpenSSL wrote, to be sent (owned by `ssl` once set).
    private let output: OpaquePointer

    /// What a handshake step or a read needs next.
    enum Step: Equatable {
        case done
        /// More ciphertext from the peer (after sending what `drainOutput` holds).
        case wantRead
        /// The peer ended TLS (close_notify).
        case closed
        case failed(String)
    }

    init(host: String, trustedPEMFiles: [String], trustedPEM: [String]) throws(TransportError) {
        ERR_clear_error()
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw .tls(Self.reasons("SSL_CTX_new")) }
        self.ctx = ctx
        guard let ssl = SSL_new(ctx), let input = BIO_new(BIO_s_mem()), let output = BIO_new(BIO_s_mem()) else {
            SSL_CTX_free(ctx)
            throw .tls(Self.reasons("SSL_new/BIO_new"))
        }
        self.ssl = ssl
        self.input = input
        self.output = output
        // From here `deinit` frees everything: `ssl` owns both BIOs.
        SSL_set_bio(ssl, input, output)
        // An empty memory BIO reads as "retry", not as end of file.
        _ = BIO_ctrl(input, BIO_C_SET_BUF_MEM_EOF_RETURN, -1, nil)

        guard vigil_ssl_ctx_set_min_proto_version(ctx, VIGIL_TLS1_2_VERSION) == 1 else {
            throw .tls(Self.reasons("cannot set the minimum TLS version"))
        }
        SSL_CTX_set_options(ctx, VIGIL_SSL_OP_NO_COMPRESSION | VIGIL_SSL_OP_NO_RENEGOTIATION)
        guard SSL_CTX_set_default_verify_paths(ctx) == 1 else {
            throw .tls(Self.reasons("cannot load the system's trusted certificates"))
        }
        for path in trustedPEMFiles {
            guard SSL_CTX_load_verify_locations(ctx, path, nil) == 1 else {
                throw .tls(Self.reasons("cannot load trusted certificates from \(path)"))
            }
        }
        for pem in trustedPEM {
            try Self.addCertificates(pem: pem, to: ctx)
        }
        _ = vigil_ssl_ctx_offer_http11(ctx)
        SSL_set_verify(ssl, SSL_VERIFY_PEER, nil)
        if Self.isIPAddress(host) {
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1 else {
                throw .tls(Self.reasons("cannot check the server's address \(host)"))
            }
        } else {
            // SNI carries names only (RFC 6066 §3).
            guard SSL_set1_host(ssl, host) == 1, vigil_ssl_set_tlsext_host_name(ssl, host) == 1 else {
                throw .tls(Self.reasons("cannot check the server's name \(host)"))
            }
        }
        SSL_set_connect_state(ssl)
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(ctx)
    }

    /// Every certificate of a PEM text, added to the context's trust store.
    private static func addCertificates(pem: String, to ctx: OpaquePointer) throws(TransportError) {
        let bytes = Array(pem.utf8)
        guard let bio = bytes.withUnsafeBytes({ BIO_new_mem_buf($0.baseAddress, Int32(clamping: $0.count)) }) else {
            throw .tls(reasons("BIO_new_mem_buf"))
        }
        defer { BIO_free(bio) }
        let store = SSL_CTX_get_cert_store(ctx)
        var added = 0
        while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) {
            defer { X509_free(certificate) }
            guard X509_STORE_add_cert(store, certificate) == 1 else {
                throw .tls(reasons("cannot add a trusted certificate"))
            }
            added += 1
        }
        // The loop ends on "no start line" at the end of the text: not an error once one was read.
        ERR_clear_error()
        guard added > 0 else { throw .tls("no certificate in the trusted PEM text") }
    }

    static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// One step of the handshake; send `drainOutput` after it whatever it returns.
    func handshake() -> Step {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .done }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .wantRead
        case SSL_ERROR_ZERO_RETURN:
            return .closed
        default:
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK {
                return .failed("certificate not trusted: " + String(cString: X509_verify_cert_error_string(verify)))
            }
            return .failed(Self.reasons("TLS handshake failed"))
        }
    }

    /// Ciphertext that arrived from the peer.
    func feed(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        // A memory BIO takes all of it (it grows), so the count is not checked for partial writes.
        _ = BIO_write(input, base, Int32(clamping: bytes.count))
    }

    /// Plaintext decrypted from what was fed, into `buffer`: `.done` with `count` > 0, or what
    /// is needed next (`.wantRead` when all that was fed is consumed).
    func read(into buffer: UnsafeMutableRawBufferPointer, count: inout Int) -> Step {
        ERR_clear_error()
        count = 0
        let n = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
        if n > 0 {
            count = Int(n)
            return .done
        }
        switch SSL_get_error(ssl, n) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .wantRead
        case SSL_ERROR_ZERO_RETURN:
            return .closed
        default:
            return .failed(Self.reasons("TLS read failed"))
        }
    }

    /// Encrypts all of `plaintext` into the output BIO (a memory BIO never says "retry" on write,
    /// and renegotiation is off, so one call takes it all or fails).
    func write(_ plaintext: UnsafeRawBufferPointer) -> Bool {
        guard let base = plaintext.baseAddress, plaintext.count > 0 else { return true }
        ERR_clear_error()
        var written = 0
        return SSL_write_ex(ssl, base, plaintext.count, &written) == 1 && written == plaintext.count
    }

    /// Appends the ciphertext OpenSSL produced to `out` and empties the output BIO.
    func drainOutput(into out: inout [UInt8]) {
        let pending = Int(BIO_ctrl_pending(output))
        guard pending > 0 else { return }
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: pending))
        let read = out.withUnsafeMutableBytes { all in
            BIO_read(output, all.baseAddress! + start, Int32(clamping: pending))
        }
        out.removeLast(pending - max(0, Int(read)))
    }

    /// Queues a close_notify (sent with the next `drainOutput`); the peer's is not awaited.
    func shutdown() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    /// `what`, then OpenSSL's reasons from this thread's error queue (emptied).
    static func reasons(_ what: String) -> String {
        var parts: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            parts.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return parts.isEmpty ? what : what + ": " + parts.joined(separator: "; ")
    }
}
#endif
