#ifndef VIGIL_COPENSSL_SHIM_H
#define VIGIL_COPENSSL_SHIM_H
#include <openssl/sha.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <string.h>

// OpenSSL's setters below are macros over SSL_CTX_ctrl, which Swift cannot import: these
// inline functions give them a callable form. Nothing here keeps state.

static inline long vigil_ssl_ctx_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
static inline int vigil_ssl_ctx_set_min_proto_version(SSL_CTX *ctx, int version) { return (int)SSL_CTX_set_min_proto_version(ctx, version); }
static inline long vigil_ssl_ctx_set_session_cache_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_session_cache_mode(ctx, mode); }
static inline int vigil_ssl_set_tlsext_host_name(SSL *ssl, const char *name) { return (int)SSL_set_tlsext_host_name(ssl, name); }

static const int VIGIL_TLS1_2_VERSION = TLS1_2_VERSION;
static const int VIGIL_TLS1_3_VERSION = TLS1_3_VERSION;
static const long VIGIL_SSL_MODE_ENABLE_PARTIAL_WRITE = SSL_MODE_ENABLE_PARTIAL_WRITE;
static const long VIGIL_SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER = SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER;
static const long VIGIL_SSL_MODE_RELEASE_BUFFERS = SSL_MODE_RELEASE_BUFFERS;
static const uint64_t VIGIL_SSL_OP_NO_COMPRESSION = SSL_OP_NO_COMPRESSION;
static const uint64_t VIGIL_SSL_OP_CIPHER_SERVER_PREFERENCE = SSL_OP_CIPHER_SERVER_PREFERENCE;
static const uint64_t VIGIL_SSL_OP_NO_RENEGOTIATION = SSL_OP_NO_RENEGOTIATION;
static const int VIGIL_SSL_FILETYPE_PEM = SSL_FILETYPE_PEM;

/// SHA-256 of `count` bytes into `out` (32 bytes), through the low-level calls: OpenSSL 3's
/// one-shot `SHA256()` fetches the algorithm on every call, which made a short input's digest about
/// three times slower (the state digest hashes one short input per pin).
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
#endif
static inline void vigil_sha256(const void *data, size_t count, unsigned char *out) {
    SHA256_CTX context;
    SHA256_Init(&context);
    SHA256_Update(&context, data, count);
    SHA256_Final(out, &context);
}
#if defined(__clang__)
#pragma clang diagnostic pop
#endif

/// ALPN (RFC 7301) for a server that speaks HTTP/1.1 only: selects "http/1.1" when the client
/// offers it; otherwise the handshake goes on without ALPN (SSL_TLSEXT_ERR_NOACK), and the
/// client finds out from the HTTP exchange.
static inline int vigil_alpn_select_http11(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                           const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl; (void)arg;
    unsigned int i = 0;
    while (i < inlen) {
        unsigned int len = in[i];
        if (i + 1 + len > inlen) break;
        if (len == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
            *out = in + i + 1;
            *outlen = (unsigned char)len;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + len;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

static inline void vigil_ssl_ctx_select_http11(SSL_CTX *ctx) {
    SSL_CTX_set_alpn_select_cb(ctx, vigil_alpn_select_http11, NULL);
}

/// The client side's ALPN offer: "http/1.1" only.
static inline int vigil_ssl_ctx_offer_http11(SSL_CTX *ctx) {
    static const unsigned char protos[] = { 8, 'h', 't', 't', 'p', '/', '1', '.', '1' };
    return SSL_CTX_set_alpn_protos(ctx, protos, sizeof protos);
}

/// The protocol ALPN selected on `ssl` ("" when none) into `buffer` (NUL-terminated, at most `size`).
static inline void vigil_ssl_alpn_selected(const SSL *ssl, char *buffer, size_t size) {
    const unsigned char *data = NULL;
    unsigned int len = 0;
    SSL_get0_alpn_selected(ssl, &data, &len);
    if (len >= size) len = (unsigned int)size - 1;
    if (len > 0) memcpy(buffer, data, len);
    buffer[len] = 0;
}
#endif
