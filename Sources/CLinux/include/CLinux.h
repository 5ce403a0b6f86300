// CLinux: the Linux syscalls and constants Swift's Glibc module does not export.
// Everything here is a thin, allocation-free wrapper; the reasons for each live beside it.
#ifndef VIGIL_CLINUX_H
#define VIGIL_CLINUX_H

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdint.h>

// epoll_event is packed on x86_64; building it in C avoids layout surprises in Swift.
static inline int vigil_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev;
    ev.events = events;
    ev.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &ev);
}

/// Waits for events and copies them into two flat arrays (event masks and user data),
/// so Swift never touches the packed `struct epoll_event`.
int vigil_epoll_wait(int epfd, uint32_t *masks, uint64_t *datas, int maxevents, int timeout_ms);

// The EPOLL* constants are enum members in glibc's header; re-export them as plain values.
static const uint32_t VIGIL_EPOLLIN = EPOLLIN;
static const uint32_t VIGIL_EPOLLOUT = EPOLLOUT;
static const uint32_t VIGIL_EPOLLERR = EPOLLERR;
static const uint32_t VIGIL_EPOLLHUP = EPOLLHUP;
static const uint32_t VIGIL_EPOLLRDHUP = EPOLLRDHUP;
static const uint32_t VIGIL_EPOLLET = EPOLLET;

/// Blocks `signals` (a NULL-terminated list is awkward from Swift, so a count) and returns a signalfd for them.
int vigil_signalfd_for(const int *signals, int count);
/// Reads one pending signal from a signalfd; returns its number, 0 when none is pending, -1 on error.
int vigil_signalfd_read(int fd);

/// Creates a periodic CLOCK_MONOTONIC timerfd firing every `interval_ms`.
int vigil_timerfd_periodic(int interval_ms);
/// Reads the expiration count of a timerfd (0 when none, -1 on error).
int64_t vigil_timerfd_read(int fd);

/// A non-blocking, close-on-exec eventfd (counter 0), or -1.
int vigil_eventfd_create(void);
/// Waits up to `timeout_ms` (-1: forever) for `fd` to become readable: 1 readable, 0 timed out, -1 error.
int vigil_wait_readable(int fd, int timeout_ms);
/// eventfd helpers: add one to the counter / drain it.
int vigil_eventfd_signal(int fd);
int64_t vigil_eventfd_drain(int fd);

/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC; the peer address is discarded.
int vigil_accept(int listen_fd);
/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC, copying the peer's IP address into `address16` (16
/// bytes: an IPv4 address as ::ffff:a.b.c.d) so that the caller can key per-address budgets on it.
/// `*has_address` is 0 for a peer without one (a Unix socket).
int vigil_accept_peer(int listen_fd, uint8_t *address16, int *has_address);

/// Raises RLIMIT_NOFILE's soft limit to its hard limit; returns the new soft limit (or -1).
int64_t vigil_raise_nofile_limit(void);

/// Gives the calling thread the lowest CPU priority (nice 19); 0 or -1.
int vigil_lower_thread_priority(void);

/// errno as a function (Swift's `errno` works, but this keeps C and Swift reading the same value).
static inline int vigil_errno(void) { return errno; }

#endif
