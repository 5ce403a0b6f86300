#ifndef VIGIL_COPENSSL_SHIM_H
#define VIGIL_COPENSSL_SHIM_H
#include <openssl/sha.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/kdf.h>
#include <openssl/hmac.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
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
// HKDF's modes are expressions over other macros, which Swift does not import (VigilPush runs
// HKDF's two steps apart, for RFC 8291's intermediate values).
static const int VIGIL_HKDF_MODE_EXTRACT_ONLY = EVP_PKEY_HKDEF_MODE_EXTRACT_ONLY;
static const int VIGIL_HKDF_MODE_EXPAND_ONLY = EVP_PKEY_HKDEF_MODE_EXPAND_ONLY;

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

/// An EC key on P-256 from its uncompressed public point (`pub`, 65 bytes) and, for a key pair, its
/// private scalar (`priv`, big-endian; NULL for a public key alone) into `*out`. 1 on success, 0
/// when OpenSSL refuses (a point off the curve among others). In C because OSSL_PARAM_BLD keeps the
/// parameter names' and values' pointers until OSSL_PARAM_BLD_to_param: Swift's bridged strings and
/// buffers would be gone by then.
static inline int vigil_p256_key_from_octets(const unsigned char *pub, size_t publen,
                                             const unsigned char *priv, size_t privlen, EVP_PKEY **out) {
    int ok = 0;
    *out = NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    BIGNUM *number = NULL;
    EVP_PKEY_CTX *ctx = NULL;
    if (bld == NULL) goto done;
    if (!OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0)) goto done;
    if (!OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pub, publen)) goto done;
    if (priv != NULL) {
        // A secure BIGNUM: its copy in the params sits in OpenSSL's secure heap, cleared on free.
        number = BN_secure_new();
        if (number == NULL || BN_bin2bn(priv, (int)privlen, number) == NULL) goto done;
        if (!OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, number)) goto done;
    }
    params = OSSL_PARAM_BLD_to_param(bld);
    if (params == NULL) goto done;
    ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (ctx == NULL || EVP_PKEY_fromdata_init(ctx) != 1) goto done;
    ok = EVP_PKEY_fromdata(ctx, out, priv != NULL ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, params) == 1;
done:
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    BN_clear_free(number);
    OSSL_PARAM_BLD_free(bld);
    return ok;
}

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
