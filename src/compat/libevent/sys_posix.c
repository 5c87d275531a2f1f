/* SPDX-License-Identifier: MIT */
/* The system's side of libiomux-event on POSIX systems (sys.h). */
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* A socket is written with MSG_NOSIGNAL where there is one, so that a peer that went raises
 * no SIGPIPE (macOS has SO_NOSIGPIPE on the socket instead). */
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

ev_ssize_t evx_sys_read(evutil_socket_t fd, void *buf, size_t len)
{
    return read(fd, buf, len);
}

ev_ssize_t evx_sys_writev(evutil_socket_t fd, const struct evbuffer_iovec *v, int n)
{
    struct msghdr msg = {.msg_iov = (struct iovec *)v, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (w < 0 && errno == ENOTSOCK)
        w = writev(fd, v, n);
    return w;
}

int evx_sys_is_socket(evutil_socket_t fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    return S_ISSOCK(st.st_mode) ? 1 : 0;
}

int evx_sys_mono_coarse_ok(void)
{
#ifdef CLOCK_MONOTONIC_COARSE
    struct timespec ts;
    return clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0;
#else
    return 0;
#endif
}

uint64_t evx_sys_mono_ns(int coarse)
{
    clockid_t clock = CLOCK_MONOTONIC;
#ifdef CLOCK_MONOTONIC_COARSE
    if (coarse)
        clock = CLOCK_MONOTONIC_COARSE;
#else
    (void)coarse;
#endif
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t evx_sys_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int evx_sys_peer_closed(evutil_socket_t fd)
{
    char c;
    return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

evutil_socket_t evx_sys_stream_socket(int family)
{
    return socket(family, SOCK_STREAM, 0);
}

int evx_sys_bind(evutil_socket_t fd, const struct sockaddr *sa, socklen_t len)
{
    return bind(fd, sa, len);
}

int evx_sys_listen(evutil_socket_t fd, int backlog)
{
    return listen(fd, backlog);
}

int evx_sys_reuseaddr(evutil_socket_t fd)
{
    return evx_sys_opt_on(fd, SOL_SOCKET, SO_REUSEADDR);
}

evutil_socket_t evx_sys_accept(evutil_socket_t fd, struct sockaddr *sa, socklen_t *len,
                               int nonblock, int cloexec)
{
#if defined(MUX_HAVE_ACCEPT4) && defined(MUX_HAVE_SOCK_FLAGS)
    return accept4(fd, sa, len, (nonblock ? SOCK_NONBLOCK : 0) | (cloexec ? SOCK_CLOEXEC : 0));
#else
    int s = accept(fd, sa, len);
    if (s >= 0 && nonblock)
        evx_sys_nonblock(s);
    if (s >= 0 && cloexec)
        evx_sys_cloexec(s);
    return s;
#endif
}

evutil_socket_t evx_sys_dup(evutil_socket_t fd)
{
    return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

int evx_sys_close(evutil_socket_t fd)
{
    return close(fd);
}

int evx_sys_nonblock(evutil_socket_t fd)
{
    int fl = fcntl(fd, F_GETFL, 0);
    if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0))
        return -1;
    return 0;
}

int evx_sys_cloexec(evutil_socket_t fd)
{
    int fl = fcntl(fd, F_GETFD, 0);
    if (fl < 0 || (!(fl & FD_CLOEXEC) && fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0))
        return -1;
    return 0;
}

int evx_sys_socketpair(int family, int type, int protocol, evutil_socket_t sv[2])
{
    return socketpair(family, type, protocol, sv);
}

int evx_sys_opt_on(evutil_socket_t fd, int level, int name)
{
    int one = 1;
    return setsockopt(fd, level, name, &one, sizeof one);
}

long evx_sys_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max == RLIM_INFINITY ||
        rl.rlim_max >= (rlim_t)INT_MAX)
        return INT_MAX;
    return (long)rl.rlim_max;
}

int evx_sys_gettimeofday(struct timeval *tv)
{
    return gettimeofday(tv, NULL);
}

int evx_sys_random(void *buf, size_t n)
{
    for (char *p = buf; n;) { /* getentropy gives at most 256 bytes a call */
        size_t k = n < 256 ? n : 256;
        if (getentropy(p, k) < 0)
            return -1;
        p += k, n -= k;
    }
    return 0;
}
