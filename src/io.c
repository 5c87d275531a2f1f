/* SPDX-License-Identifier: MIT */
/* io watchers and the fd table: per-fd watcher lists and the batch of interest changes.
 *
 * Starting or stopping a watcher only marks its fd as changed. Just before the wait,
 * mux__fd_apply() computes each changed fd's wanted events once and hands them to the
 * backend, so a watcher stopped and started again in one iteration costs no system call.
 * The kernel is told unconditionally (`force`) only when a watcher was newly pointed at an
 * fd with mux_io_init or mux_io_set: the fd may be a new file behind a reused number.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "internal.h"

static int mux__io_events_valid(unsigned events)
{
    return (events & ~(unsigned)(MUX__IO_WATCH | MUX_EDGE)) == 0 && (events & MUX__IO_WATCH) != 0;
}

static int mux__io_valid(const mux_io_t *w)
{
    return w && w->h_.type == MUX__T_IO;
}

/* The fd table: a top array of leaf pointers, growing geometrically, and a leaf of
 * MUX__FD_LEAF entries allocated (zeroed) the first time an fd of its range is watched. A
 * start allocates only when it reaches a new range; a huge fd number costs one pointer per
 * leaf of the range below it and one leaf, not an entry per number below it. */
int mux__fd_grow(struct mux__loop *loop, int fd)
{
    uint32_t i = (uint32_t)fd >> MUX__FD_LEAF_BITS;
    if (i >= loop->nleaves) {
        uint32_t n = loop->nleaves ? loop->nleaves : 16;
        while (n <= i)
            n *= 2; /* fd < 2^31: at most 2^24 leaves */
        struct mux__fd **p = realloc(loop->fdl, (size_t)n * sizeof *p);
        if (!p)
            return -ENOMEM;
        memset(p + loop->nleaves, 0, (size_t)(n - loop->nleaves) * sizeof *p);
        loop->fdl = p;
        loop->nleaves = n;
    }
    if (!loop->fdl[i]) {
        loop->fdl[i] = calloc(MUX__FD_LEAF, sizeof(struct mux__fd));
        if (!loop->fdl[i])
            return -ENOMEM;
    }
    return 0;
}

void mux__fd_table_free(struct mux__loop *loop)
{
    for (uint32_t i = 0; i < loop->nleaves; i++)
        free(loop->fdl[i]);
    free(loop->fdl);
    loop->fdl = NULL;
    loop->nleaves = 0;
}

void mux__fd_forget_kernel(struct mux__loop *loop)
{
    for (uint32_t i = 0; i < loop->nleaves; i++)
        if (loop->fdl[i])
            for (uint32_t k = 0; k < MUX__FD_LEAF; k++)
                loop->fdl[i][k].kmask = 0;
}

/* After a fork: every watched fd is told to the new kernel object. The leaves in use only. */
void mux__fd_refresh_all(struct mux__loop *loop)
{
    for (uint32_t i = 0; i < loop->nleaves; i++)
        if (loop->fdl[i])
            for (uint32_t k = 0; k < MUX__FD_LEAF; k++)
                if (loop->fdl[i][k].head)
                    mux__fd_touch(loop, (int)(i << MUX__FD_LEAF_BITS | k), 1);
}

/* What the kernel is told for an fd: the union of its watchers' events, edge-triggered
 * only if every one of them is. One watcher (whose events always hold a direction): its
 * own events, as mux__fd_want computes them for a list of one. */
static inline unsigned mux__io_want(const mux_io_t *w)
{
    return w->events_ & (MUX__IO_WATCH | MUX_EDGE);
}

static unsigned mux__fd_want(const struct mux__fd *e)
{
    unsigned want = 0, edge = MUX_EDGE;
    for (const mux_io_t *w = e->head; w; w = w->next_) {
        want |= w->events_ & MUX__IO_WATCH;
        edge &= w->events_;
    }
    return want ? want | edge : 0;
}

/* The backend refused a change (-EBADF, -ENOMEM, -ENOSPC, ...). A caller's watchers hear of
 * it (MUX_ERROR) and the loop goes on. The loop's own descriptor (the wake-up, the clock
 * note) stays watched and is applied again at the next mux_run, and this one returns the
 * error: the wait would otherwise never hear of signals, asyncs and children. */
static __attribute__((noinline)) void mux__fd_refused(struct mux__loop *loop, struct mux__fd *e,
                                                      int fd, int err)
{
    if (e->head && (e->head->h_.flags & MUX__W_INTERNAL)) {
        e->want = 0;
        loop->reapply = 1;
        loop->error = err;
        return;
    }
    mux__fd_kill(loop, fd, err);
}

void mux__fd_refuse(struct mux__loop *loop, int fd, int err)
{
    mux__fd_refused(loop, mux__fd_at(loop, fd), fd, err);
}

void mux__fd_apply(struct mux__loop *loop)
{
    int fd;
    while ((fd = loop->changes) >= 0) {
        struct mux__fd *e = mux__fd_at(loop, fd);
        unsigned flags = e->changed;
        loop->changes = e->next_change;
        e->changed = 0;
        unsigned want = mux__fd_want(e);
        if (want == e->want && !(flags & MUX__FD_FORCE))
            continue;
        e->want = (uint8_t)want;
        int err = loop->backend->change(loop, fd, want, (flags & MUX__FD_FORCE) != 0);
        if (mux__unlikely(err != 0))
            mux__fd_refused(loop, e, fd, err);
    }
}

void mux__fd_kill(struct mux__loop *loop, int fd, int err)
{
    struct mux__fd *e = mux__fd_find(loop, fd);
    if (!e)
        return;
    mux_io_t *w;
    while ((w = e->head) != NULL) {
        e->head = w->next_;
        w->next_ = NULL;
        mux__deactivate(loop, &w->h_);
        unsigned rev = MUX_ERROR | (w->events_ & MUX__IO_WATCH);
        /* The library's own watchers (parts of an upper layer's handles) are told the errno
         * too. */
        if ((w->h_.flags & MUX__W_NOREF) && err < 0 && err > -(1 << 15))
            rev |= (unsigned)-err << MUX__KILL_ERRNO_SHIFT;
        if (!(w->h_.flags & MUX__W_INTERNAL))
            mux__queue(loop, &w->h_, rev);
    }
    mux__fd_touch(loop, fd, 0);
}

/* Start and stop run for every re-arm of a watcher (libevent's and the chain study's
 * pattern): each looks its fd's entry up once, and the public functions have the bodies
 * inlined rather than calling them. */
/* The rare part of a start: an fd select cannot watch, a new range of the fd table, or more
 * room in the pending queue. Apart, so that the common path saves no registers. */
static __attribute__((noinline)) int mux__io_start_slow(struct mux__loop *loop, mux_io_t *w)
{
    int fd = w->fd_;
    if (fd >= loop->backend->fd_limit)
        return -EINVAL;
    int err = mux__fd_reserve(loop, fd);
    if (err == 0)
        err = mux__reserve(loop);
    return err != 0 ? err : mux__io_start_internal(loop, w);
}

static inline __attribute__((always_inline)) int mux__io_start_body(struct mux__loop *loop,
                                                                    mux_io_t *w)
{
    int fd = w->fd_;
    /* Every fd the table has a leaf for is one the backend can watch: only a start grows
     * it, after the check of fd_limit, and select's limit ends a leaf (select.c). */
    struct mux__fd *e = mux__fd_find(loop, fd);
    if (mux__unlikely(!e || loop->active + loop->noref + 1 + MUX__INTERNAL_MAX > loop->pend_cap))
        return mux__io_start_slow(loop, w);
    mux_io_t **pp = &e->head; /* append: watchers of an fd run in start order */
    while (*pp)
        pp = &(*pp)->next_;
    *pp = w;
    w->next_ = NULL;
    mux__activate(loop, &w->h_);
    if (w->h_.flags & MUX__W_NEWFD) {
        e->changed |= MUX__FD_FORCE;
        w->h_.flags &= (uint8_t)~MUX__W_NEWFD;
    } else if (e->changed == MUX__FD_CHANGED && loop->changes == fd && e->head == w &&
               mux__io_want(w) == e->want) {
        /* A restart: the stop just before put the fd on the change list, and the one
         * watcher it has again wants what the kernel was last told. Nothing to apply. */
        loop->changes = e->next_change;
        e->changed = 0;
        return 0;
    }
    mux__fd_mark(loop, e, fd);
    return 0;
}

static inline __attribute__((always_inline)) void mux__io_stop_body(struct mux__loop *loop,
                                                                    mux_io_t *w)
{
    mux__unqueue(loop, &w->h_);
    if (!(w->h_.flags & MUX__W_ACTIVE))
        return;
    struct mux__fd *e = mux__fd_at(loop, w->fd_);
    mux_io_t **pp = &e->head;
    while (*pp != w)
        pp = &(*pp)->next_;
    *pp = w->next_;
    w->next_ = NULL;
    mux__deactivate(loop, &w->h_);
    mux__fd_mark(loop, e, w->fd_);
}

int mux__io_start_internal(struct mux__loop *loop, mux_io_t *w)
{
    return mux__io_start_body(loop, w);
}

void mux__io_stop_internal(struct mux__loop *loop, mux_io_t *w)
{
    mux__io_stop_body(loop, w);
}

MUX_EXPORT int mux_io_init(mux_io_t *w, mux_io_cb cb, int fd, unsigned events)
{
    if (!w || !cb || fd < 0 || !mux__io_events_valid(events))
        return -EINVAL;
    memset(w, 0, sizeof *w);
    w->h_.type = MUX__T_IO;
    w->h_.flags = MUX__W_NEWFD;
    w->cb_ = cb;
    w->fd_ = fd;
    w->events_ = events;
    return 0;
}

MUX_EXPORT int mux_io_set(mux_io_t *w, int fd, unsigned events)
{
    if (!mux__io_valid(w) || fd < 0 || !mux__io_events_valid(events))
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE)
        return -EBUSY;
    w->fd_ = fd;
    w->events_ = events;
    w->h_.flags |= MUX__W_NEWFD;
    return 0;
}

MUX_EXPORT int mux_io_modify(mux_loop_t *pub, mux_io_t *w, unsigned events)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__io_valid(w) || !mux__io_events_valid(events))
        return -EINVAL;
    if (mux__unlikely(events & MUX_RDHUP) && !(loop->caps & MUX__CAP_RDHUP))
        return -ENOTSUP;
    w->events_ = events;
    if (w->h_.pending) {
        /* An event already gathered for interest the caller just dropped is not wanted. */
        struct mux__pending *p = &loop->pend[w->h_.pending - 1];
        p->revents &= events | MUX_ERROR;
        if (!p->revents)
            mux__unqueue(loop, &w->h_);
    }
    if (w->h_.flags & MUX__W_ACTIVE)
        mux__fd_touch(loop, w->fd_, 0);
    return 0;
}

MUX_EXPORT int mux_io_start(mux_loop_t *pub, mux_io_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__io_valid(w) || (w->h_.flags & MUX__W_INTERNAL))
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE)
        return -EBUSY;
    if (mux__unlikely(w->events_ & MUX_RDHUP) && !(loop->caps & MUX__CAP_RDHUP))
        return -ENOTSUP;
    return mux__io_start_body(loop, w);
}

MUX_EXPORT int mux_io_stop(mux_loop_t *pub, mux_io_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__io_valid(w) || (w->h_.flags & MUX__W_INTERNAL))
        return -EINVAL;
    mux__io_stop_body(loop, w);
    return 0;
}

MUX_EXPORT int mux_io_is_active(const mux_io_t *w)
{
    return mux__io_valid(w) ? (w->h_.flags & MUX__W_ACTIVE) != 0 : -EINVAL;
}

MUX_EXPORT int mux_io_fd(const mux_io_t *w)
{
    return mux__io_valid(w) ? w->fd_ : -EINVAL;
}

MUX_EXPORT unsigned mux_io_events_supported(const mux_loop_t *pub)
{
    const struct mux__loop *loop = mux__loop_of(pub);
    if (!loop)
        return 0;
    return MUX_READ | MUX_WRITE | MUX_EDGE | (loop->caps & MUX__CAP_RDHUP ? MUX_RDHUP : 0);
}
