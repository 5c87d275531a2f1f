/* SPDX-License-Identifier: MIT */
/* epoll: Linux's O(active) readiness interface.
 *
 * What is odd about it, and what this file does about it:
 * - Registrations belong to the open file description, not to the fd number. Closing an
 *   fd removes it from the set only when no other descriptor (a dup, a forked child's
 *   copy) refers to the same file; otherwise the old file keeps reporting under the old
 *   number. Each registration therefore carries a generation in the upper half of its
 *   64-bit user data; an event with a stale generation makes the set be rebuilt.
 * - Removing interest costs a system call and is often followed by adding it back, so
 *   interest is dropped lazily: a stopped watcher leaves the registration in place, and
 *   only an event nobody wants narrows it (EPOLL_CTL_MOD or DEL) on the spot.
 * - Because of that laziness, and because a closed fd vanishes from the set by itself, the
 *   cached kernel mask can lie: MOD fails with ENOENT (add it instead) and ADD with EEXIST
 *   (modify instead).
 * - Regular files and some devices cannot be polled (EPOLL_CTL_ADD fails with EPERM).
 *   Like poll() does, they are reported readable and writable on every iteration, and
 *   never hung up (a watcher of MUX_RDHUP alone is never called, and the wait blocks).
 * - The epoll set is shared with a forked child; the child makes a new one and never
 *   touches the parent's registrations.
 * - epoll_wait takes milliseconds; epoll_pwait2 (Linux 5.11) takes a timespec. Without
 *   it, timeouts are rounded up so that timers never fire early.
 * - EPOLLERR and EPOLLHUP are always reported; they wake both directions. EPOLLRDHUP (the
 *   peer shut its writing down) is MUX_RDHUP, and so is EPOLLHUP, a hang-up of both ways.
 */
#include <limits.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"

#define MUX__EPOLL_EPERM 0x80 /* kmask value of an fd that epoll refuses */

struct mux__epoll {
    int epfd;
    int nev;
    int no_pwait2;
    int rebuild;
    struct epoll_event *ev;
    int *eperm; /* fds reported ready on every iteration */
    int neperm, eperm_cap;
};

static int mux__epoll_create(struct mux__epoll *st)
{
    st->epfd = epoll_create1(EPOLL_CLOEXEC);
    return st->epfd < 0 ? -errno : 0;
}

static int mux__epoll_open(struct mux__loop *loop)
{
    struct mux__epoll *st = calloc(1, sizeof *st);
    if (!st)
        return -ENOMEM;
    st->nev = 256;
    st->ev = malloc((size_t)st->nev * sizeof *st->ev);
    int err = st->ev ? mux__epoll_create(st) : -ENOMEM;
    if (err != 0) {
        free(st->ev);
        free(st);
        return err;
    }
    loop->bdata = st;
    return 0;
}

static void mux__epoll_close(struct mux__loop *loop)
{
    struct mux__epoll *st = loop->bdata;
    close(st->epfd);
    free(st->ev);
    free(st->eperm);
    free(st);
    loop->bdata = NULL;
}

/* A new, empty set; the core then re-applies every watched fd with force. */
static int mux__epoll_renew(struct mux__loop *loop)
{
    struct mux__epoll *st = loop->bdata;
    close(st->epfd);
    int err = mux__epoll_create(st);
    if (err != 0)
        return err;
    mux__fd_forget_kernel(loop);
    st->neperm = 0;
    st->rebuild = 0;
    return 0;
}

static void mux__epoll_eperm_del(struct mux__epoll *st, int fd)
{
    for (int i = 0; i < st->neperm; i++)
        if (st->eperm[i] == fd) {
            st->eperm[i] = st->eperm[--st->neperm];
            return;
        }
}

static int mux__epoll_eperm_add(struct mux__epoll *st, int fd)
{
    if (st->neperm == st->eperm_cap) {
        int cap = st->eperm_cap ? st->eperm_cap * 2 : 8;
        int *p = realloc(st->eperm, (size_t)cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        st->eperm = p;
        st->eperm_cap = cap;
    }
    st->eperm[st->neperm++] = fd;
    return 0;
}

static uint32_t mux__epoll_mask(unsigned want)
{
    return (want & MUX_READ ? EPOLLIN : 0) | (want & MUX_WRITE ? EPOLLOUT : 0) |
           (want & MUX_RDHUP ? EPOLLRDHUP : 0) | (want & MUX_EDGE ? EPOLLET : 0);
}

static int mux__epoll_ctl(struct mux__loop *loop, int op, int fd, unsigned want)
{
    struct mux__epoll *st = loop->bdata;
    struct mux__fd *e = mux__fd_at(loop, fd);
    if (op == EPOLL_CTL_ADD)
        e->kgen++;
    struct epoll_event ev = {.events = mux__epoll_mask(want)};
    ev.data.u64 = (uint64_t)(uint32_t)fd | ((uint64_t)e->kgen << 32);
    return epoll_ctl(st->epfd, op, fd, &ev) == 0 ? 0 : -errno;
}

static int mux__epoll_change(struct mux__loop *loop, int fd, unsigned want, int force)
{
    struct mux__epoll *st = loop->bdata;
    struct mux__fd *e = mux__fd_at(loop, fd);
    if (e->kmask == MUX__EPOLL_EPERM) {
        if (want && !force)
            return 0;
        mux__epoll_eperm_del(st, fd);
        e->kmask = 0;
    }
    if (!want || (e->kmask == want && !force))
        return 0; /* lazy: see the top of the file */
    int op = e->kmask ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    int err = mux__epoll_ctl(loop, op, fd, want);
    if (err == -ENOENT && op == EPOLL_CTL_MOD)
        err = mux__epoll_ctl(loop, EPOLL_CTL_ADD, fd, want);
    else if (err == -EEXIST && op == EPOLL_CTL_ADD)
        err = mux__epoll_ctl(loop, EPOLL_CTL_MOD, fd, want);
    if (err == -EPERM) {
        err = mux__epoll_eperm_add(st, fd);
        e->kmask = err == 0 ? MUX__EPOLL_EPERM : 0;
        return err;
    }
    e->kmask = err == 0 ? (uint8_t)want : 0;
    return err;
}

static void mux__epoll_closing(struct mux__loop *loop, int fd)
{
    struct mux__fd *e = mux__fd_find(loop, fd);
    if (e && e->kmask != MUX__EPOLL_EPERM && !e->head)
        e->kmask = 0; /* the close takes it out of the epoll set (a dup would keep it: then
                         ADD says EEXIST, and MOD follows) */
}

static int mux__epoll_fork(struct mux__loop *loop)
{
    return mux__epoll_renew(loop);
}

static int mux__epoll_syswait(struct mux__epoll *st, int64_t timeout_ns)
{
#ifdef SYS_epoll_pwait2
    /* Only a timeout finer than a millisecond needs epoll_pwait2; polls and infinite
     * waits take the cheaper, older call. */
    if (!st->no_pwait2 && timeout_ns > 0 && timeout_ns % 1000000 != 0) {
        struct timespec ts = {(time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000)};
        long n = syscall(SYS_epoll_pwait2, st->epfd, st->ev, st->nev, timeout_ns < 0 ? NULL : &ts,
                         NULL, (size_t)8);
        if (n >= 0 || errno != ENOSYS)
            return (int)n;
        st->no_pwait2 = 1;
    }
#endif
    int ms = -1;
    if (timeout_ns >= 0) {
        int64_t m = timeout_ns / 1000000 + (timeout_ns % 1000000 != 0); /* up: never early */
        ms = m > INT_MAX ? INT_MAX : (int)m;
    }
    return epoll_wait(st->epfd, st->ev, st->nev, ms);
}

/* Someone got events nobody wants any more: narrow the registration now. When the fd
 * number was closed while its file lives on (a dup, a forked child's copy), the kernel
 * can no longer be told by number: only a new epoll set gets rid of the registration. */
static void mux__epoll_narrow(struct mux__loop *loop, int fd, unsigned want)
{
    struct mux__epoll *st = loop->bdata;
    struct mux__fd *e = mux__fd_at(loop, fd);
    int err;
    if (want & MUX__IO_WATCH) {
        err = mux__epoll_ctl(loop, EPOLL_CTL_MOD, fd, want);
    } else {
        struct epoll_event dummy = {0};
        err = epoll_ctl(st->epfd, EPOLL_CTL_DEL, fd, &dummy) == 0 ? 0 : -errno;
    }
    e->kmask = err == 0 ? (uint8_t)(want & (MUX__IO_WATCH | MUX_EDGE)) : 0;
    if (err != 0)
        st->rebuild = 1;
}

static int mux__epoll_wait(struct mux__loop *loop, int64_t timeout_ns)
{
    struct mux__epoll *st = loop->bdata;
    for (int i = 0; i < st->neperm && timeout_ns != 0; i++)
        if (mux__fd_at(loop, st->eperm[i])->want & MUX__IO_EVENTS)
            timeout_ns = 0; /* reported ready below; MUX_RDHUP alone is never reported */
    int n = mux__epoll_syswait(st, timeout_ns);
    if (n < 0)
        return -errno;
    /* Few values live across the callbacks that mux__fd_report may call: the narrowing is
     * decided before, and the fd read again after. */
    const struct epoll_event *evs = st->ev;
    for (int i = 0; i < n; i++) {
        uint64_t data = evs[i].data.u64;
        uint32_t got_ev = evs[i].events;
        struct mux__fd *e = mux__fd_find(loop, (int)(uint32_t)data);
        if (!e || (uint32_t)(data >> 32) != e->kgen) {
            st->rebuild = 1; /* an old file still registered under a reused number */
            continue;
        }
        unsigned got = (got_ev & EPOLLIN ? MUX_READ : 0) | (got_ev & EPOLLOUT ? MUX_WRITE : 0) |
                       (got_ev & EPOLLRDHUP ? MUX_RDHUP : 0);
        unsigned err = got_ev & (EPOLLERR | EPOLLHUP) ? MUX__IO_EVENTS : 0;
        if (got_ev & EPOLLHUP)
            err |= MUX_RDHUP;
        unsigned want = e->want;
        /* Unwanted readiness, or an error or hang-up on an fd nobody watches (those are
         * reported whatever the mask): a lazily kept registration to narrow. */
        int narrow = (got & ~want & MUX__IO_WATCH) || (err && !(want & MUX__IO_WATCH));
        mux__fd_report(loop, e, got | err);
        if (mux__unlikely(narrow)) {
            if (mux__forked_since(loop))
                return 0; /* a callback forked: in the child, the set is the parent's */
            mux__epoll_narrow(loop, (int)(uint32_t)evs[i].data.u64, want);
        }
    }
    for (int i = 0; i < st->neperm; i++) {
        unsigned ready = mux__fd_at(loop, st->eperm[i])->want & MUX__IO_EVENTS;
        if (ready) /* a file that cannot be polled never hangs up, as poll(2) says of it */
            mux__fd_event(loop, st->eperm[i], ready);
    }
    if (n == st->nev && st->nev < 65536) {
        struct epoll_event *ev = realloc(st->ev, (size_t)st->nev * 2 * sizeof *ev);
        if (ev) {
            st->ev = ev;
            st->nev *= 2;
        }
    }
    if (mux__unlikely(st->rebuild)) {
        int err = mux__epoll_renew(loop);
        if (err != 0)
            return err;
        mux__fd_refresh_all(loop);
    }
    return 0;
}

const struct mux__backend mux__backend_epoll = {
    .name = "epoll",
    .caps = MUX__CAP_WAKE_FD | MUX__CAP_RDHUP,
    .fd_limit = INT_MAX,
    .open = mux__epoll_open,
    .close = mux__epoll_close,
    .fork = mux__epoll_fork,
    .change = mux__epoll_change,
    .closing = mux__epoll_closing,
    .wait = mux__epoll_wait,
    .wake = mux__wake_fd,
};
