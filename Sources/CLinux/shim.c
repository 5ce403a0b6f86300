#define _GNU_SOURCE
#include <sched.h>
#include "CLinux.h"
#include <string.h>
#include <pthread.h>
#include <poll.h>

int vigil_epoll_wait(int epfd, uint32_t *masks, uint64_t *datas, int maxevents, int timeout_ms) {
    // A bounded stack batch: the loop never asks for more than 1024 at once.
    struct epoll_event evs[1024];
    if (maxevents > 1024) maxevents = 1024;
    int n = epoll_wait(epfd, evs, maxevents, timeout_ms);
    for (int i = 0; i < n; i++) {
        masks[i] = evs[i].events;
        datas[i] = evs[i].data.u64;
    }
    return n;
}

int vigil_signalfd_for(const int *signals, int count) {
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < count; i++) sigaddset(&set, signals[i]);
    // Block them so they are delivered only through the fd, never as async handlers.
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) return -1;
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

int vigil_signalfd_read(int fd) {
    struct signalfd_siginfo info;
    ssize_t n = read(fd, &info, sizeof info);
    if (n == (ssize_t)sizeof info) return (int)info.ssi_signo;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
}

int vigil_timerfd_periodic(int interval_ms) {
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0) return -1;
    struct itimerspec spec;
    memset(&spec, 0, sizeof spec);
    spec.it_interval.tv_sec = interval_ms / 1000;
    spec.it_interval.tv_nsec = (long)(interval_ms % 1000) * 1000000L;
    spec.it_value = spec.it_interval;
    if (timerfd_settime(fd, 0, &spec, NULL) != 0) { int e = errno; close(fd); errno = e; return -1; }
    return fd;
}

int64_t vigil_timerfd_read(int fd) {
    uint64_t count = 0;
    ssize_t n = read(fd, &count, sizeof count);
    if (n == (ssize_t)sizeof count) return (int64_t)count;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
}

int vigil_eventfd_create(void) {
    return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

int vigil_wait_readable(int fd, int timeout_ms) {
    struct pollfd p = { .fd = fd, .events = POLLIN, .revents = 0 };
    int n;
    do { n = poll(&p, 1, timeout_ms); } while (n < 0 && errno == EINTR);
    return n;
}

int vigil_eventfd_signal(int fd) {
    uint64_t one = 1;
    return write(fd, &one, sizeof one) == (ssize_t)sizeof one ? 0 : -1;
}

int64_t vigil_eventfd_drain(int fd) {
    uint64_t count = 0;
    ssize_t n = read(fd, &count, sizeof count);
    if (n == (ssize_t)sizeof count) return (int64_t)count;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
}

int vigil_accept(int listen_fd) {
    return accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int vigil_accept_peer(int listen_fd, uint8_t *address16, int *has_address) {
    struct sockaddr_storage peer;
    socklen_t length = sizeof peer;
    int fd = accept4(listen_fd, (struct sockaddr *)&peer, &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    *has_address = 0;
    if (fd < 0) return fd;
    if (peer.ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)&peer;
        memset(address16, 0, 10);
        address16[10] = 0xff;
        address16[11] = 0xff;
        memcpy(address16 + 12, &v4->sin_addr, 4);
        *has_address = 1;
    } else if (peer.ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&peer;
        memcpy(address16, &v6->sin6_addr, 16);
        *has_address = 1;
    }
    return fd;
}

int64_t vigil_raise_nofile_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    }
    return (int64_t)rl.rlim_cur;
}

int vigil_lower_thread_priority(void) {
    // A thread inherits its creator's policy: under a real-time policy (chrt, or a benchmark's
    // SCHED_FIFO) it would run ahead of the loop until it blocks. Back to SCHED_OTHER first
    // (pid 0: the calling thread only).
    struct sched_param none = {0};
    (void)sched_setscheduler(0, SCHED_OTHER, &none);
    // nice is per thread on Linux: this lowers only the calling thread (gettid, not getpid).
    return setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
}
