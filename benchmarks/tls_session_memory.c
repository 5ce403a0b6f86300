// tls_session_memory: what the system OpenSSL keeps for one idle TLS server connection, and where.
//
// Opens N connections over socketpairs, the server side set up like vigild's listener
// (Sources/VigilLoop/TLSContext.swift: TLS 1.2 minimum, the same TLS 1.2 ciphers and TLS 1.3
// suites, no compression, no renegotiation, server cipher preference, SSL_MODE_RELEASE_BUFFERS,
// partial and moving writes, ALPN http/1.1) with an ECDSA P-256 certificate made here. Each
// connection completes its handshake, carries one request and one answer (an upgrade's worth),
// and the server's SSL_read runs into WANT_READ: where an idle vigild connection rests. The client
// side is then freed. Two passes, each in its own child process:
//
//   1. OpenSSL's heap (through CRYPTO_set_mem_functions), counting only what the server side
//      allocates: the live bytes per connection, by allocation site (OpenSSL's source file:line,
//      sites holding 32 B or more per connection).
//   2. The process's RSS growth per connection with glibc's malloc alone (its chunk overhead and
//      any fragmentation included): the figure comparable to vigild's RSS per idle connection.
//
// Both start counting after 32 warm-up connections (algorithm fetches and caches shared by all
// connections are not per-connection costs).
//
// Options, to see what a setting would change:
//   --tls12                 the client offers TLS 1.2 only
//   --num-tickets K         SSL_CTX_set_num_tickets (TLS 1.3 tickets per handshake; OpenSSL's default is 2)
//   --no-ticket             SSL_OP_NO_TICKET (TLS 1.3 then issues stateful tickets kept in the cache)
//   --cache-off             SSL_SESS_CACHE_OFF
//   --keep-buffers          without SSL_MODE_RELEASE_BUFFERS
//   --free-buffers          SSL_free_buffers after the idle read (what releasing explicitly would add)
//
// Build: cc -O2 -o tls_session_memory benchmarks/tls_session_memory.c -lssl -lcrypto
// Run:   ./tls_session_memory [N (default 2000)] [options]
#define _GNU_SOURCE
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

// -- the counting allocator (pass 1) ---------------------------------------------------------

enum { MAX_SITES = 512 };
struct site { const char *file; int line; long bytes; long count; };
static struct site sites[MAX_SITES];
static int nsites;
static int counting;  // set around the server side's calls
static long live;

// A header before each block: its size and site (-1: not counted). 16 bytes keeps the alignment.
struct header { size_t size; int site; int pad; };

static int site_index(const char *file, int line) {
    for (int i = 0; i < nsites; i++)
        if (sites[i].line == line && sites[i].file == file) return i;
    if (nsites == MAX_SITES) return -1;
    sites[nsites] = (struct site){ file, line, 0, 0 };
    return nsites++;
}

static void *counted_malloc(size_t size, const char *file, int line) {
    struct header *h = malloc(size + sizeof *h);
    if (h == NULL) return NULL;
    h->size = size;
    h->site = counting ? site_index(file, line) : -1;
    if (h->site >= 0) {
        sites[h->site].bytes += (long)size;
        sites[h->site].count++;
        live += (long)size;
    }
    return h + 1;
}

static void counted_free(void *p, const char *file, int line) {
    (void)file; (void)line;
    if (p == NULL) return;
    struct header *h = (struct header *)p - 1;
    if (h->site >= 0) {
        sites[h->site].bytes -= (long)h->size;
        sites[h->site].count--;
        live -= (long)h->size;
    }
    free(h);
}

static void *counted_realloc(void *p, size_t size, const char *file, int line) {
    if (p == NULL) return counted_malloc(size, file, line);
    struct header *old = (struct header *)p - 1;
    void *q = counted_malloc(size, file, line);
    if (q == NULL) return NULL;
    memcpy(q, p, old->size < size ? old->size : size);
    counted_free(p, file, line);
    return q;
}

// -- the connections ---------------------------------------------------------------------------

struct options { int tls12, num_tickets, no_ticket, cache_off, keep_buffers, free_buffers; };

static void fail(const char *what) {
    fprintf(stderr, "%s failed\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static int select_http11(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                         const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl; (void)arg;
    for (unsigned int i = 0; i < inlen && i + 1 + in[i] <= inlen; i += 1 + in[i]) {
        if (in[i] == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
            *out = in + i + 1;
            *outlen = 8;
            return SSL_TLSEXT_ERR_OK;
        }
    }
    return SSL_TLSEXT_ERR_NOACK;
}

static SSL_CTX *server_context(const struct options *o) {
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *cert = X509_new();
    if (key == NULL || cert == NULL) fail("key and certificate");
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0);
    X509_set_issuer_name(cert, X509_get_subject_name(cert));
    X509_set_pubkey(cert, key);
    if (X509_sign(cert, key, EVP_sha256()) == 0) fail("X509_sign");

    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL || SSL_CTX_use_certificate(ctx, cert) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1) fail("server context");
    X509_free(cert);
    EVP_PKEY_free(key);
    // As TLSContext.swift does.
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
                                 "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305");
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(ctx, (o->keep_buffers ? 0 : SSL_MODE_RELEASE_BUFFERS) | SSL_MODE_ENABLE_PARTIAL_WRITE
                              | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_alpn_select_cb(ctx, select_http11, NULL);
    // The variations.
    if (o->num_tickets >= 0) SSL_CTX_set_num_tickets(ctx, (size_t)o->num_tickets);
    if (o->no_ticket) SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    if (o->cache_off) SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    return ctx;
}

static SSL_CTX *client_context(const struct options *o) {
    static const unsigned char alpn[] = { 8, 'h', 't', 't', 'p', '/', '1', '.', '1' };
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) fail("client context");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);  // a throwaway certificate on a socketpair
    SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn);
    if (o->tls12) SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    return ctx;
}

static int server_call(int (*step)(SSL *), SSL *s) {
    counting = 1;
    int rc = step(s);
    counting = 0;
    return rc;
}

static int do_handshake(SSL *s) { return SSL_do_handshake(s); }

// Reads until WANT_READ; returns the bytes read.
static int drain(SSL *s) {
    char buffer[16384];
    int total = 0, n;
    while ((n = SSL_read(s, buffer, sizeof buffer)) > 0) total += n;
    if (SSL_get_error(s, n) != SSL_ERROR_WANT_READ) fail("SSL_read");
    return total;
}

static int answer(SSL *s) {
    static const char response[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    int got = drain(s);
    if (SSL_write(s, response, sizeof response - 1) != (int)sizeof response - 1) fail("server SSL_write");
    drain(s);  // the idle state: the last read ended on WANT_READ
    return got;
}

static int release(SSL *s) { return SSL_free_buffers(s); }

// One idle server connection; the client side is gone when it returns.
static SSL *open_idle(SSL_CTX *server, SSL_CTX *client, const struct options *o) {
    static const char request[] = "GET /v1 HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) fail("socketpair");
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    fcntl(fds[1], F_SETFL, O_NONBLOCK);
    counting = 1;
    SSL *s = SSL_new(server);
    if (s == NULL || SSL_set_fd(s, fds[0]) != 1) fail("server SSL_new");
    SSL_set_accept_state(s);
    counting = 0;
    SSL *c = SSL_new(client);
    if (c == NULL || SSL_set_fd(c, fds[1]) != 1) fail("client SSL_new");
    SSL_set_connect_state(c);
    int server_done = 0, client_done = 0;
    for (int turns = 0; !(server_done && client_done); turns++) {
        if (turns > 100) fail("handshake");
        if (!client_done) client_done = SSL_do_handshake(c) == 1;
        if (!server_done) server_done = server_call(do_handshake, s) == 1;
    }
    if (SSL_write(c, request, sizeof request - 1) != (int)sizeof request - 1) fail("client SSL_write");
    if (server_call(answer, s) != (int)sizeof request - 1) fail("request");
    drain(c);  // the answer and the TLS 1.3 tickets
    if (o->free_buffers && server_call(release, s) != 1) fail("SSL_free_buffers");
    SSL_free(c);
    close(fds[1]);
    return s;
}

static long rss_kib(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2) fail("/proc/self/statm");
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int by_bytes(const void *a, const void *b) {
    long x = ((const struct site *)a)->bytes, y = ((const struct site *)b)->bytes;
    return (x < y) - (x > y);
}

static void pass(int n, const struct options *o, int count_heap) {
    if (count_heap && CRYPTO_set_mem_functions(counted_malloc, counted_realloc, counted_free) != 1) fail("CRYPTO_set_mem_functions");
    SSL_CTX *server = server_context(o), *client = client_context(o);
    enum { WARMUP = 32 };
    SSL **held = calloc((size_t)(n + WARMUP), sizeof *held);
    for (int i = 0; i < WARMUP; i++) held[i] = open_idle(server, client, o);
    long live0 = live, rss0 = rss_kib();
    struct site *before = calloc(MAX_SITES, sizeof *before);
    memcpy(before, sites, sizeof sites);
    for (int i = WARMUP; i < n + WARMUP; i++) held[i] = open_idle(server, client, o);
    const char *protocol = SSL_get_version(held[WARMUP]);
    if (count_heap) {
        printf("%s, %d idle server connections: OpenSSL's live heap %.0f B per connection\n",
               protocol, n, (double)(live - live0) / n);
        for (int i = 0; i < nsites; i++) {
            sites[i].bytes -= before[i].bytes;
            sites[i].count -= before[i].count;
        }
        qsort(sites, (size_t)nsites, sizeof sites[0], by_bytes);
        long shown = 0;
        for (int i = 0; i < nsites && sites[i].bytes >= 32L * n; i++) {
            printf("  %6.0f B in %5.2f blocks  %s:%d\n", (double)sites[i].bytes / n, (double)sites[i].count / n,
                   sites[i].file, sites[i].line);
            shown += sites[i].bytes;
        }
        printf("  %6.0f B elsewhere\n", (double)(live - live0 - shown) / n);
    } else {
        printf("%s, %d idle server connections: RSS %.2f KiB per connection (glibc malloc)\n",
               protocol, n, (double)(rss_kib() - rss0) / n);
    }
    fflush(stdout);
}

int main(int argc, char **argv) {
    int n = 2000;
    struct options o = { .num_tickets = -1 };
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tls12") == 0) o.tls12 = 1;
        else if (strcmp(argv[i], "--num-tickets") == 0 && i + 1 < argc) o.num_tickets = atoi(argv[++i]);
        else if (strcmp(argv[i], "--no-ticket") == 0) o.no_ticket = 1;
        else if (strcmp(argv[i], "--cache-off") == 0) o.cache_off = 1;
        else if (strcmp(argv[i], "--keep-buffers") == 0) o.keep_buffers = 1;
        else if (strcmp(argv[i], "--free-buffers") == 0) o.free_buffers = 1;
        else if (argv[i][0] != '-' && atoi(argv[i]) > 0) n = atoi(argv[i]);
        else {
            fprintf(stderr, "usage: %s [N] [--tls12] [--num-tickets K] [--no-ticket] [--cache-off] [--keep-buffers] [--free-buffers]\n", argv[0]);
            return 2;
        }
    }
    // Each pass in a fresh process: the counting allocator must be installed before OpenSSL
    // allocates anything, and the RSS pass must not carry it.
    for (int count_heap = 1; count_heap >= 0; count_heap--) {
        pid_t child = fork();
        if (child < 0) fail("fork");
        if (child == 0) {
            pass(n, &o, count_heap);
            _exit(0);
        }
        int status = 0;
        if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    }
    return 0;
}
