/* SPDX-License-Identifier: MIT */
/* kqueue: the O(active) readiness interface of the BSDs and macOS.
 *
 * What is odd about it, and what this file does about it:
 * - One call does everything: kevent() takes a list of changes and returns events. Interest
 *   changes are appended to a change list as the core hands them over, and go to the kernel
 *   with the next wait, so an iteration makes one system call however much it changed
 *   (libev's and libevent's design). A change the kernel refuses comes back in the event
 *   list as an EV_ERROR entry; an EV_ADD refused stops the fd's watchers with its errno, as
 *   epoll's refused epoll_ctl does. The event list always has room for every change, since a
 *   kernel with no room for an error stops applying the rest.
 * - Interest is per filter: reading and writing are two registrations (EVFILT_READ,
 *   EVFILT_WRITE) of one fd. MUX_EDGE is EV_CLEAR. EV_EOF on the write side is a hang-up
 *   and wakes both directions, as EPOLLHUP does; on the read side it is the end of the
 *   stream, which a read finds.
 * - A close removes the fd's registrations from every kqueue. So, as on epoll, an fd nobody
 *   watches any more keeps its registration until an event for it comes: a delete at the
 *   stop would fail once the program closed the fd, and a failed change makes a kernel's
 *   kevent return at once, without waiting. A direction dropped while the fd stays watched
 *   is deleted with the next kevent, except from an EV_CLEAR registration, which reports a
 *   change once (a call to nobody) and which libkqueue would make report again.
 * - EVFILT_USER (FreeBSD 8.1, macOS 10.6) wakes the loop, so it needs no wake-up
 *   descriptor; without it, or with IOMUX_KQUEUE_WAKE=fd, the core's descriptor serves.
 * - A child watcher for one pid is an EVFILT_PROC registration (NOTE_EXIT): no SIGCHLD. The
 *   kernel may tell before the child can be reaped, so the reap waits (child.c).
 * - Timeouts are a timespec: nanoseconds, no rounding.
 * - A kqueue is not inherited by fork: the child makes its own and never closes the parent's
 *   number, which may be another file by then.
 * - libkqueue, kqueue in a library over epoll with which this is built and tested on Linux,
 *   differs from a kernel's; what it needs on top is in libkqueue.c, and MUX__KQ_EMULATED
 *   marks the few places here that do otherwise for it (kqueue.h).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/kqueue/kqueue.h"

static int mux__kq_create(struct mux__kqueue *st)
{
    st->kq = kqueue();
    if (st->kq < 0)
        return -errno;
    (void)fcntl(st->kq, F_SETFD, FD_CLOEXEC); /* a BSD kqueue is not passed on exec anyway */
#ifdef EVFILT_USER
    struct kevent kev;
    EV_SET(&kev, 0, EVFILT_USER, EV_ADD | EV_CLEAR, 0, 0, NULL);
    if (st->user && kevent(st->kq, &kev, 1, NULL, 0, NULL) != 0) {
        int err = -errno;
        close(st->kq);
        return err;
    }
#endif
    return 0;
}

/* Makes *v hold `need` entries (its capacity *cap). 0 or -ENOMEM. */
static int mux__kq_grow(struct kevent **v, int *cap, int need)
{
    if (need <= *cap)
        return 0;
    int n = *cap * 2 > need ? *cap * 2 : need + 16;
    struct kevent *p = realloc(*v, (size_t)n * sizeof *p);
    if (!p)
        return -ENOMEM;
    *v = p;
    *cap = n;
    return 0;
}

/* Room for `need` changes. The event list grows to match just before the wait (never while
 * its events are handled): an entry for every change, and at least 64. */
static int mux__kq_reserve(struct mux__kqueue *st, int need)
{
    return mux__kq_grow(&st->chg, &st->chg_cap, need);
}

static int mux__kq_room(struct mux__kqueue *st)
{
    return mux__kq_grow(&st->ev, &st->nev, st->nchg > 64 ? st->nchg : 64);
}

static int mux__kq_open(struct mux__loop *loop)
{
    struct mux__kqueue *st = calloc(1, sizeof *st);
    if (!st)
        return -ENOMEM;
    int err = 0;
#ifdef EVFILT_USER
    /* IOMUX_KQUEUE_WAKE=user or fd (the tests ask for either); else EVFILT_USER on a kernel. */
    const char *how = getenv("IOMUX_KQUEUE_WAKE");
    st->user = how && *how ? strcmp(how, "user") == 0 : !MUX__KQ_EMULATED;
    if (how && *how && !st->user && strcmp(how, "fd") != 0)
        err = -EINVAL;
#endif
    if (err == 0)
        err = mux__kq_room(st);
    if (err == 0 && (err = mux__kq_create(st)) == 0) {
        if (st->user)
            loop->caps &= ~MUX__CAP_WAKE_FD;
        loop->bdata = st;
        return 0;
    }
    free(st->ev);
    free(st->chg);
    free(st);
    return err;
}

static void mux__kq_close(struct mux__loop *loop)
{
    struct mux__kqueue *st = loop->bdata;
    close(st->kq);
    mux__kq_closed();
    free(st->ev);
    free(st->chg);
    free(st);
    loop->bdata = NULL;
}

static int mux__kq_add(struct mux__kqueue *st, int fd, short filter, unsigned short flags,
                       uint32_t kgen)
{
    if (st->nchg == st->chg_cap && mux__kq_reserve(st, st->nchg + 1) != 0)
        return -ENOMEM;
    EV_SET(&st->chg[st->nchg++], fd, filter, flags, 0, 0, (void *)(uintptr_t)kgen);
    return 0;
}

/* kmask holds the directions registered, and MUX_EDGE when they are EV_CLEAR. */
static int mux__kq_change(struct mux__loop *loop, int fd, unsigned want, int force)
{
    struct mux__kqueue *st = loop->bdata;
    struct mux__fd *e = mux__fd_at(loop, fd);
    unsigned have = e->kmask, dirs = want & MUX__IO_EVENTS;
    if (!want)
        return 0; /* lazy: see the top of the file */
    /* Deleted: a direction no longer wanted, when level-triggered (an EV_CLEAR one reports
     * a change once, and is left: see the top of the file); every one for a new edge mode,
     * or on libkqueue for a registration that may be an old file's. A kernel's EV_ADD
     * replaces what is there, which `force` asks of every direction. */
    unsigned drop = want & MUX_EDGE ? 0 : have & ~dirs & MUX__IO_EVENTS;
    if (((want ^ have) & MUX_EDGE) || (force && MUX__KQ_EMULATED))
        drop = have & MUX__IO_EVENTS;
    unsigned kept = have & ~drop & MUX__IO_EVENTS;
    unsigned add = force && !MUX__KQ_EMULATED ? dirs : dirs & ~kept;
    if (!drop && !add)
        return 0;
    int err = mux__kq_reserve(st, st->nchg + 4);
    if (err != 0)
        return err;
    if (drop & MUX_READ)
        mux__kq_add(st, fd, EVFILT_READ, EV_DELETE, e->kgen);
    if (drop & MUX_WRITE)
        mux__kq_add(st, fd, EVFILT_WRITE, EV_DELETE, e->kgen);
    if (force || !kept)
        e->kgen++; /* events of an older registration are not this one's */
    unsigned short flags = EV_ADD | (want & MUX_EDGE ? EV_CLEAR : 0);
    if (add & MUX_READ)
        mux__kq_add(st, fd, EVFILT_READ, flags, e->kgen);
    if (add & MUX_WRITE)
        mux__kq_add(st, fd, EVFILT_WRITE, flags, e->kgen);
    e->kmask = (uint8_t)(kept | add | (want & MUX_EDGE));
    return 0;
}

/* The library is about to close `fd`, every watcher of it stopped. A kernel drops the
 * registrations with the close; libkqueue must be told first. */
static void mux__kq_closing(struct mux__loop *loop, int fd)
{
    struct mux__fd *e = mux__fd_find(loop, fd);
    if (!e || e->head || !(e->kmask & MUX__IO_EVENTS))
        return;
    if (MUX__KQ_EMULATED)
        mux__kq_delete_now(loop->bdata, fd, e->kmask);
    e->kmask = 0;
}

/* A new, empty queue; the core then applies every watched fd again. */
static int mux__kq_renew(struct mux__loop *loop)
{
    struct mux__kqueue *st = loop->bdata;
    st->nchg = 0;
    st->rebuild = 0;
    int err = mux__kq_create(st);
    if (err != 0)
        return err;
    mux__fd_forget_kernel(loop);
    mux__fd_refresh_all(loop);
    return 0;
}

/* After a fork: the parent's children are not the child's, so their registrations are not
 * made again (their watchers wait in vain, as SIGCHLD's would). */
static int mux__kq_fork(struct mux__loop *loop)
{
    return mux__kq_renew(loop); /* the parent's queue was not inherited */
}

/* Only a child of this process: a kernel would watch any process, but only children are
 * reaped here (another is left to SIGCHLD's watch, which never fires for it, as on the other
 * backends), and libkqueue cannot report the exit of one that is not its caller's. */
static int mux__kq_child(struct mux__loop *loop, int pid)
{
    struct mux__kqueue *st = loop->bdata;
    siginfo_t info;
    if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0)
        return -errno;
    struct kevent kev;
    EV_SET(&kev, pid, EVFILT_PROC, EV_ADD | EV_ONESHOT, NOTE_EXIT, 0, NULL);
    return kevent(st->kq, &kev, 1, NULL, 0, NULL) == 0 ? 0 : -errno;
}

/* The same queue made again in this process: the children's registrations too. One that
 * fails leaves its watcher to SIGCHLD. */
static int mux__kq_rebuild(struct mux__loop *loop)
{
    struct mux__kqueue *st = loop->bdata;
    close(st->kq);
    int err = mux__kq_renew(loop);
    for (mux_child_t *c = loop->children; err == 0 && c; c = c->next_)
        if ((c->h_.flags & MUX__W_KERNEL) && mux__kq_child(loop, c->pid_) != 0) {
            c->h_.flags &= (uint8_t)~MUX__W_KERNEL;
            err = mux__sig_attach(loop, SIGCHLD);
        }
    loop->recheck = 1; /* an exit while there was no queue */
    return err;
}

/* An EV_ERROR entry: a refused change. A delete fails when the fd is gone, which is no
 * news. */
static void mux__kq_refused(struct mux__loop *loop, const struct kevent *k)
{
    int fd = (int)k->ident, err = (int)k->data;
    if (err == 0 || (k->flags & EV_DELETE))
        return;
    struct mux__fd *e = mux__fd_find(loop, fd);
    if (!e || (uint32_t)(uintptr_t)k->udata != e->kgen)
        return; /* replaced since */
    e->kmask &= (uint8_t) ~(k->filter == EVFILT_READ ? MUX_READ : MUX_WRITE);
    mux__fd_refuse(loop, fd, -err);
}

/* Someone got events nobody wants any more: the registration goes with the next kevent. */
static void mux__kq_narrow(struct mux__loop *loop, struct mux__fd *e, int fd, unsigned dirs)
{
    struct mux__kqueue *st = loop->bdata;
    if ((dirs & MUX_READ) && mux__kq_add(st, fd, EVFILT_READ, EV_DELETE, e->kgen) == 0)
        e->kmask &= (uint8_t)~MUX_READ;
    if ((dirs & MUX_WRITE) && mux__kq_add(st, fd, EVFILT_WRITE, EV_DELETE, e->kgen) == 0)
        e->kmask &= (uint8_t)~MUX_WRITE;
}

/* Reports `got` to the fd's watchers; `fired`: the directions whose filters fired. Inline:
 * it runs per event. */
static inline __attribute__((always_inline)) void mux__kq_report(struct mux__loop *loop,
                                                                 struct mux__fd *e,
                                                                 const struct kevent *k,
                                                                 unsigned got, unsigned fired)
{
    int fd = (int)k->ident;
    unsigned unwanted = e->kmask & MUX_EDGE ? 0 : fired & ~e->want & MUX__IO_EVENTS;
    /* libkqueue took the socket's error to fill fflags (a kernel copies it): told here. */
    if (mux__unlikely(k->flags & EV_EOF) && MUX__KQ_EMULATED && (fired & e->want) &&
        mux__kq_took_error(fd, k)) {
        mux__fd_kill(loop, fd, -(int)k->fflags);
        return;
    }
    mux__fd_report(loop, e, got);
    if (mux__unlikely(unwanted))
        mux__kq_narrow(loop, e, fd, unwanted); /* (a fork's child discards the change list) */
}

#define MUX__KQ_BOTH  1 /* an entry's filter once it holds both of its fd's events */
#define MUX__KQ_SHIFT 4 /* such an entry's data: what it reports, and the filters above */

/* An event of an fd registered for both directions: its two filters' events become one
 * report, made after the batch (mux__kq_both). kslot is the index + 1 of the fd's first event
 * in this batch; one an older batch left points to an entry that is not this fd's. */
static void mux__kq_pair(struct kevent *ev, int i, struct mux__fd *e, unsigned got, unsigned dir)
{
    struct kevent *k = &ev[i];
    uint32_t j = e->kslot - 1;
    k->data = (intptr_t)(got | dir << MUX__KQ_SHIFT);
    if (j < (uint32_t)i && ev[j].filter == MUX__KQ_BOTH && ev[j].ident == k->ident) {
        ev[j].data |= k->data;
        ev[j].flags |= k->flags & EV_EOF;
        if (!ev[j].fflags)
            ev[j].fflags = k->fflags;
        k->filter = 0;
        return;
    }
    k->filter = MUX__KQ_BOTH;
    k->udata = e;
    e->kslot = (uint32_t)i + 1;
}

static void mux__kq_both(struct mux__loop *loop, struct kevent *ev, int n)
{
    for (int i = 0; i < n; i++)
        if (ev[i].filter == MUX__KQ_BOTH)
            mux__kq_report(loop, ev[i].udata, &ev[i], (unsigned)ev[i].data & MUX__IO_EVENTS,
                           (unsigned)ev[i].data >> MUX__KQ_SHIFT);
}

/* The batch: refusals, events (an fd registered one way at once, as epoll's are, both ways
 * after the batch, merged), wake-ups, children's exits. None of it calls the kernel's queue,
 * so a callback that forks changes nothing here (the child's queue is made at its next
 * iteration, the change list discarded); 1 when one did. */
static int mux__kq_events(struct mux__loop *loop, struct kevent *ev, int n)
{
    int both = 0;
    for (int i = 0; i < n; i++) {
        struct kevent *k = &ev[i];
        if (k->filter == EVFILT_READ || k->filter == EVFILT_WRITE) {
            if (mux__unlikely(k->flags & EV_ERROR)) {
                mux__kq_refused(loop, k);
                continue;
            }
            struct mux__fd *e = mux__fd_find(loop, (int)k->ident);
            if (!e || (uint32_t)(uintptr_t)k->udata != e->kgen)
                continue; /* an older registration's, deleted or replaced with this kevent */
            unsigned dir = k->filter == EVFILT_READ ? MUX_READ : MUX_WRITE;
            /* EOF on the write side is a hang-up: both directions, as EPOLLHUP. */
            unsigned got = dir | (dir == MUX_WRITE && (k->flags & EV_EOF) ? MUX_READ : 0);
            if (mux__unlikely((e->kmask & MUX__IO_EVENTS) == MUX__IO_EVENTS)) {
                mux__kq_pair(ev, i, e, got, dir);
                both = 1;
                continue;
            }
            mux__kq_report(loop, e, k, got, dir);
#ifdef EVFILT_USER
        } else if (k->filter == EVFILT_USER) {
            loop->woken = 1;
#endif
        } else if (k->filter == EVFILT_PROC && !(k->flags & EV_ERROR)) {
            mux__child_exited(loop, (int)k->ident);
        }
    }
    if (both)
        mux__kq_both(loop, ev, n);
    return mux__forked_since(loop);
}

/* Applies the changes and waits: one kevent call (two on libkqueue when there are changes). */
static int mux__kq_kevent(struct mux__kqueue *st, int64_t timeout_ns)
{
    struct timespec ts = {(time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000)};
    const struct timespec *tp = timeout_ns < 0 ? NULL : &ts;
    int nchg = st->nchg;
    st->nchg = 0; /* applied (an interrupted wait applied them before it slept) */
    if (MUX__KQ_EMULATED && nchg) {
        int n = mux__kq_apply_emulated(st, nchg);
        if (n != 0)
            return n;
        nchg = 0;
    }
    return kevent(st->kq, st->chg, nchg, st->ev, st->nev, tp);
}

static int mux__kq_wait(struct mux__loop *loop, int64_t timeout_ns)
{
    struct mux__kqueue *st = loop->bdata;
    if (mux__unlikely(st->nchg > st->nev) && mux__kq_room(st) != 0)
        return -ENOMEM; /* the changes wait for the next try */
    int n = mux__kq_kevent(st, timeout_ns);
    int err = n < 0 ? -errno : 0;
    if (n < 0 && err != -EINTR)
        st->rebuild = 1; /* which changes were applied is unknown */
    if (MUX__KQ_EMULATED && mux__kq_returned_early(loop, st, n, timeout_ns))
        st->rebuild = 1;
    if (n > 0 && mux__kq_events(loop, st->ev, n))
        return 0;
    if (n == st->nev && st->nev < 65536) {
        struct kevent *p = realloc(st->ev, (size_t)st->nev * 2 * sizeof *p);
        if (p) {
            st->ev = p;
            st->nev *= 2;
        }
    }
    if (mux__unlikely(st->rebuild)) {
        int rerr = mux__kq_rebuild(loop);
        if (rerr != 0)
            return rerr;
        st->renewed = 1;
    }
    return err;
}

static int mux__kq_wake(struct mux__loop *loop)
{
    struct mux__kqueue *st = loop->bdata;
    if (!st->user)
        return mux__wake_fd(loop);
#ifdef EVFILT_USER
    struct kevent kev;
    EV_SET(&kev, 0, EVFILT_USER, 0, NOTE_TRIGGER, 0, NULL);
    if (kevent(st->kq, &kev, 1, NULL, 0, NULL) != 0)
        return -errno;
#endif
    return 0;
}

const struct mux__backend mux__backend_kqueue = {
    .name = "kqueue",
    .caps = MUX__CAP_WAKE_FD, /* narrowed by open where EVFILT_USER serves */
    .fd_limit = INT_MAX,
    .open = mux__kq_open,
    .close = mux__kq_close,
    .fork = mux__kq_fork,
    .change = mux__kq_change,
    .closing = mux__kq_closing,
    .child = mux__kq_child,
    .wait = mux__kq_wait,
    .wake = mux__kq_wake,
};
