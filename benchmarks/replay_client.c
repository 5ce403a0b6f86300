// replay_client: W watchers of one panic stream reconnect at once and each asks for its whole
// trail with `since` (benchmarks/replay_reconnect.py drives it): the contact group of a person in
// danger coming back after a network blip.
//
// Each connection completes the upgrade and reads its welcome first (not timed). Then every one
// sends `panic.watch` with `since` in one burst, and the client reads until each has its reply and
// every event after `since`, checking each event's seq (the next one, no gap, no repeat) in place.
// One thread, one epoll, one shared read buffer, frames scanned where they lie, so that the
// client is not what is measured.
//
// Usage: replay_client PORT STREAM TOKEN WATCHERS SINCE LAST [TIMEOUT_S]
// Meanwhile one more connection, the probe, sends a small request (an unknown op, answered with an
// error at once) whenever it has its previous answer: how long the daemon's other clients wait
// while the replays are under way (the answer's latency: p50, p99, max).
//
// Output: one JSON object on stdout: time to the last byte of the last watcher (ms from the first
// request), the median and first watcher's, events and bytes received, seq errors (an event whose
// seq is not the next: a loss or a repeat), watchers that did not finish, the probe's latencies,
// the client's CPU.
//
// Build: cc -O2 -o replay_client benchmarks/replay_client.c
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READ_BUFFER (256 * 1024)

struct watcher {
    int fd;
    unsigned char *carry; // a frame split across reads
    size_t carry_len, carry_cap;
    int replied;
    uint64_t next;     // the seq expected next
    uint64_t events;
    int errors;
    int done;
    double done_ms;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

// A masked (zero key) text frame of `len` bytes into `out`; returns its size.
static size_t text_frame(unsigned char *out, const char *payload, size_t len) {
    size_t h = 0;
    out[h++] = 0x81;
    if (len < 126) {
        out[h++] = 0x80 | (unsigned char)len;
    } else {
        out[h++] = 0x80 | 126;
        out[h++] = (unsigned char)(len >> 8);
        out[h++] = (unsigned char)len;
    }
    memset(out + h, 0, 4);
    h += 4;
    memcpy(out + h, payload, len);
    return h + len;
}

// Reads a blocking socket until the HTTP head and then one whole frame (the welcome) arrived.
static void upgrade(int fd, int port) {
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET /v1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", port);
    if (write(fd, req, n) != n) die("write upgrade");
    unsigned char buf[8192];
    size_t have = 0;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof buf - have);
        if (r <= 0) die("read upgrade");
        have += (size_t)r;
        unsigned char *end = memmem(buf, have, "\r\n\r\n", 4);
        if (!end) continue;
        if (memcmp(buf, "HTTP/1.1 101", 12) != 0) { fprintf(stderr, "upgrade refused: %.*s\n", (int)have, buf); exit(2); }
        size_t at = (size_t)(end - buf) + 4;
        if (have - at >= 2) {
            size_t len = buf[at + 1] & 0x7f, h = 2;
            if (len == 126) { if (have - at < 4) continue; len = (size_t)buf[at + 2] << 8 | buf[at + 3]; h = 4; }
            if (have - at >= h + len) return;
        }
    }
}

// The integer after `"seq":` in a payload, or -1.
static long long seq_of(const unsigned char *p, size_t len) {
    const unsigned char *s = memmem(p, len, "\"seq\":", 6);
    if (!s) return -1;
    s += 6;
    long long v = 0;
    while (s < p + len && *s >= '0' && *s <= '9') v = v * 10 + (*s++ - '0');
    return v;
}

// Consumes whole frames of `data`; returns the bytes consumed.
static size_t frames(struct watcher *w, const unsigned char *data, size_t len, uint64_t last, double t0) {
    size_t at = 0;
    while (len - at >= 2) {
        size_t plen = data[at + 1] & 0x7f, h = 2;
        if (plen == 126) {
            if (len - at < 4) break;
            plen = (size_t)data[at + 2] << 8 | data[at + 3];
            h = 4;
        } else if (plen == 127) {
            if (len - at < 10) break;
            plen = 0;
            for (int i = 0; i < 8; i++) plen = plen << 8 | data[at + 2 + i];
            h = 10;
        }
        if (len - at < h + plen) break;
        const unsigned char *p = data + at + h;
        if ((data[at] & 0x0f) == 1) {
            if (!w->replied) {
                if (!memmem(p, plen, "\"type\":\"ok\"", 11) || memmem(p, plen, "\"gap\":true", 10)) {
                    fprintf(stderr, "watch not answered ok without gap: %.*s\n", (int)(plen > 200 ? 200 : plen), p);
                    w->errors++;
                }
                w->replied = 1;
            } else if (memmem(p, plen, "\"type\":\"panic.", 14)) {
                long long seq = seq_of(p, plen);
                if (seq != (long long)w->next) w->errors++;
                if (seq >= 0) w->next = (uint64_t)seq + 1;
                w->events++;
            }
            if (w->replied && w->next > last && !w->done) {
                w->done = 1;
                w->done_ms = now_ms() - t0;
            }
        } else if ((data[at] & 0x0f) == 8) {
            fprintf(stderr, "closed by the server\n");
            w->done = 1;
            w->errors++;
            w->done_ms = now_ms() - t0;
        }
        at += h + plen;
    }
    return at;
}

static int by_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: %s PORT STREAM TOKEN WATCHERS SINCE LAST [TIMEOUT_S]\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    const char *stream = argv[2], *token = argv[3];
    int count = atoi(argv[4]);
    uint64_t since = strtoull(argv[5], NULL, 10), last = strtoull(argv[6], NULL, 10);
    double timeout_ms = (argc > 7 ? atof(argv[7]) : 120) * 1000;

    struct watcher *ws = calloc((size_t)count, sizeof *ws);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    int ep = epoll_create1(0);
    for (int i = 0; i < count; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) die("socket");
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("connect");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        upgrade(fd, port);
        ws[i].fd = fd;
        ws[i].next = since + 1;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
    }
    // The probe: one more connection, its requests answered by the daemon between the replays' turns.
    int probe = socket(AF_INET, SOCK_STREAM, 0);
    if (probe < 0 || connect(probe, (struct sockaddr *)&addr, sizeof addr) < 0) die("probe connect");
    int one = 1;
    setsockopt(probe, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    upgrade(probe, port);
    {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)count};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, probe, &ev) < 0) die("epoll_ctl probe");
    }
    unsigned char probe_frame[64];
    const char *probe_request = "{\"op\":\"probe\"}";
    size_t probe_len = text_frame(probe_frame, probe_request, strlen(probe_request));
    size_t probe_cap = 1 << 20, probes = 0;
    double *probe_ms = malloc(sizeof(double) * probe_cap), probe_sent = 0;

    char request[512];
    int rlen = snprintf(request, sizeof request, "{\"op\":\"panic.watch\",\"ref\":1,\"stream\":\"%s\",\"watch_token\":\"%s\",\"since\":%llu}",
                        stream, token, (unsigned long long)since);
    unsigned char frame[600];
    size_t flen = text_frame(frame, request, (size_t)rlen);

    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    double t0 = now_ms();
    for (int i = 0; i < count; i++)
        if (write(ws[i].fd, frame, flen) != (ssize_t)flen) die("write watch");
    if (write(probe, probe_frame, probe_len) != (ssize_t)probe_len) die("write probe");
    probe_sent = now_ms();

    unsigned char *buf = malloc(READ_BUFFER);
    uint64_t bytes = 0;
    int left = count;
    struct epoll_event evs[256];
    while (left > 0) {
        if (now_ms() - t0 > timeout_ms) break;
        int n = epoll_wait(ep, evs, 256, 1000);
        for (int e = 0; e < n; e++) {
            if (evs[e].data.u32 == (uint32_t)count) {
                // An answer is a few dozen bytes: one read holds it whole.
                ssize_t r = read(probe, buf, READ_BUFFER);
                if (r <= 0) die("probe read");
                if (probes < probe_cap) probe_ms[probes++] = now_ms() - probe_sent;
                if (write(probe, probe_frame, probe_len) != (ssize_t)probe_len) die("write probe");
                probe_sent = now_ms();
                continue;
            }
            struct watcher *w = &ws[evs[e].data.u32];
            ssize_t r = read(w->fd, buf, READ_BUFFER);
            if (r <= 0) {
                if (!w->done) { w->done = 1; w->errors++; w->done_ms = now_ms() - t0; left--; }
                epoll_ctl(ep, EPOLL_CTL_DEL, w->fd, NULL);
                continue;
            }
            bytes += (uint64_t)r;
            int was = w->done;
            if (w->carry_len) {
                if (w->carry_len + (size_t)r > w->carry_cap) {
                    w->carry_cap = (w->carry_len + (size_t)r) * 2;
                    w->carry = realloc(w->carry, w->carry_cap);
                }
                memcpy(w->carry + w->carry_len, buf, (size_t)r);
                w->carry_len += (size_t)r;
                size_t used = frames(w, w->carry, w->carry_len, last, t0);
                memmove(w->carry, w->carry + used, w->carry_len - used);
                w->carry_len -= used;
            } else {
                size_t used = frames(w, buf, (size_t)r, last, t0);
                if (used < (size_t)r) {
                    if ((size_t)r - used > w->carry_cap) {
                        w->carry_cap = ((size_t)r - used) * 2;
                        w->carry = realloc(w->carry, w->carry_cap);
                    }
                    memcpy(w->carry, buf + used, (size_t)r - used);
                    w->carry_len = (size_t)r - used;
                }
            }
            if (!was && w->done) left--;
        }
    }
    getrusage(RUSAGE_SELF, &ru1);
    double cpu = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) + (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec)
                 + ((ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) + (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec)) / 1e6;
    double *done = malloc(sizeof(double) * (size_t)count);
    uint64_t events = 0;
    int errors = 0, unfinished = 0;
    for (int i = 0; i < count; i++) {
        events += ws[i].events;
        errors += ws[i].errors;
        if (!ws[i].done) unfinished++;
        done[i] = ws[i].done ? ws[i].done_ms : now_ms() - t0;
    }
    qsort(done, (size_t)count, sizeof *done, by_double);
    qsort(probe_ms, probes, sizeof *probe_ms, by_double);
    double p50 = probes ? probe_ms[probes / 2] : 0, p99 = probes ? probe_ms[probes * 99 / 100] : 0,
           pmax = probes ? probe_ms[probes - 1] : 0;
    printf("{\"watchers\":%d,\"events\":%llu,\"bytes\":%llu,\"seq_errors\":%d,\"unfinished\":%d,"
           "\"first_ms\":%.3f,\"median_ms\":%.3f,\"last_ms\":%.3f,\"probes\":%zu,\"probe_p50_ms\":%.3f,"
           "\"probe_p99_ms\":%.3f,\"probe_max_ms\":%.3f,\"client_cpu_s\":%.3f}\n",
           count, (unsigned long long)events, (unsigned long long)bytes, errors, unfinished,
           done[0], done[count / 2], done[count - 1], probes, p50, p99, pmax, cpu);
    return errors || unfinished ? 1 : 0;
}
