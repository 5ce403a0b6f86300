// fanout_client: a lean epoll WebSocket load client for fan-out measurements (benchmarks/fanout_compare.py).
//
// It exists so that the server, not the client, is the bottleneck: one thread, no allocation per
// message, every connection reading into one shared buffer, frames scanned in place, one recv per
// wake, optionally SO_RCVLOWAT on the subscribers (fewer reads and ACKs: on loopback the receiver's
// CPU pays for those), a zero mask key on what it sends (valid framing; a benchmark has no proxy
// to confuse). It speaks the subset of Vigil's v1 protocol the benchmark needs, and the
// same bytes go to any reference server the comparison runs against.
//
//   fanout  S subscribers send one `subscribe` (a bbox) and count every event after its reply;
//           P publishers keep W `pin.create` requests each in flight (closed loop) with the send
//           time in the title, inside that bbox. After a warm-up, one measured window: deliveries/s,
//           publish-to-delivery latency (p50/p99, from the title), the client's own CPU. Then the
//           publishers stop and every subscriber must have received exactly every acknowledged
//           publish (no loss), in each publisher's order.
//   idle    N connections complete the upgrade (and read the welcome when one comes), report
//           "ready N", hold until stdin closes, then close.
//
// Output: progress lines on stderr; "window start" / "window end" on stdout at the window's edges
// (the driver samples the server's CPU there; with --hold-window-end 1 the client then waits for a
// line on stdin, so the driver can read the sockets' counters before the client drains and closes),
// then one JSON object.
//
// Build: cc -O2 -o fanout_client benchmarks/fanout_client.c
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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

enum role { SUBSCRIBER, PUBLISHER, IDLE };
enum phase { UPGRADING, SETTING_UP, READY };

#define READ_BUFFER (256 * 1024)
#define MAX_PUBLISHERS 4096
#define LATENCY_BUCKETS 100000 // 1 us each: up to 100 ms; beyond goes to the last

struct conn {
    int fd;
    enum role role;
    enum phase phase;
    // What the last read left unconsumed (a partial frame or handshake), carried to the next read.
    unsigned char *carry;
    size_t carry_len, carry_cap;
    size_t title_at; // where the last event's title was (events have one shape: usually found there again)
    // subscriber: events counted in the window, total events, the last seq seen per publisher
    uint64_t window_events, events;
    uint32_t *last_seq;
    int order_errors;
    // publisher
    int index, in_flight;
    uint32_t seq;
    uint64_t acked, errors;
    unsigned char out[4096];
    size_t out_len;
};

static const char *host = "127.0.0.1";
static int port = 9001;
static const char *path = "/v1";
static int subscribers = 1000, publishers = 10, window_size = 8, idle_count = 0;
static double warmup_s = 2, duration_s = 10, drain_s = 10;
static int description_bytes = 40;
static int hold_window_end;
// --rcvlowat N: subscribers' sockets become readable only once N bytes wait (SO_RCVLOWAT), so each
// wake reads more and the kernel sends fewer ACKs; the drain then reads every subscriber directly.
static int rcvlowat; // --hold-window-end: after "window end", wait for a line on stdin
static int epfd;
static struct conn *conns;
static int nconns;
static uint64_t latency[LATENCY_BUCKETS];
static uint64_t latency_samples;
static int measuring, publishing = 1;
static uint64_t event_bytes_total, event_count_sized, window_acked, window_bytes;
// The one receive buffer every connection reads into (a shared, cache-hot buffer instead of one per
// connection); a connection's unconsumed tail moves to its small `carry` after each read.
static unsigned char *rx;
// The receive time of the bytes being scanned: one clock reading per recv, not per event.
static uint64_t rx_time;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double cpu_seconds(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

// Writes all of `len` bytes, waiting on the socket when it is full (the client's sends are small).
static void send_all(struct conn *c, const void *data, size_t len) {
    const unsigned char *p = data;
    while (len > 0) {
        ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
        if (n > 0) { p += n; len -= (size_t)n; continue; }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct timespec pause = {0, 20000};
            nanosleep(&pause, NULL);
            continue;
        }
        die("send");
    }
}

// A masked text frame with a zero mask key (the payload goes as it is).
static void send_text(struct conn *c, const char *text, size_t len) {
    unsigned char frame[8192];
    size_t h = 0;
    frame[h++] = 0x81;
    if (len < 126) {
        frame[h++] = 0x80 | (unsigned char)len;
    } else {
        frame[h++] = 0x80 | 126;
        frame[h++] = (unsigned char)(len >> 8);
        frame[h++] = (unsigned char)len;
    }
    memset(frame + h, 0, 4);
    h += 4;
    memcpy(frame + h, text, len);
    send_all(c, frame, h + len);
}

static void send_subscribe(struct conn *c) {
    const char *msg = "{\"op\":\"subscribe\",\"ref\":1,\"area\":{\"bbox\":[52.3,13.0,52.7,13.8]}}";
    send_text(c, msg, strlen(msg));
}

static void send_publish(struct conn *c) {
    char msg[4096];
    char description[2048];
    int d = description_bytes < (int)sizeof(description) - 1 ? description_bytes : (int)sizeof(description) - 1;
    memset(description, 'd', (size_t)d);
    description[d] = 0;
    c->seq++;
    double lat = 52.4 + (c->seq % 1000) * 0.0002, lon = 13.3 + (c->index % 100) * 0.004;
    // title: t<publisher>.<seq>.<send ns>
    int n = snprintf(msg, sizeof msg,
                     "{\"op\":\"pin.create\",\"ref\":%u,\"pin\":{\"lat\":%.5f,\"lon\":%.5f,\"title\":\"t%d.%u.%llu\",\"description\":\"%s\"}}",
                     c->seq, lat, lon, c->index, c->seq, (unsigned long long)now_ns(), description);
    send_text(c, msg, (size_t)n);
    c->in_flight++;
}

static int ready_subscribers, ready_publishers, upgraded;

// A complete text message from the server.
static void on_text(struct conn *c, const unsigned char *p, size_t n) {
    if (c->role == IDLE) return;
    if (c->phase == SETTING_UP) {
        // The welcome (vigild) comes first; the subscribe's reply says "ok".
        if (memmem(p, n, "\"type\":\"ok\"", 11)) {
            c->phase = READY;
            ready_subscribers++;
        }
        return;
    }
    if (c->role == PUBLISHER) {
        if (memmem(p, n, "\"type\":\"ok\"", 11)) { c->acked++; c->in_flight--; if (measuring) window_acked++; }
        else if (memmem(p, n, "\"type\":\"error\"", 14)) { c->errors++; c->in_flight--; }
        else return; // the welcome
        while (publishing && c->in_flight < window_size) send_publish(c);
        return;
    }
    // A subscriber's event (a welcome came before the subscribe's reply, in SETTING_UP).
    c->events++;
    if (measuring) c->window_events++;
    // The title is where the last event had it unless the event's shape changed: check there
    // first, search only when it is not (the exactness check reads the title of every event).
    const unsigned char *t;
    if (c->title_at + 10 <= n && memcmp(p + c->title_at, "\"title\":\"t", 10) == 0) {
        t = p + c->title_at;
    } else {
        t = memmem(p, n, "\"title\":\"t", 10);
        if (!t) return;
        c->title_at = (size_t)(t - p);
    }
    t += 10;
    const unsigned char *end = p + n;
    unsigned long pub = 0, seq = 0;
    unsigned long long sent = 0;
    while (t < end && *t >= '0' && *t <= '9') pub = pub * 10 + (unsigned long)(*t++ - '0');
    if (t < end && *t == '.') t++;
    while (t < end && *t >= '0' && *t <= '9') seq = seq * 10 + (unsigned long)(*t++ - '0');
    if (t < end && *t == '.') t++;
    while (t < end && *t >= '0' && *t <= '9') sent = sent * 10 + (unsigned long long)(*t++ - '0');
    if (pub < MAX_PUBLISHERS) {
        if (seq != (unsigned long)c->last_seq[pub] + 1) c->order_errors++;
        c->last_seq[pub] = (uint32_t)seq;
    }
    if (measuring) {
        uint64_t us = rx_time > sent ? (rx_time - sent) / 1000 : 0;
        latency[us < LATENCY_BUCKETS ? us : LATENCY_BUCKETS - 1]++;
        latency_samples++;
        event_bytes_total += n;
        event_count_sized++;
    }
}

// Frames from the server (unmasked), in place; returns the bytes consumed.
static size_t scan_frames(struct conn *c, unsigned char *buf, size_t buf_len) {
    size_t off = 0;
    while (buf_len - off >= 2) {
        unsigned char *f = buf + off;
        uint64_t len = f[1] & 0x7f;
        size_t h = 2;
        if (len == 126) {
            if (buf_len - off < 4) break;
            len = ((uint64_t)f[2] << 8) | f[3];
            h = 4;
        } else if (len == 127) {
            if (buf_len - off < 10) break;
            len = 0;
            for (int i = 0; i < 8; i++) len = (len << 8) | f[2 + i];
            h = 10;
        }
        if (len > READ_BUFFER - 16) { fprintf(stderr, "frame of %llu bytes: too big for this client\n", (unsigned long long)len); exit(2); }
        if (buf_len - off < h + len) break;
        int opcode = f[0] & 0x0f;
        if (opcode == 1) on_text(c, f + h, (size_t)len);
        else if (opcode == 8) { fprintf(stderr, "server closed a connection (role %d)\n", c->role); exit(3); }
        off += h + (size_t)len;
    }
    return off;
}

// Reads until the socket has nothing more for now: a read that does not fill the buffer drained it
// (epoll is level-triggered: whatever arrives after it is reported again), so a wake costs one
// recv, not one plus an EAGAIN.
static void on_readable(struct conn *c) {
    size_t len = c->carry_len;
    memcpy(rx, c->carry, len);
    for (;;) {
        if (len == READ_BUFFER) die("read buffer full");
        size_t room = READ_BUFFER - len;
        ssize_t n = recv(c->fd, rx + len, room, 0);
        if (n == 0) { fprintf(stderr, "server closed the socket (role %d)\n", c->role); exit(3); }
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) break;
            die("recv");
        }
        if (measuring) window_bytes += (uint64_t)n;
        rx_time = now_ns();
        len += (size_t)n;
        size_t used = 0;
        if (c->phase == UPGRADING) {
            unsigned char *end = memmem(rx, len, "\r\n\r\n", 4);
            if (!end) continue;
            if (memcmp(rx, "HTTP/1.1 101", 12) != 0) { fprintf(stderr, "upgrade refused: %.60s\n", rx); exit(2); }
            used = (size_t)(end + 4 - rx);
            upgraded++;
            if (c->role == SUBSCRIBER) { c->phase = SETTING_UP; send_subscribe(c); }
            else if (c->role == PUBLISHER) { c->phase = READY; ready_publishers++; }
            else c->phase = READY;
        }
        used += scan_frames(c, rx + used, len - used);
        memmove(rx, rx + used, len - used);
        len -= used;
        if ((size_t)n < room) break;
    }
    if (len > c->carry_cap) {
        c->carry_cap = len < 4096 ? 4096 : len;
        c->carry = realloc(c->carry, c->carry_cap);
        if (!c->carry) die("realloc");
    }
    memcpy(c->carry, rx, len);
    c->carry_len = len;
}

static void open_conn(struct conn *c, enum role role, int index) {
    c->role = role;
    c->index = index;
    if (role == SUBSCRIBER) c->last_seq = calloc(MAX_PUBLISHERS, sizeof(uint32_t));
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) die("socket");
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, host, &a.sin_addr);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) die("connect");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(c->fd, F_SETFL, O_NONBLOCK);
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                     "Sec-WebSocket-Protocol: vigil.v1\r\n\r\n", path, host, port);
    send_all(c, req, (size_t)n);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) die("epoll_ctl");
}

static void poll_once(int timeout_ms) {
    struct epoll_event events[512];
    int n = epoll_wait(epfd, events, 512, timeout_ms);
    for (int i = 0; i < n; i++) on_readable(events[i].data.ptr);
}

static void wait_until(int *counter, int target, double seconds, const char *what) {
    uint64_t deadline = now_ns() + (uint64_t)(seconds * 1e9);
    while (*counter < target) {
        if (now_ns() > deadline) { fprintf(stderr, "%s: %d of %d within %.0f s\n", what, *counter, target, seconds); exit(2); }
        poll_once(50);
    }
}

static double percentile(double q) {
    uint64_t want = (uint64_t)(q * (double)latency_samples), seen = 0;
    for (int i = 0; i < LATENCY_BUCKETS; i++) {
        seen += latency[i];
        if (seen > want) return i;
    }
    return LATENCY_BUCKETS;
}

static void usage(void) {
    fprintf(stderr, "usage: fanout_client [--host H] --port P [--path /v1] [--subscribers S] [--publishers P] [--window W]\n"
                    "                     [--warmup S] [--duration S] [--description-bytes N] [--hold-window-end 1] [--rcvlowat N] | --idle N\n");
    exit(2);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v && strcmp(a, "--help") != 0) usage();
        if (!strcmp(a, "--host")) host = v;
        else if (!strcmp(a, "--port")) port = atoi(v);
        else if (!strcmp(a, "--path")) path = v;
        else if (!strcmp(a, "--subscribers")) subscribers = atoi(v);
        else if (!strcmp(a, "--publishers")) publishers = atoi(v);
        else if (!strcmp(a, "--window")) window_size = atoi(v);
        else if (!strcmp(a, "--warmup")) warmup_s = atof(v);
        else if (!strcmp(a, "--duration")) duration_s = atof(v);
        else if (!strcmp(a, "--description-bytes")) description_bytes = atoi(v);
        else if (!strcmp(a, "--idle")) idle_count = atoi(v);
        else if (!strcmp(a, "--hold-window-end")) hold_window_end = atoi(v);
        else if (!strcmp(a, "--rcvlowat")) rcvlowat = atoi(v);
        else usage();
        i++;
    }
    if (publishers > MAX_PUBLISHERS || duration_s <= 0 || duration_s > 600 || subscribers + publishers > 200000) usage();
    struct rlimit nofile;
    getrlimit(RLIMIT_NOFILE, &nofile);
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    rx = malloc(READ_BUFFER);

    if (idle_count > 0) {
        conns = calloc((size_t)idle_count, sizeof *conns);
        for (int i = 0; i < idle_count; i++) {
            open_conn(&conns[i], IDLE, i);
            while (upgraded < i + 1 - 64) poll_once(10); // at most 64 handshakes in flight
        }
        wait_until(&upgraded, idle_count, 60, "upgrades");
        // Read what the server sends at once (a welcome) so nothing sits unread.
        uint64_t settle = now_ns() + 300000000ull;
        while (now_ns() < settle) poll_once(20);
        printf("ready %d\n", idle_count);
        fflush(stdout);
        char line[16];
        while (fgets(line, sizeof line, stdin)) {}
        for (int i = 0; i < idle_count; i++) close(conns[i].fd);
        return 0;
    }

    nconns = subscribers + publishers;
    conns = calloc((size_t)nconns, sizeof *conns);
    for (int i = 0; i < subscribers; i++) {
        open_conn(&conns[i], SUBSCRIBER, i);
        while (ready_subscribers < i + 1 - 64) poll_once(10);
    }
    wait_until(&ready_subscribers, subscribers, 60, "subscriptions");
    for (int i = 0; i < publishers; i++) open_conn(&conns[subscribers + i], PUBLISHER, i);
    wait_until(&ready_publishers, publishers, 30, "publishers");
    fprintf(stderr, "%d subscribers, %d publishers ready\n", subscribers, publishers);
    for (int i = 0; rcvlowat > 1 && i < subscribers; i++)
        if (setsockopt(conns[i].fd, SOL_SOCKET, SO_RCVLOWAT, &rcvlowat, sizeof rcvlowat) != 0) die("SO_RCVLOWAT");

    for (int i = subscribers; i < nconns; i++)
        while (conns[i].in_flight < window_size) send_publish(&conns[i]);
    uint64_t start = now_ns();
    uint64_t window_start = start + (uint64_t)(warmup_s * 1e9);
    uint64_t window_end = window_start + (uint64_t)(duration_s * 1e9);
    double cpu0 = 0, cpu1 = 0;
    uint64_t t0 = 0, t1 = 0;
    while (now_ns() < window_end) {
        poll_once(5);
        if (!measuring && now_ns() >= window_start) {
            measuring = 1;
            t0 = now_ns();
            cpu0 = cpu_seconds();
            printf("window start\n");
            fflush(stdout);
        }
    }
    measuring = 0;
    t1 = now_ns();
    cpu1 = cpu_seconds();
    printf("window end\n");
    fflush(stdout);
    if (hold_window_end) { // the driver samples the sockets' counters while every connection is still open
        char line[16];
        if (!fgets(line, sizeof line, stdin)) die("stdin closed at the window's end");
    }

    // Stop publishing; wait for every reply, then for every subscriber to have every event.
    publishing = 0;
    uint64_t drain_deadline = now_ns() + (uint64_t)(drain_s * 1e9);
    uint64_t acked = 0, errors = 0;
    for (;;) {
        int in_flight = 0;
        acked = errors = 0;
        for (int i = subscribers; i < nconns; i++) { in_flight += conns[i].in_flight; acked += conns[i].acked; errors += conns[i].errors; }
        int complete = in_flight == 0;
        for (int i = 0; complete && i < subscribers; i++) complete = conns[i].events >= acked;
        if (complete || now_ns() > drain_deadline) break;
        poll_once(20);
        // Below SO_RCVLOWAT the last events never make a subscriber readable: read them directly.
        for (int i = 0; rcvlowat > 1 && i < subscribers; i++) on_readable(&conns[i]);
    }
    uint64_t window_deliveries = 0, missing = 0, extra = 0;
    int order_errors = 0;
    for (int i = 0; i < subscribers; i++) {
        window_deliveries += conns[i].window_events;
        if (conns[i].events < acked) missing += acked - conns[i].events;
        if (conns[i].events > acked) extra += conns[i].events - acked;
        order_errors += conns[i].order_errors;
    }
    double seconds = (double)(t1 - t0) / 1e9;
    printf("{\"subscribers\":%d,\"publishers\":%d,\"window\":%d,\"seconds\":%.3f,\"deliveries\":%llu,"
           "\"deliveries_per_s\":%.0f,\"client_cpu\":%.3f,\"p50_us\":%.0f,\"p99_us\":%.0f,\"event_bytes\":%.0f,"
           "\"window_published\":%llu,\"window_bytes\":%llu,\"published\":%llu,\"errors\":%llu,\"missing\":%llu,\"extra\":%llu,\"order_errors\":%d}\n",
           subscribers, publishers, window_size, seconds, (unsigned long long)window_deliveries,
           (double)window_deliveries / seconds, (cpu1 - cpu0) / seconds, percentile(0.5), percentile(0.99),
           event_count_sized ? (double)event_bytes_total / (double)event_count_sized : 0.0,
           (unsigned long long)window_acked, (unsigned long long)window_bytes,
           (unsigned long long)acked, (unsigned long long)errors, (unsigned long long)missing,
           (unsigned long long)extra, order_errors);
    return missing || extra || errors || order_errors ? 1 : 0;
}
