/* SPDX-License-Identifier: MIT */
/* The loop core: life cycle, run phases, the pending queue, the wake-up descriptor, and
 * fork handling.
 *
 * One iteration:
 *   fork work (in a child) -> pending left over -> prepare -> apply interest changes ->
 *   wait -> gather (io events, wake-ups, signals, asyncs, children, timers, periodics,
 *   idle, check) -> invoke everything gathered, in that order.
 * Watchers are never called from inside the gathering: they are queued, and stopping a
 * queued watcher clears its queue slot, so a stop is final even for an event already seen.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "internal.h"
#include "platform/platform.h"

/* Bumped in every child by the fork handler below, so that every loop notices a fork by
 * itself (mux__forked_since) without a list of loops. */
unsigned mux__fork_gen;

/* A byte per thread, whose address names the thread to MUX_LOOP_ONE_THREAD's check: unique
 * among the live threads, with no system call and the same on every platform (a thread that
 * has ended may pass its address on to a later one, as a pthread_t may be reused too). */
static _Thread_local char mux__thread_token;

static void mux__atfork_child(void)
{
    mux__fork_gen++;
    mux__sig_atfork_child();
}

/* Registers the fork handler (and whatever else the platform sets up once per process).
 * When that is refused (-ENOMEM), the loop's init fails and the next one tries again: a loop
 * that could not notice a fork would share its kernel state with the child. */
static int mux__global_init(void)
{
    return mux__platform_init(mux__atfork_child);
}

/* ---- pending queue ------------------------------------------------------------------ */

int mux__pend_grow(struct mux__loop *loop, uint32_t need)
{
    uint32_t cap = loop->pend_cap ? loop->pend_cap : 64;
    while (cap < need)
        cap *= 2;
    if (cap == loop->pend_cap)
        return 0;
    void *p = realloc(loop->pend, (size_t)cap * sizeof *loop->pend);
    if (!p)
        return -ENOMEM;
    loop->pend = p;
    loop->pend_cap = cap;
    return 0;
}

static void mux__dispatch(struct mux__loop *loop, struct mux__whdr *h, unsigned revents)
{
    mux_loop_t *pub = loop->pub;
    switch (h->type) {
    case MUX__T_TIMER: {
        mux_timer_t *w = mux__container_of(h, mux_timer_t, h_);
        w->cb_(pub, w);
        break;
    }
    case MUX__T_PERIODIC: {
        mux_periodic_t *w = mux__container_of(h, mux_periodic_t, h_);
        w->cb_(pub, w);
        break;
    }
    case MUX__T_SIGNAL: {
        mux_signal_t *w = mux__container_of(h, mux_signal_t, h_);
        w->cb_(pub, w, w->signum_);
        break;
    }
    case MUX__T_CHILD: {
        mux_child_t *w = mux__container_of(h, mux_child_t, h_);
        w->cb_(pub, w, w->rpid_, (int)revents);
        break;
    }
    case MUX__T_IDLE: {
        mux_idle_t *w = mux__container_of(h, mux_idle_t, h_);
        w->cb_(pub, w);
        break;
    }
    case MUX__T_PREPARE: {
        mux_prepare_t *w = mux__container_of(h, mux_prepare_t, h_);
        w->cb_(pub, w);
        break;
    }
    case MUX__T_CHECK: {
        mux_check_t *w = mux__container_of(h, mux_check_t, h_);
        w->cb_(pub, w);
        break;
    }
    case MUX__T_FORK: {
        mux_fork_t *w = mux__container_of(h, mux_fork_t, h_);
        w->cb_(pub, w);
        break;
    }
    case MUX__T_ASYNC: {
        mux_async_t *w = mux__container_of(h, mux_async_t, h_);
        w->cb_(pub, w);
        break;
    }
    }
}

/* Runs the pending queue; returns how many entries it held, those queued meanwhile included. */
static uint32_t mux__invoke_pending(struct mux__loop *loop)
{
    /* npend is re-read each time: callbacks queue tasks (an upper layer's completions). */
    uint32_t i = 0;
    for (; i < loop->npend; i++) {
        struct mux__pending p = loop->pend[i];
        if (!p.w)
            continue;
        p.w->pending = 0;
        if (mux__likely(p.w->type == MUX__T_IO)) { /* the hot cases, without the switch */
            mux_io_t *w = mux__container_of(p.w, mux_io_t, h_);
            w->cb_(loop->pub, w, p.revents);
        } else if (p.w->type == MUX__T_TASK) {
            struct mux__task *t = mux__container_of(p.w, struct mux__task, h_);
            t->run_(t);
        } else {
            mux__dispatch(loop, p.w, p.revents);
        }
    }
    loop->npend = 0;
    return i;
}

/* ---- wake-up descriptor ------------------------------------------------------------- */

static int mux__wake_open(struct mux__loop *loop)
{
    int rfd, wfd;
    int err = mux__wakefd_open(&rfd, &wfd);
    if (err != 0)
        return err;
    loop->wake_rfd = rfd;
    __atomic_store_n(&loop->wake_wfd, wfd, __ATOMIC_SEQ_CST);
    return 0;
}

static void mux__wake_close(struct mux__loop *loop)
{
    int wfd = loop->wake_wfd;
    __atomic_store_n(&loop->wake_wfd, -1, __ATOMIC_SEQ_CST);
    if (loop->wake_rfd >= 0)
        mux__wakefd_close(loop->wake_rfd, wfd);
    loop->wake_rfd = -1;
}

int mux__wake_fd(struct mux__loop *loop)
{
    int wfd = __atomic_load_n(&loop->wake_wfd, __ATOMIC_SEQ_CST);
    return wfd >= 0 ? mux__wakefd_signal(wfd) : -EBADF;
}

static void mux__internal_cb(mux_loop_t *pub, mux_io_t *w, unsigned revents)
{
    (void)pub, (void)w, (void)revents; /* never called: internal events set flags */
}

/* Points the internal watcher `w` at `fd`, or just stops it when fd < 0. */
static int mux__internal_watch(struct mux__loop *loop, mux_io_t *w, int fd)
{
    if (w->h_.flags & MUX__W_ACTIVE)
        mux__io_stop_internal(loop, w);
    if (fd < 0)
        return 0;
    /* Edge-triggered: the loop drains both of its descriptors whenever they report. */
    mux_io_init(w, mux__internal_cb, fd, MUX_READ | MUX_EDGE);
    w->h_.flags |= MUX__W_INTERNAL;
    return mux__io_start_internal(loop, w);
}

/* The backend refused to watch one of the loop's own descriptors in the last mux_run
 * (io.c): both are applied again. */
static void mux__internal_retry(struct mux__loop *loop)
{
    loop->reapply = 0;
    mux_io_t *ws[2] = {&loop->wake_io, &loop->clock_io};
    for (int i = 0; i < 2; i++)
        if (ws[i]->h_.flags & MUX__W_ACTIVE)
            mux__fd_touch(loop, ws[i]->fd_, 1);
}

void mux__internal_event(struct mux__loop *loop, mux_io_t *w)
{
    if (w == &loop->wake_io)
        loop->woken = 1;
    else if (w == &loop->clock_io)
        loop->clock_set = 1;
}

/* The wake-up descriptor, watched, when the backend's wake-ups come through it. */
static int mux__wake_setup(struct mux__loop *loop)
{
    if (!(loop->caps & MUX__CAP_WAKE_FD))
        return 0;
    int err = mux__wake_open(loop);
    if (err == 0)
        err = mux__internal_watch(loop, &loop->wake_io, loop->wake_rfd);
    return err;
}

static void mux__wake_teardown(struct mux__loop *loop)
{
    mux__internal_watch(loop, &loop->wake_io, -1);
    mux__wake_close(loop);
}

/* ---- wall-clock change notification -------------------------------------------------- */

/* Where the platform has one (a Linux timerfd), a descriptor that becomes readable as soon as
 * anyone sets CLOCK_REALTIME, so periodics follow a jump at once instead of at the next
 * capped wake-up. Elsewhere the loop compares the two clocks on every iteration
 * (mux__periodics_clock_check) and caps its waits. Either way there is nothing to fail. */
int mux__clock_watch(struct mux__loop *loop)
{
    if (loop->clock_fd >= 0)
        return 0;
    int fd = mux__clocknote_open();
    if (fd < 0)
        return 0; /* the clock comparison still catches jumps */
    if (mux__internal_watch(loop, &loop->clock_io, fd) != 0) {
        mux__clocknote_close(fd);
        return 0;
    }
    loop->clock_fd = fd;
    return 0;
}

static void mux__clock_unwatch(struct mux__loop *loop)
{
    if (loop->clock_fd < 0)
        return;
    mux__internal_watch(loop, &loop->clock_io, -1);
    mux__clocknote_close(loop->clock_fd);
    loop->clock_fd = -1;
}

static void mux__clock_rearm(struct mux__loop *loop)
{
    loop->clock_set = 0;
    mux__clocknote_rearm(loop->clock_fd);
    loop->clock_jumped = 1;
}

/* ---- life cycle --------------------------------------------------------------------- */

static const struct mux__backend *mux__backend_find(const char *name)
{
    for (size_t i = 0; mux__backends[i]; i++)
        if (strcmp(mux__backends[i]->name, name) == 0)
            return mux__backends[i];
    return NULL;
}

static int mux__backend_known(const char *name)
{
    static const char *const all[] = {"uring", "epoll", "kqueue", "iocp", "poll", "select",
                                      "rtsig"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(all[i], name) == 0)
            return 1;
    return 0;
}

MUX_EXPORT const char *mux_backend_name(size_t i)
{
    for (size_t k = 0; mux__backends[k]; k++)
        if (k == i)
            return mux__backends[k]->name;
    return NULL;
}

MUX_EXPORT int mux_backend_probe(const char *name)
{
    if (!name)
        return -EINVAL;
    mux_loop_t loop;
    mux_loop_options_t o = {.backend = name, .flags = MUX_LOOP_IGNORE_ENV};
    int err = mux_loop_init(&loop, &o);
    if (err == 0)
        mux_loop_close(&loop);
    return err;
}

static int mux__open_backend(struct mux__loop *loop, const mux_loop_options_t *opts)
{
    const char *name = opts ? opts->backend : NULL;
    if (!name && !(opts && (opts->flags & MUX_LOOP_IGNORE_ENV))) {
        name = getenv("IOMUX_BACKEND");
        if (name && !*name)
            name = NULL;
    }
    if (name) {
        const struct mux__backend *b = mux__backend_find(name);
        if (!b)
            return mux__backend_known(name) ? -ENOTSUP : -EINVAL;
        loop->backend = b;
        loop->caps = b->caps;
        return b->open(loop);
    }
    int err = -ENOSYS;
    for (size_t i = 0; mux__backends[i]; i++) {
        if (mux__backends[i]->caps & MUX__CAP_NAMED_ONLY)
            continue; /* opt-in: only when named */
        loop->backend = mux__backends[i];
        loop->caps = loop->backend->caps;
        loop->choosing = 1; /* a backend may decline to be the default (uring's rule) */
        err = loop->backend->open(loop);
        loop->choosing = 0;
        if (err == 0)
            return 0;
    }
    return err;
}

static void mux__loop_free(struct mux__loop *loop)
{
    mux__handles_free(loop);
    mux__fd_table_free(loop);
    free(loop->pend);
    mux__aligned_free(loop->timers.v);
    mux__aligned_free(loop->periodics.v);
    free(loop);
}

MUX_EXPORT int mux_loop_init(mux_loop_t *pub, const mux_loop_options_t *opts)
{
    if (!pub || (opts && (opts->flags & ~(unsigned)(MUX_LOOP_IGNORE_ENV | MUX_LOOP_ONE_THREAD))))
        return -EINVAL;
    int gerr = mux__global_init();
    if (gerr != 0)
        return gerr;

    struct mux__loop *loop = calloc(1, sizeof *loop);
    if (!loop)
        return -ENOMEM;
    loop->pub = pub;
    loop->changes = -1;
    loop->wake_rfd = loop->wake_wfd = -1;
    loop->sig_slot = -1;
    loop->clock_fd = -1;
    loop->fork_gen = mux__fork_gen;
    loop->now = mux__mono_ns();
    loop->now_stale = 0;
    loop->wall_minus_mono = mux__wall_ns() - (int64_t)loop->now;
    loop->one_thread = opts && (opts->flags & MUX_LOOP_ONE_THREAD);
    mux__hooks_init(loop);
    if (mux__fd_grow(loop, 63) != 0 || mux__pend_grow(loop, 64) != 0) {
        mux__loop_free(loop);
        return -ENOMEM;
    }

    int err = mux__open_backend(loop, opts);
    if (err != 0) {
        mux__loop_free(loop);
        return err;
    }
    err = mux__wake_setup(loop);
    if (err != 0) {
        mux__wake_teardown(loop);
        loop->backend->close(loop);
        mux__loop_free(loop);
        return err;
    }
    /* The loop's time starts once it is ready: opening a backend can take a while (libkqueue's
     * first kqueue starts a thread), and a timer started now must not count it. */
    loop->now_stale = 1;
    pub->impl_ = loop;
    return 0;
}

MUX_EXPORT int mux_loop_close(mux_loop_t *pub)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || loop->running || loop->closing)
        return -EINVAL;
    if (mux__refs(loop) > 0)
        return -EBUSY; /* work of the caller's is still active: nothing is touched */
    if (loop->cleanups.count) { /* layered libraries let go of what they hang on the loop */
        loop->closing = 1;
        mux__cleanups_run(loop);
        loop->closing = 0;
    }
    if (loop->active > 0)
        return -EBUSY; /* unreferenced watchers or handles left active */
    mux__fsn_close(loop);
    mux__clock_unwatch(loop);
    mux__sig_loop_close(loop); /* no signal handler wakes the loop from here on */
    mux__internal_watch(loop, &loop->wake_io, -1);
    loop->backend->close(loop);
    mux__wake_close(loop);
    mux__loop_free(loop);
    pub->impl_ = NULL;
    return 0;
}

/* In a child after fork: new kernel state, same watchers. Until every step has worked, the
 * fork stays pending, so every mux_run tries again and returns the error of the step that
 * failed (a child that sandboxed itself may never get there); nothing of the parent's is
 * used meanwhile, and no signal handler wakes the loop through a descriptor that is gone. */
static int mux__loop_refork(struct mux__loop *loop)
{
    loop->forked = 1;
    loop->fork_gen = mux__fork_gen;
    /* The wake-up descriptor is shared with the parent: ours goes first, and signal
     * handlers are kept away from the loop until it has a new one. */
    mux__sig_loop_quiesce(loop);
    mux__wake_teardown(loop);
    int err = loop->backend->fork(loop);
    if (err == 0)
        err = mux__wake_setup(loop);
    if (err != 0)
        return err;
    if (loop->clock_fd >= 0) {
        mux__clock_unwatch(loop);
        mux__clock_watch(loop);
    }
    mux__sig_loop_fork(loop);
    err = mux__fsn_fork(loop); /* a notification descriptor of its own */
    if (err != 0)
        return err;
    mux__fd_refresh_all(loop);
    mux__hooks_queue(loop, &loop->forks);
    /* A send or signal the parent had not consumed left its flags set, and the new
     * descriptor never heard of it: look at them as if woken. */
    loop->woken = 1;
    loop->forked = 0;
    return 0;
}

MUX_EXPORT int mux_loop_fork(mux_loop_t *pub)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop)
        return -EINVAL;
    loop->forked = 1;
    return 0;
}

MUX_EXPORT int mux_loop_stop(mux_loop_t *pub)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop)
        return -EINVAL;
    loop->stop = 1;
    return 0;
}

MUX_EXPORT int mux_loop_active(const mux_loop_t *pub)
{
    struct mux__loop *loop = mux__loop_of(pub);
    return loop ? (int)mux__refs(loop) : -EINVAL;
}

MUX_EXPORT const char *mux_loop_backend(const mux_loop_t *pub)
{
    struct mux__loop *loop = mux__loop_of(pub);
    return loop ? loop->backend->name : NULL;
}

MUX_EXPORT uint64_t mux_now(const mux_loop_t *pub)
{
    struct mux__loop *loop = mux__loop_of(pub);
    return loop ? mux__now(loop) : 0;
}

MUX_EXPORT int mux_now_update(mux_loop_t *pub)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop)
        return -EINVAL;
    loop->now = mux__mono_ns();
    loop->now_stale = 0;
    return 0;
}

MUX_EXPORT int64_t mux_wall_now(const mux_loop_t *pub)
{
    return mux__loop_of(pub) ? mux__wall_ns() : 0;
}

/* ---- running ------------------------------------------------------------------------ */

static int64_t mux__min_timeout(int64_t a, int64_t b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return a < b ? a : b;
}

/* How long the next wait may block: -1 for no limit, 0 to only poll. */
static int64_t mux__wait_timeout(struct mux__loop *loop, int mode)
{
    if (mode == MUX_RUN_NOWAIT || loop->attention || loop->npend || loop->idles.count ||
        mux__refs(loop) == 0)
        return 0;
    if (loop->timers.n == 0 && loop->periodics.n == 0)
        return -1;
    /* Callbacks ran since the clock was read: measure from now, not from then. */
    loop->now = mux__mono_ns();
    loop->now_stale = 0;
    int64_t t = loop->timers.n ? mux__timers_timeout(loop) : -1;
    return loop->periodics.n ? mux__min_timeout(t, mux__periodics_timeout(loop)) : t;
}

/* What the wait reported besides watchers' events: wake-ups, a set clock, children. */
static __attribute__((noinline)) void mux__gather_flags(struct mux__loop *loop)
{
    if (loop->woken) {
        loop->woken = 0;
        if (loop->wake_rfd >= 0)
            mux__wakefd_drain(loop->wake_rfd);
        mux__sig_poll(loop);
        mux__asyncs_poll(loop);
    }
    if (loop->clock_set)
        mux__clock_rearm(loop);
    if (loop->recheck)
        mux__children_reap(loop);
}

static void mux__gather(struct mux__loop *loop)
{
    if (mux__unlikely(loop->attention | loop->clock_set))
        mux__gather_flags(loop);
    if (loop->timers.n && loop->timers.v[0].at <= mux__now(loop)) /* reads the clock */
        mux__timers_expire(loop);
    if (loop->periodics.n)
        mux__periodics_expire(loop);
    if (loop->idles.count && loop->npend == 0 && !loop->dispatched)
        mux__hooks_queue(loop, &loop->idles);
    if (loop->checks.count)
        mux__hooks_queue(loop, &loop->checks);
}

MUX_EXPORT int mux_run(mux_loop_t *pub, int mode)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || mode < MUX_RUN_DEFAULT || mode > MUX_RUN_NOWAIT)
        return -EINVAL;
    if (loop->running)
        return -EBUSY;
    if (mux__unlikely(loop->one_thread)) {
        if (!loop->owner)
            loop->owner = &mux__thread_token;
        else if (loop->owner != &mux__thread_token)
            return -EEXIST;
    }
    loop->running = 1;
    if (mux__unlikely(loop->reapply))
        mux__internal_retry(loop);
    int err = 0;
    for (int first = 1;; first = 0) {
        if (mux__unlikely(loop->fork_gen != mux__fork_gen || loop->forked)) {
            err = mux__loop_refork(loop);
            if (err != 0)
                break;
        }
        if (loop->npend) {
            /* Callbacks that were due (a close's, a write done at once): for MUX_RUN_ONCE
             * they are this run's events, and the wait below does not block. */
            if (mode == MUX_RUN_ONCE)
                mode = MUX_RUN_NOWAIT;
            mux__invoke_pending(loop);
        }
        /* A stop from before this call still gets its one (non-blocking) iteration. */
        if (mode == MUX_RUN_DEFAULT && (mux__refs(loop) == 0 || (loop->stop && !first)))
            break;
        if (loop->prepares.count) {
            mux__hooks_queue(loop, &loop->prepares); /* after the run above: npend was 0 */
            uint32_t hooks = loop->npend;
            /* More entries than prepare watchers: a prepare callback's work was done at once
             * (a write that went out in full) and its callback ran, which for MUX_RUN_ONCE
             * is this run's event as above. */
            if (mux__invoke_pending(loop) > hooks && mode == MUX_RUN_ONCE)
                mode = MUX_RUN_NOWAIT;
        }
        if (loop->changes >= 0) {
            mux__fd_apply(loop);
            if (mux__unlikely(loop->error)) /* the loop's own fd refused (io.c) */
                break;
        }
        loop->iter++;
        loop->dispatched = 0;
        err = loop->backend->wait(loop, mux__wait_timeout(loop, mode));
        if (err == -EINTR) {
            /* A signal handler ran: it may have sent an async or recorded a signal and
             * written the wake-up descriptor that this wait never got to report. */
            loop->woken = 1;
            err = 0;
        }
        if (err != 0)
            break;
        if (!loop->dispatched) /* else the first callback did (backend.h) */
            loop->now_stale = 1;
        mux__gather(loop);
        if (loop->npend) /* often all were called from inside the wait (backend.h) */
            mux__invoke_pending(loop);
        if (loop->error)
            break;
        if (loop->stop || mode != MUX_RUN_DEFAULT || mux__refs(loop) == 0)
            break;
    }
    if (loop->error) {
        if (!err)
            err = loop->error;
        loop->error = 0;
    }
    loop->stop = 0;
    loop->running = 0;
    return err ? err : (int)mux__refs(loop);
}
