/* SPDX-License-Identifier: MIT */
/* The wrappers the fault variant of the library calls (fault.h). Each one asks `hit` whether
 * this call is the one to fail; if not, it calls the real function. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fault.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef FAULT_HAVE_LIBURING
#include <liburing.h>
#endif
#ifdef FAULT_HAVE_KQUEUE
#include <sys/event.h> /* libkqueue's */
#endif

enum {
#define FAULT_POINT(sym, err, eintr)        P_##sym,
#define FAULT_SYSCALL(name, nr, err, eintr) P_##name,
#include "fault_points.h"
#undef FAULT_POINT
#undef FAULT_SYSCALL
    NPOINTS
};

static const struct {
    const char *name;
    int err, eintr;
} points[NPOINTS] = {
#define FAULT_POINT(sym, err, eintr)        {#sym, err, eintr},
#define FAULT_SYSCALL(name, nr, err, eintr) {#name, err, eintr},
#include "fault_points.h"
#undef FAULT_POINT
#undef FAULT_SYSCALL
};

struct fault_state {
    unsigned long calls[NPOINTS];
    unsigned long nth, fired;
    int point; /* armed point, or -1 */
    int err;
    int sticky;
};

static struct fault_state *fs;

int fault_init(void)
{
    if (fs)
        return 0;
    void *p = mmap(NULL, sizeof *fs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    fs = p;
    fault_reset();
    return 0;
}

int fault_npoints(void)
{
    return NPOINTS;
}

const char *fault_name(int i)
{
    return i >= 0 && i < NPOINTS ? points[i].name : NULL;
}

int fault_default_errno(int i)
{
    return i >= 0 && i < NPOINTS ? points[i].err : 0;
}

int fault_eintr_possible(int i)
{
    return i >= 0 && i < NPOINTS ? points[i].eintr : 0;
}

int fault_lookup(const char *name)
{
    for (int i = 0; i < NPOINTS; i++)
        if (strcmp(points[i].name, name) == 0)
            return i;
    return -1;
}

void fault_reset(void)
{
    memset(fs, 0, sizeof *fs);
    fs->point = -1;
}

void fault_arm(int i, unsigned long nth, int err, enum fault_mode mode)
{
    fs->point = i;
    fs->nth = nth;
    fs->err = err;
    fs->sticky = mode == FAULT_STICKY;
    fs->fired = 0;
}

void fault_disarm(void)
{
    fs->point = -1;
}

unsigned long fault_calls(int i)
{
    return fs->calls[i];
}

unsigned long fault_fired(void)
{
    return fs->fired;
}

/* Counts the call; 1 (with errno set) when it is to fail. */
static int hit(int p)
{
    if (!fs)
        return 0;
    unsigned long n = __atomic_add_fetch(&fs->calls[p], 1, __ATOMIC_RELAXED);
    if (p != fs->point || n < fs->nth || (n > fs->nth && !fs->sticky))
        return 0;
    __atomic_add_fetch(&fs->fired, 1, __ATOMIC_RELAXED);
    errno = fs->err;
    return 1;
}

/* The prototypes are the C library's; these definitions are only called by the renamed
 * library, which declares nothing of them. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

void *mux_fault_malloc(size_t n)
{
    return hit(P_malloc) ? NULL : malloc(n);
}

void *mux_fault_calloc(size_t n, size_t size)
{
    return hit(P_calloc) ? NULL : calloc(n, size);
}

void *mux_fault_realloc(void *p, size_t n)
{
    return hit(P_realloc) ? NULL : realloc(p, n);
}

int mux_fault_posix_memalign(void **p, size_t align, size_t n)
{
    return hit(P_posix_memalign) ? errno : posix_memalign(p, align, n);
}

void *mux_fault_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return hit(P_mmap) ? MAP_FAILED : mmap(addr, len, prot, flags, fd, off);
}

int mux_fault_epoll_create1(int flags)
{
    return hit(P_epoll_create1) ? -1 : epoll_create1(flags);
}

int mux_fault_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    return hit(P_epoll_ctl) ? -1 : epoll_ctl(epfd, op, fd, ev);
}

int mux_fault_epoll_wait(int epfd, struct epoll_event *ev, int n, int timeout)
{
    return hit(P_epoll_wait) ? -1 : epoll_wait(epfd, ev, n, timeout);
}

int mux_fault_eventfd(unsigned initval, int flags)
{
    return hit(P_eventfd) ? -1 : eventfd(initval, flags);
}

int mux_fault_pipe(int fds[2])
{
    return hit(P_pipe) ? -1 : pipe(fds);
}

int mux_fault_pipe2(int fds[2], int flags)
{
    return hit(P_pipe2) ? -1 : pipe2(fds, flags);
}

int mux_fault_timerfd_create(int clockid, int flags)
{
    return hit(P_timerfd_create) ? -1 : timerfd_create(clockid, flags);
}

int mux_fault_timerfd_settime(int fd, int flags, const struct itimerspec *v, struct itimerspec *o)
{
    return hit(P_timerfd_settime) ? -1 : timerfd_settime(fd, flags, v, o);
}

#ifdef FAULT_HAVE_KQUEUE
int mux_fault_kqueue(void)
{
    return hit(P_kqueue) ? -1 : kqueue();
}

/* An interrupted kevent was interrupted in its wait, after it applied the changes: they are
 * applied here, with nothing waited for (what the call finds, it returns, as if the signal
 * came too late). */
int mux_fault_kevent(int kq, const struct kevent *changes, int nchanges, struct kevent *events,
                     int nevents, const struct timespec *timeout)
{
    if (!hit(P_kevent))
        return kevent(kq, changes, nchanges, events, nevents, timeout);
    if (errno != EINTR || nchanges == 0)
        return -1;
    int n = kevent(kq, changes, nchanges, events, nevents, &(struct timespec){0, 0});
    if (n == 0)
        errno = EINTR;
    return n == 0 ? -1 : n;
}
#endif

#ifdef FAULT_HAVE_LIBURING
int mux_fault_io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
                                         struct io_uring_params *p)
{
    return hit(P_io_uring_queue_init_params) ? -errno
                                             : io_uring_queue_init_params(entries, ring, p);
}

struct io_uring_probe *mux_fault_io_uring_get_probe_ring(struct io_uring *ring)
{
    return hit(P_io_uring_get_probe_ring) ? NULL : io_uring_get_probe_ring(ring);
}

int mux_fault_io_uring_register_buf_ring(struct io_uring *ring, struct io_uring_buf_reg *reg,
                                         unsigned flags)
{
    return hit(P_io_uring_register_buf_ring) ? -errno
                                             : io_uring_register_buf_ring(ring, reg, flags);
}

int mux_fault_io_uring_submit(struct io_uring *ring)
{
    return hit(P_io_uring_submit) ? -errno : io_uring_submit(ring);
}

int mux_fault_io_uring_enter(unsigned fd, unsigned to_submit, unsigned min_complete, unsigned flags,
                             sigset_t *sig)
{
    return hit(P_io_uring_enter) ? -errno : io_uring_enter(fd, to_submit, min_complete, flags, sig);
}

int mux_fault_io_uring_enter2(unsigned fd, unsigned to_submit, unsigned min_complete,
                              unsigned flags, sigset_t *sig, size_t sz)
{
    return hit(P_io_uring_enter2) ? -errno
                                  : io_uring_enter2(fd, to_submit, min_complete, flags, sig, sz);
}
#endif

int mux_fault_socket(int domain, int type, int protocol)
{
    return hit(P_socket) ? -1 : socket(domain, type, protocol);
}

int mux_fault_bind(int fd, const struct sockaddr *sa, socklen_t len)
{
    return hit(P_bind) ? -1 : bind(fd, sa, len);
}

int mux_fault_listen(int fd, int backlog)
{
    return hit(P_listen) ? -1 : listen(fd, backlog);
}

int mux_fault_accept(int fd, struct sockaddr *sa, socklen_t *len)
{
    return hit(P_accept) ? -1 : accept(fd, sa, len);
}

int mux_fault_accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
    return hit(P_accept4) ? -1 : accept4(fd, sa, len, flags);
}

/* An interrupted connect goes on in the background (POSIX): so does this one. */
int mux_fault_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    if (!hit(P_connect))
        return connect(fd, sa, len);
    if (errno != EINTR)
        return -1;
    if (connect(fd, sa, len) == 0 || errno == EINPROGRESS)
        errno = EINTR;
    return -1;
}

/* Every command the library uses takes no argument, an int, or (the owner's, rtsig) a
 * struct f_owner_ex pointer. */
int mux_fault_fcntl(int fd, int cmd, ...)
{
    if (hit(P_fcntl))
        return -1;
    if (cmd == F_GETFL || cmd == F_GETFD || cmd == F_GETSIG)
        return fcntl(fd, cmd);
    va_list ap;
    va_start(ap, cmd);
    if (cmd == F_GETOWN_EX || cmd == F_SETOWN_EX) {
        struct f_owner_ex *o = va_arg(ap, struct f_owner_ex *);
        va_end(ap);
        return fcntl(fd, cmd, o);
    }
    int arg = va_arg(ap, int);
    va_end(ap);
    return fcntl(fd, cmd, arg);
}

int mux_fault_setsockopt(int fd, int level, int name, const void *v, socklen_t len)
{
    return hit(P_setsockopt) ? -1 : setsockopt(fd, level, name, v, len);
}

int mux_fault_getsockopt(int fd, int level, int name, void *v, socklen_t *len)
{
    return hit(P_getsockopt) ? -1 : getsockopt(fd, level, name, v, len);
}

int mux_fault_getsockname(int fd, struct sockaddr *sa, socklen_t *len)
{
    return hit(P_getsockname) ? -1 : getsockname(fd, sa, len);
}

ssize_t mux_fault_send(int fd, const void *buf, size_t len, int flags)
{
    return hit(P_send) ? -1 : send(fd, buf, len, flags);
}

ssize_t mux_fault_sendmsg(int fd, const struct msghdr *m, int flags)
{
    return hit(P_sendmsg) ? -1 : sendmsg(fd, m, flags);
}

ssize_t mux_fault_recv(int fd, void *buf, size_t len, int flags)
{
    return hit(P_recv) ? -1 : recv(fd, buf, len, flags);
}

ssize_t mux_fault_recvmsg(int fd, struct msghdr *m, int flags)
{
    return hit(P_recvmsg) ? -1 : recvmsg(fd, m, flags);
}

ssize_t mux_fault_read(int fd, void *buf, size_t len)
{
    return hit(P_read) ? -1 : read(fd, buf, len);
}

ssize_t mux_fault_write(int fd, const void *buf, size_t len)
{
    return hit(P_write) ? -1 : write(fd, buf, len);
}

int mux_fault_shutdown(int fd, int how)
{
    return hit(P_shutdown) ? -1 : shutdown(fd, how);
}

/* Linux closes the descriptor even when close reports an error (EINTR included): so does
 * this one, and a caller that retried would close someone else's descriptor. */
int mux_fault_close(int fd)
{
    if (hit(P_close)) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return close(fd);
}

int mux_fault_sigaction(int sig, const struct sigaction *sa, struct sigaction *old)
{
    return hit(P_sigaction) ? -1 : sigaction(sig, sa, old);
}

int mux_fault_pthread_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    return hit(P_pthread_atfork) ? errno : pthread_atfork(prepare, parent, child);
}

int mux_fault_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
                             void *arg)
{
    return hit(P_pthread_create) ? errno : pthread_create(t, attr, fn, arg);
}

/* The resolver fails as it does when a file it needs cannot be opened: EAI_SYSTEM, errno. */
int mux_fault_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                          struct addrinfo **res)
{
    return hit(P_getaddrinfo) ? EAI_SYSTEM : getaddrinfo(node, service, hints, res);
}

int mux_fault_getnameinfo(const struct sockaddr *sa, socklen_t len, char *host, socklen_t hlen,
                          char *serv, socklen_t slen, int flags)
{
    return hit(P_getnameinfo) ? EAI_SYSTEM : getnameinfo(sa, len, host, hlen, serv, slen, flags);
}

int mux_fault_posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return hit(P_posix_spawn) ? errno : posix_spawn(pid, path, fa, attr, argv, envp);
}

int mux_fault_posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return hit(P_posix_spawnp) ? errno : posix_spawnp(pid, file, fa, attr, argv, envp);
}

int mux_fault_socketpair(int domain, int type, int protocol, int sv[2])
{
    return hit(P_socketpair) ? -1 : socketpair(domain, type, protocol, sv);
}

int mux_fault_waitid(idtype_t idtype, id_t id, siginfo_t *si, int options)
{
    return hit(P_waitid) ? -1 : waitid(idtype, id, si, options);
}

int mux_fault_kill(pid_t pid, int sig)
{
    return hit(P_kill) ? -1 : kill(pid, sig);
}

int mux_fault_recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags, struct timespec *t)
{
    return hit(P_recvmmsg) ? -1 : recvmmsg(fd, v, n, flags, t);
}

int mux_fault_sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
    return hit(P_sendmmsg) ? -1 : sendmmsg(fd, v, n, flags);
}

int mux_fault_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *ss)
{
    return hit(P_ppoll) ? -1 : ppoll(fds, n, ts, ss);
}

int mux_fault_pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
                      const sigset_t *ss)
{
    return hit(P_pselect) ? -1 : pselect(n, r, w, e, ts, ss);
}

int mux_fault_sigtimedwait(const sigset_t *set, siginfo_t *si, const struct timespec *ts)
{
    return hit(P_sigtimedwait) ? -1 : sigtimedwait(set, si, ts);
}

int mux_fault_signalfd(int fd, const sigset_t *set, int flags)
{
    return hit(P_signalfd) ? -1 : signalfd(fd, set, flags);
}

pid_t mux_fault_waitpid(pid_t pid, int *status, int options)
{
    return hit(P_waitpid) ? -1 : waitpid(pid, status, options);
}

int mux_fault_open(const char *path, int flags, ...)
{
    if (hit(P_open))
        return -1;
    va_list ap;
    va_start(ap, flags);
    int mode = flags & O_CREAT ? va_arg(ap, int) : 0;
    va_end(ap);
    return open(path, flags, mode);
}

int mux_fault_openat(int dirfd, const char *path, int flags, ...)
{
    if (hit(P_openat))
        return -1;
    va_list ap;
    va_start(ap, flags);
    int mode = flags & O_CREAT ? va_arg(ap, int) : 0;
    va_end(ap);
    return openat(dirfd, path, flags, mode);
}

int mux_fault_fstat(int fd, struct stat *sb)
{
    return hit(P_fstat) ? -1 : fstat(fd, sb);
}

int mux_fault_fstatat(int dirfd, const char *path, struct stat *sb, int flags)
{
    return hit(P_fstatat) ? -1 : fstatat(dirfd, path, sb, flags);
}

ssize_t mux_fault_pread(int fd, void *buf, size_t len, off_t off)
{
    return hit(P_pread) ? -1 : pread(fd, buf, len, off);
}

ssize_t mux_fault_sendfile(int out, int in, off_t *off, size_t len)
{
    return hit(P_sendfile) ? -1 : sendfile(out, in, off, len);
}

ssize_t mux_fault_readlink(const char *path, char *buf, size_t len)
{
    return hit(P_readlink) ? -1 : readlink(path, buf, len);
}

char *mux_fault_strdup(const char *s)
{
    return hit(P_strdup) ? NULL : strdup(s);
}

char *mux_fault_realpath(const char *path, char *resolved)
{
    return hit(P_realpath) ? NULL : realpath(path, resolved);
}

/* The library's raw system calls; six arguments at most, all passed on as longs. */
long mux_fault_syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
#define FAULT_POINT(sym, err, eintr)
#define FAULT_SYSCALL(name, num, err, eintr)                                                       \
    if (nr == (num) && hit(P_##name))                                                              \
        return -1;
#include "fault_points.h"
#undef FAULT_POINT
#undef FAULT_SYSCALL
    return syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int mux_fault_inotify_init1(int flags)
{
    return hit(P_inotify_init1) ? -1 : inotify_init1(flags);
}

int mux_fault_inotify_add_watch(int fd, const char *path, uint32_t mask)
{
    return hit(P_inotify_add_watch) ? -1 : inotify_add_watch(fd, path, mask);
}

int mux_fault_stat(const char *path, struct stat *st)
{
    return hit(P_stat) ? -1 : stat(path, st);
}
