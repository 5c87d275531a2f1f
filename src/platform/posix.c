/* SPDX-License-Identifier: MIT */
/* The platform seam on POSIX systems: Linux, the BSDs, macOS.
 *
 * What differs between them, and what this file does about it:
 * - accept4 (Linux, FreeBSD 10, NetBSD 8) and SOCK_NONBLOCK | SOCK_CLOEXEC in socket()
 *   make a socket non-blocking and close-on-exec in the same call. Elsewhere two fcntl calls
 *   follow, which leaves a window in which a fork + exec in another thread inherits the
 *   descriptor; a program that cares runs its loops before it starts such threads.
 * - MSG_NOSIGNAL keeps a send to a peer that has gone from raising SIGPIPE. macOS lacks it
 *   and has the socket option SO_NOSIGPIPE instead, set on every socket the library creates,
 *   accepts or adopts.
 * - The first keep-alive probe's delay is TCP_KEEPIDLE (Linux, the BSDs) or TCP_KEEPALIVE
 *   (macOS).
 * - The wake-up descriptor is an eventfd (Linux: one descriptor, a counter that never fills)
 *   or else a non-blocking pipe, whose fullness means a wake-up is already pending.
 * - Only Linux tells a program that the wall clock was set (a timerfd with
 *   TFD_TIMER_CANCEL_ON_SET); elsewhere the loop compares the clocks each iteration.
 * - A file's bytes go to a socket with Linux's sendfile (the kernel copies from the page
 *   cache), which, lacking MSG_NOSIGNAL, runs with SIGPIPE blocked in the calling thread. The BSDs'
 * and macOS's sendfile differ in their arguments and in how they block, so elsewhere (and when
 * Linux refuses a file) they go through pread into a buffer on the stack and send; what the socket
 * did not take is read again next time.
 * - CPU steering of a SO_REUSEPORT group is Linux's: SO_INCOMING_CPU on a listener (which,
 *   from Linux 6.2, makes the group pick the listener of the CPU the handshake ran on), or a
 *   classic BPF program on the group (SO_ATTACH_REUSEPORT_CBPF) whose result is the index of
 *   the listener to take the connection: the CPU number. Elsewhere both are -ENOTSUP.
 * - struct iovec and mux_buf_t have the same layout here (asserted below), so an array of
 *   buffers goes to sendmsg as it is.
 */
#ifndef MUX_HAVE_ACCEPT4 /* CMake defines what it found, as 1 */
#define MUX_HAVE_ACCEPT4 0
#endif
#ifndef MUX_HAVE_SOCK_FLAGS
#define MUX_HAVE_SOCK_FLAGS 0
#endif
#ifndef MUX_HAVE_EVENTFD
#define MUX_HAVE_EVENTFD 0
#endif
#ifndef MUX_HAVE_TIMERFD
#define MUX_HAVE_TIMERFD 0
#endif
#ifndef MUX_HAVE_SENDFILE
#define MUX_HAVE_SENDFILE 0
#endif

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#if MUX_HAVE_EVENTFD
#include <sys/eventfd.h>
#endif
#if MUX_HAVE_TIMERFD
#include <sys/timerfd.h>
#endif
#include <pthread.h>
#if MUX_HAVE_SENDFILE
#include <signal.h>
#include <sys/sendfile.h>
#endif
#if defined(__linux__) && !defined(MUX_PORTABLE_POSIX)
#include <linux/filter.h>
#endif

#include "platform/platform.h"

_Static_assert(sizeof(mux_buf_t) == sizeof(struct iovec) &&
                   offsetof(mux_buf_t, base) == offsetof(struct iovec, iov_base) &&
                   offsetof(mux_buf_t, len) == offsetof(struct iovec, iov_len),
               "mux_buf_t must be laid out as struct iovec");

#if defined(MSG_NOSIGNAL)
#define MUX__SEND_FLAGS MSG_NOSIGNAL
#else
#define MUX__SEND_FLAGS 0 /* SO_NOSIGPIPE on the socket instead */
#endif
#define MUX__IOV_BATCH 64 /* buffers per sendmsg: well below every system's IOV_MAX */

/* ---- the process ---- */

static pthread_mutex_t mux__global_lock = PTHREAD_MUTEX_INITIALIZER;
static int mux__global_ready;

int mux__platform_init(void (*atfork_child)(void))
{
    if (__atomic_load_n(&mux__global_ready, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&mux__global_lock);
    int err = 0;
    if (!mux__global_ready) {
        err = -pthread_atfork(NULL, NULL, atfork_child);
        if (err == 0)
            __atomic_store_n(&mux__global_ready, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&mux__global_lock);
    return err;
}

void *mux__aligned_alloc(size_t align, size_t size)
{
    void *p = NULL;
    return posix_memalign(&p, align, size) == 0 ? p : NULL;
}

void mux__aligned_free(void *p)
{
    free(p);
}

int mux__fork_supported(void)
{
    return 0;
}

uint64_t mux__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t mux__test_wall_offset;

int64_t mux__wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + mux__test_wall_offset;
}

/* Non-blocking and close-on-exec, and no SIGPIPE where that is a socket option. */
static int mux__sock_setup(int fd, int cloexec)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0))
        return -errno;
    if (cloexec && fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
        return -errno;
#if defined(SO_NOSIGPIPE)
    int on = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &on, sizeof on) != 0)
        return -errno;
#endif
    return 0;
}

int mux__sock_stream(int family)
{
#if MUX_HAVE_SOCK_FLAGS
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
#if defined(SO_NOSIGPIPE)
    int err = mux__sock_setup(fd, 0);
    if (err != 0) {
        close(fd);
        return err;
    }
#endif
    return fd;
#else
    int fd = socket(family, SOCK_STREAM, 0);
    if (fd < 0)
        return -errno;
    int err = mux__sock_setup(fd, 1);
    if (err != 0) {
        close(fd);
        return err;
    }
    return fd;
#endif
}

/* Steers the connections of `fd`'s SO_REUSEPORT group by CPU: SO_INCOMING_CPU before bind,
 * the group's program once listening (every listener attaches the same one). 0 or -errno. */
static int mux__sock_steer(int fd, int steer, int cpu)
{
    if (steer == MUX__STEER_INCOMING_CPU) {
#if defined(SO_INCOMING_CPU) && !defined(MUX_PORTABLE_POSIX) /* the BSDs' path has neither */
        return setsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &cpu, sizeof cpu) == 0 ? 0 : -errno;
#else
        (void)fd;
        (void)cpu;
        return -ENOTSUP;
#endif
    }
#if defined(SO_ATTACH_REUSEPORT_CBPF) && defined(SKF_AD_CPU)
    /* A = the number of the CPU the packet is processed on; return A: the group's listener
     * of that index, or, past the last, the kernel's own choice by hash. */
    struct sock_filter code[] = {
        {BPF_LD | BPF_W | BPF_ABS, 0, 0, (uint32_t)(SKF_AD_OFF + SKF_AD_CPU)},
        {BPF_RET | BPF_A, 0, 0, 0},
    };
    struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog) == 0 ? 0
                                                                                        : -errno;
#else
    (void)fd;
    return -ENOTSUP;
#endif
}

int mux__sock_listen(const struct sockaddr *addr, socklen_t len, int reuseport, int v6only,
                     int backlog, int steer, int cpu)
{
    int fd = mux__sock_stream(addr->sa_family);
    if (fd < 0)
        return fd;
    int on = 1, err = 0;
    if (addr->sa_family != AF_UNIX && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0)
        err = -errno;
    if (!err && reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0)
        err = -errno;
    if (!err && steer == MUX__STEER_INCOMING_CPU)
        err = mux__sock_steer(fd, steer, cpu);
    if (!err && v6only && addr->sa_family == AF_INET6 &&
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) != 0)
        err = -errno;
    if (!err && bind(fd, addr, len) != 0)
        err = -errno;
    if (!err && listen(fd, backlog > 0 ? backlog : SOMAXCONN) != 0)
        err = -errno;
    /* The program once listening: attached before, it gives the socket a group of its own,
     * and the next listener of the port is refused (EADDRINUSE). */
    if (!err && steer == MUX__STEER_CPU_BPF)
        err = mux__sock_steer(fd, steer, cpu);
    if (err) {
        close(fd);
        return err;
    }
    return fd;
}

int mux__sock_name(mux_os_sock_t sock, struct sockaddr *addr, socklen_t *len)
{
    return getsockname(sock, addr, len) == 0 ? 0 : -errno;
}

int mux__sock_accept(mux_os_sock_t lsock)
{
    for (;;) {
#if MUX_HAVE_ACCEPT4
        int fd = accept4(lsock, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
        int fd = accept(lsock, NULL, NULL);
#endif
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        }
#if !MUX_HAVE_ACCEPT4 || defined(SO_NOSIGPIPE)
        int err = mux__sock_setup(fd, !MUX_HAVE_ACCEPT4);
        if (err != 0) {
            close(fd);
            return err;
        }
#endif
        return fd;
    }
}

int mux__sock_adopt(mux_os_sock_t sock)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(sock, (struct sockaddr *)&ss, &len) != 0) /* EBADF, or not a socket */
        return errno == ENOTSOCK ? -EINVAL : -errno;
    int err = mux__sock_setup(sock, 0);
    return err != 0 ? err : ss.ss_family;
}

void mux__sock_close(mux_os_sock_t sock)
{
    close(sock); /* EINTR: the descriptor is gone all the same on Linux and the BSDs */
}

void mux__pipe_close(mux_os_sock_t pipe)
{
    close(pipe); /* no stream is opened on a pipe here: see platform.h */
}

int mux__sock_connect(mux_os_sock_t sock, const struct sockaddr *sa, socklen_t len)
{
    if (connect(sock, sa, len) == 0)
        return 0;
    /* Interrupted, the connect goes on in the background: wait for it as for EINPROGRESS. */
    return errno == EINTR ? -EINPROGRESS : -errno;
}

int mux__sock_error(mux_os_sock_t sock)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(sock, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        return -errno;
    return -err;
}

ssize_t mux__sock_recv(mux_os_sock_t sock, char *buf, size_t len)
{
    for (;;) {
        ssize_t n = recv(sock, buf, len, 0);
        if (n >= 0)
            return n;
        if (errno != EINTR)
            return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
}

ssize_t mux__sock_send(mux_os_sock_t sock, const mux_buf_t *bufs, uint32_t n)
{
    for (;;) {
        ssize_t w;
        if (n == 1) { /* the common case skips sendmsg's import of a msghdr and iovec */
            w = send(sock, bufs[0].base, bufs[0].len, MUX__SEND_FLAGS);
        } else {
            struct msghdr msg;
            memset(&msg, 0, sizeof msg);
            msg.msg_iov = (struct iovec *)(uintptr_t)bufs;
            msg.msg_iovlen = n > MUX__IOV_BATCH ? MUX__IOV_BATCH : n;
            w = sendmsg(sock, &msg, MUX__SEND_FLAGS);
        }
        if (w >= 0)
            return w;
        if (errno != EINTR)
            return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
}

int mux__file_os(int fd)
{
    return fd;
}

/* pread into a buffer, then send: the path where sendfile is not had. */
static ssize_t mux__sock_sendfile_copy(mux_os_sock_t sock, int fd, uint64_t off, size_t len)
{
    char buf[16384];
    if (len > sizeof buf)
        len = sizeof buf;
    ssize_t r;
    do
        r = pread(fd, buf, len, (off_t)off);
    while (r < 0 && errno == EINTR);
    if (r <= 0)
        return r == 0 ? -ENODATA : -errno;
    mux_buf_t b = {.base = buf, .len = (size_t)r};
    return mux__sock_send(sock, &b, 1);
}

ssize_t mux__sock_sendfile(mux_os_sock_t sock, int fd, uint64_t off, size_t len)
{
    if (off > (uint64_t)INT64_MAX - len)
        return -EINVAL;
#if MUX_HAVE_SENDFILE
    /* sendfile has no MSG_NOSIGNAL: SIGPIPE is held back in this thread around it, and the
     * one it raises for a peer that has gone is taken before the mask is restored, unless
     * one was pending already (which needs it blocked before: an unblocked one is delivered
     * at once). It may raise one and still return a count (a first part went), so the
     * pending one is looked for after every call. */
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    int had =
        sigismember(&old, SIGPIPE) && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
    ssize_t w;
    int err;
    for (;;) {
        off_t o = (off_t)off;
        w = sendfile(sock, fd, &o, len);
        err = errno;
        if (w >= 0 || err != EINTR)
            break;
    }
    if (!had) { /* raised even when it returns a count: the peer went after a first part */
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (w > 0)
        return w;
    if (w == 0)
        return -ENODATA; /* the file ended before `len` bytes */
    if (err != EINVAL && err != ENOSYS)
        return err == EWOULDBLOCK ? -EAGAIN : -err;
        /* a file sendfile cannot read from (or no sendfile): copy */
#endif
    return mux__sock_sendfile_copy(sock, fd, off, len);
}

int mux__sock_shutdown(mux_os_sock_t sock)
{
    return shutdown(sock, SHUT_WR) == 0 ? 0 : -errno;
}

int mux__sock_nodelay(mux_os_sock_t sock, int on)
{
    int v = on != 0;
    return setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v) == 0 ? 0 : -errno;
}

int mux__sock_keepalive(mux_os_sock_t sock, int on, unsigned idle_s)
{
    int v = on != 0;
    if (setsockopt(sock, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof v) != 0)
        return -errno;
    if (!on)
        return 0;
    v = (int)idle_s;
#if defined(TCP_KEEPIDLE)
    return setsockopt(sock, IPPROTO_TCP, TCP_KEEPIDLE, &v, sizeof v) == 0 ? 0 : -errno;
#elif defined(TCP_KEEPALIVE)
    return setsockopt(sock, IPPROTO_TCP, TCP_KEEPALIVE, &v, sizeof v) == 0 ? 0 : -errno;
#else
    return -ENOTSUP;
#endif
}

/* ---- the wake-up descriptor ---- */

int mux__wakefd_open(int *rfd, int *wfd)
{
#if MUX_HAVE_EVENTFD
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0)
        return -errno;
    *rfd = *wfd = fd;
    return 0;
#else
    int p[2];
    if (pipe(p) != 0)
        return -errno;
    for (int i = 0; i < 2; i++) {
        int fl = fcntl(p[i], F_GETFL);
        if (fl < 0 || fcntl(p[i], F_SETFL, fl | O_NONBLOCK) != 0 ||
            fcntl(p[i], F_SETFD, FD_CLOEXEC) != 0) {
            int err = -errno;
            close(p[0]);
            close(p[1]);
            return err;
        }
    }
    *rfd = p[0];
    *wfd = p[1];
    return 0;
#endif
}

int mux__wakefd_signal(int wfd)
{
    /* 8 bytes: an eventfd takes nothing else, and a pipe does not mind. */
    uint64_t one = 1;
    for (;;) {
        if (write(wfd, &one, sizeof one) >= 0 || errno == EAGAIN)
            return 0; /* EAGAIN: full, so a wake-up is already waiting */
        if (errno != EINTR)
            return -errno;
    }
}

void mux__wakefd_drain(int rfd)
{
    uint64_t buf[8];
    ssize_t n;
    while ((n = read(rfd, buf, sizeof buf)) == (ssize_t)sizeof buf || (n < 0 && errno == EINTR))
        ;
}

void mux__wakefd_close(int rfd, int wfd)
{
    if (wfd >= 0 && wfd != rfd)
        close(wfd);
    close(rfd);
}

/* ---- wall-clock changes ---- */

int mux__clocknote_open(void)
{
#if MUX_HAVE_TIMERFD
    int fd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
    if (fd < 0)
        return -errno;
    /* Armed at the end of time: it only ever fires by being cancelled by a clock set. */
    struct itimerspec its = {.it_value = {.tv_sec = INT32_MAX}};
    if (timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, NULL) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
#else
    return -ENOTSUP;
#endif
}

void mux__clocknote_rearm(int fd)
{
#if MUX_HAVE_TIMERFD
    uint64_t expirations;
    if (read(fd, &expirations, sizeof expirations) < 0 && errno == ECANCELED) {
        struct itimerspec its = {.it_value = {.tv_sec = INT32_MAX}};
        /* Should this fail, the timerfd stays quiet: the clock comparison still sees jumps. */
        (void)timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, NULL);
    }
#else
    (void)fd;
#endif
}

void mux__clocknote_close(int fd)
{
    close(fd);
}

/* ---- files ---- */

int mux__path_stat(const char *path, mux_fs_stat_t *out)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -errno;
    *out = (mux_fs_stat_t){
        .size = (uint64_t)st.st_size,
        .ino = (uint64_t)st.st_ino,
        .dev = (uint64_t)st.st_dev,
#if defined(__APPLE__)
        .mtime_ns = (int64_t)st.st_mtimespec.tv_sec * 1000000000 + st.st_mtimespec.tv_nsec,
        .ctime_ns = (int64_t)st.st_ctimespec.tv_sec * 1000000000 + st.st_ctimespec.tv_nsec,
#else
        .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
        .ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec,
#endif
        .mode = (uint32_t)st.st_mode,
        .nlink = (uint32_t)st.st_nlink,
        .uid = (uint32_t)st.st_uid,
        .gid = (uint32_t)st.st_gid,
    };
    return 0;
}
