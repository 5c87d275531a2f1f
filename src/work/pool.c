/* SPDX-License-Identifier: MIT */
/* The worker pool: mux_work_t, as libuv's uv_queue_work.
 *
 * One pool per process, behind one lock: a FIFO queue of requests, the threads that take
 * them, and per loop a list of requests done. The lock is held for a few pointer moves only,
 * never while work runs or a callback is called, so a loop that queues or takes results waits
 * for nothing but another thread's pointer moves.
 *
 * - Threads start on demand: when work is queued and fewer threads are idle than requests
 *   wait, one more starts, up to the pool's size. They never end: a process that used the
 *   pool keeps that many threads, parked on the condition variable (libuv keeps its pool the
 *   same way). A thread that cannot start is no error while another runs.
 * - Completions go back to the loop through an async watcher of the loop's (a part of the
 *   pool's per-loop state, counted as no handle of its own: each pending request counts
 *   instead). A thread appends the request to its loop's done list and sends the async
 *   under the lock, so that once the loop has taken a request off that list, no thread
 *   touches the loop's state for it any more: the loop may close as soon as its last
 *   request was called back. A prepare watcher looks at the list too, before every wait (one
 *   atomic load): a loop whose kernel refuses to watch its wake-up descriptor returns from
 *   mux_run before it waits, and would otherwise never learn of them. Both are started while
 *   requests are pending only.
 * - Cancel takes a request still queued off the queue and puts it on its loop's done list
 *   with -ECANCELED, to be called back from the loop like any other. A request that runs
 *   cannot be stopped; the resolver, whose requests are its own memory, may abandon one
 *   (mux__work_abandon): its thread then frees it when the system's call returns, and the
 *   loop forgets it at once.
 * - Fork: the lock is taken around fork(), so that the child's copy is consistent. The
 *   child has none of the parent's threads: requests still queued stay queued, and threads
 *   start again when the child queues work; requests that were running in the parent never
 *   complete in the child (docs/work.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "platform/thread.h"
#include "work/work.h"

/* mux_work_t.state_ */
enum { W_IDLE = 0, W_QUEUED, W_RUNNING, W_DONE, W_ABANDONED };

/* A loop's part of the pool, registered with the loop (struct mux__handles). */
struct mux__work_home {
    struct mux__handles h; /* first: the loop frees it with its other kinds */
    struct mux__loop *loop;
    mux_async_t async;                 /* started while requests are pending */
    mux_prepare_t prepare;             /* and this, which finds them without a wake-up */
    mux_work_t *done_head, *done_tail; /* under the pool's lock */
    int has_done;                      /* atomic: done_head is not NULL */
    uint32_t pending;                  /* queued and not yet called back: the loop's thread */
};

static struct {
    mux__mutex_t mu;
    mux__cond_t cond;
    mux_work_t *head, *tail; /* the queue */
    unsigned queued;         /* requests on it */
    unsigned size;           /* threads it may have; 0 until fixed */
    unsigned threads;        /* threads started */
    unsigned idle;           /* of them, waiting for work */
    int atfork;              /* the fork handlers are registered */
} mux__pool = {MUX__MUTEX_INIT, MUX__COND_INIT, NULL, NULL, 0, 0, 0, 0, 0};

static int mux__work_home_walkable(const void *handle)
{
    (void)handle;
    return 0; /* requests are not handles: the walk reports none */
}

static const struct mux__handles_type mux__work_type = {
    .kind = 0,
    .link_off = 0,
    .size = sizeof(struct mux__work_home),
    .walkable = mux__work_home_walkable,
};

/* ---- the pool's threads -------------------------------------------------------------- */

static void mux__fork_prepare(void)
{
    mux__mutex_lock(&mux__pool.mu);
}

static void mux__fork_parent(void)
{
    mux__mutex_unlock(&mux__pool.mu);
}

static void mux__fork_child(void)
{
    /* The lock was taken around the fork by the thread that forked: new, free ones, and no
     * thread of the pool exists here. */
    static const mux__mutex_t mu = MUX__MUTEX_INIT;
    static const mux__cond_t cond = MUX__COND_INIT;
    mux__pool.mu = mu;
    mux__pool.cond = cond; /* the parent's threads may have waited on it */
    mux__pool.threads = 0;
    mux__pool.idle = 0;
}

/* The pool's size, fixed the first time something asks: IOMUX_THREADPOOL_SIZE when it is a
 * number in range. Under the lock. */
static unsigned mux__pool_size_locked(void)
{
    if (mux__pool.size == 0) {
        unsigned n = MUX_WORK_POOL_DEFAULT;
        const char *env = getenv("IOMUX_THREADPOOL_SIZE");
        if (env && *env) {
            char *end;
            unsigned long v = strtoul(env, &end, 10);
            if (*end == '\0' && v >= 1 && v <= MUX_WORK_POOL_MAX)
                n = (unsigned)v;
        }
        mux__pool.size = n;
    }
    return mux__pool.size;
}

/* Appends `w` to its loop's done list with `status` and wakes the loop. Under the lock. */
static void mux__work_deliver_locked(mux_work_t *w, int status)
{
    struct mux__work_home *home = w->home_;
    w->state_ = W_DONE;
    w->status_ = status;
    w->next_ = NULL;
    if (home->done_tail)
        home->done_tail->next_ = w;
    else
        home->done_head = w;
    home->done_tail = w;
    __atomic_store_n(&home->has_done, 1, __ATOMIC_RELEASE);
    /* Its error (a fork's child whose loop has not renewed its wake-up yet) still leaves the
     * callback to run once the loop has (async.c). */
    (void)mux_async_send(&home->async);
}

static void mux__pool_thread(void *arg)
{
    (void)arg;
    mux__mutex_lock(&mux__pool.mu);
    for (;;) {
        while (!mux__pool.head) {
            mux__pool.idle++;
            mux__cond_wait(&mux__pool.cond, &mux__pool.mu);
            mux__pool.idle--;
        }
        mux_work_t *w = mux__pool.head;
        mux__pool.head = w->next_;
        if (mux__pool.head)
            mux__pool.head->prev_ = NULL;
        else
            mux__pool.tail = NULL;
        mux__pool.queued--;
        w->state_ = W_RUNNING;
        mux__mutex_unlock(&mux__pool.mu);

        w->work_cb_(w);

        mux__mutex_lock(&mux__pool.mu);
        if (w->state_ == W_ABANDONED) { /* its loop forgot it: its memory is this thread's */
            mux__mutex_unlock(&mux__pool.mu);
            w->reap_(w);
            mux__mutex_lock(&mux__pool.mu);
            continue;
        }
        mux__work_deliver_locked(w, 0);
    }
}

/* One more thread when work waits that no idle thread will take. Under the lock. 0, or the
 * error of a start when the pool has no thread at all. */
static int mux__pool_grow_locked(void)
{
    if (mux__pool.queued < mux__pool.idle || mux__pool.threads >= mux__pool_size_locked())
        return 0;
    if (!mux__pool.atfork) {
        int err = mux__thread_atfork(mux__fork_prepare, mux__fork_parent, mux__fork_child);
        if (err != 0)
            return err;
        mux__pool.atfork = 1;
    }
    int err = mux__thread_start(mux__pool_thread, NULL);
    if (err == 0)
        mux__pool.threads++;
    return mux__pool.threads > 0 ? 0 : err;
}

/* ---- the loop's side ----------------------------------------------------------------- */

static void mux__work_home_stop(struct mux__work_home *home)
{
    mux_async_stop(home->loop->pub, &home->async);
    mux_prepare_stop(home->loop->pub, &home->prepare);
}

/* Every request done since the last time is called back, in the order done. */
static void mux__work_home_drain(struct mux__work_home *home)
{
    if (!__atomic_load_n(&home->has_done, __ATOMIC_ACQUIRE))
        return;
    mux__mutex_lock(&mux__pool.mu);
    mux_work_t *w = home->done_head;
    home->done_head = home->done_tail = NULL;
    __atomic_store_n(&home->has_done, 0, __ATOMIC_RELAXED);
    mux__mutex_unlock(&mux__pool.mu);
    while (w) {
        mux_work_t *next = w->next_; /* the callback may free or queue `w` again */
        home->pending--;
        home->loop->active--;
        w->state_ = W_IDLE;
        w->next_ = NULL;
        if (w->done_cb_)
            w->done_cb_(w, w->status_);
        w = next;
    }
    if (home->pending == 0)
        mux__work_home_stop(home);
}

/* The async, sent by the thread that finished a request: the loop woke for it. */
static void mux__work_home_cb(mux_loop_t *pub, mux_async_t *a)
{
    (void)pub;
    mux__work_home_drain(mux__container_of(a, struct mux__work_home, async));
}

/* Before every wait while requests are pending: a loop that cannot watch its own wake-up
 * descriptor (the kernel refused it, and mux_run returns before it waits) still calls back
 * what is done, and can then be closed. */
static void mux__work_home_prepare_cb(mux_loop_t *pub, mux_prepare_t *p)
{
    (void)pub;
    mux__work_home_drain(mux__container_of(p, struct mux__work_home, prepare));
}

/* The loop's state for the pool, made the first time. NULL: -ENOMEM. */
static struct mux__work_home *mux__work_home_get(struct mux__loop *loop)
{
    struct mux__work_home *home = (struct mux__work_home *)mux__handles_get(loop, &mux__work_type);
    if (home && !home->loop) {
        home->loop = loop;
        mux_async_init(&home->async, mux__work_home_cb);
        home->async.h_.flags |= MUX__W_NOREF; /* the requests count, not the async */
        mux_prepare_init(&home->prepare, mux__work_home_prepare_cb);
        home->prepare.h_.flags |= MUX__W_NOREF;
    }
    return home;
}

/* One request fewer pending on its loop: the async stops with the last. */
static void mux__work_forget(struct mux__work_home *home)
{
    home->pending--;
    home->loop->active--;
    if (home->pending == 0)
        mux__work_home_stop(home);
}

MUX_EXPORT int mux_work_queue(mux_loop_t *pub, mux_work_t *w, mux_work_cb work,
                              mux_work_done_cb done)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || !work)
        return -EINVAL;
    struct mux__work_home *home = mux__work_home_get(loop);
    if (!home)
        return -ENOMEM;
    int err = 0;
    if (!(home->async.h_.flags & MUX__W_ACTIVE)) { /* running its callback, it still is */
        err = mux_async_start(pub, &home->async);  /* -ENOMEM */
        if (err == 0 && (err = mux_prepare_start(pub, &home->prepare)) != 0)
            mux_async_stop(pub, &home->async);
    }
    if (err != 0)
        return err;
    mux__mutex_lock(&mux__pool.mu);
    mux__pool.queued++; /* counted first: it decides whether a thread starts */
    err = mux__pool_grow_locked();
    if (err != 0) {
        mux__pool.queued--;
        mux__mutex_unlock(&mux__pool.mu);
        if (home->pending == 0)
            mux__work_home_stop(home);
        return err;
    }
    w->home_ = home;
    w->work_cb_ = work;
    w->done_cb_ = done;
    w->reap_ = NULL;
    w->status_ = 0;
    w->state_ = W_QUEUED;
    w->next_ = NULL;
    w->prev_ = mux__pool.tail;
    if (mux__pool.tail)
        mux__pool.tail->next_ = w;
    else
        mux__pool.head = w;
    mux__pool.tail = w;
    mux__cond_signal(&mux__pool.cond);
    mux__mutex_unlock(&mux__pool.mu);
    home->pending++;
    loop->active++;
    return 0;
}

/* Takes a queued request off the queue. Under the lock. */
static void mux__work_unqueue_locked(mux_work_t *w)
{
    if (w->prev_)
        w->prev_->next_ = w->next_;
    else
        mux__pool.head = w->next_;
    if (w->next_)
        w->next_->prev_ = w->prev_;
    else
        mux__pool.tail = w->prev_;
    w->next_ = w->prev_ = NULL;
    mux__pool.queued--;
}

int mux__work_abandon(mux_work_t *w, void (*reap)(mux_work_t *w))
{
    mux__mutex_lock(&mux__pool.mu);
    int state = w->state_;
    struct mux__work_home *home = w->home_; /* once abandoned, `w` may go any moment */
    if (state == W_QUEUED) {
        mux__work_unqueue_locked(w);
        mux__work_deliver_locked(w, -ECANCELED);
    } else if (state == W_RUNNING && reap) {
        w->reap_ = reap;
        w->state_ = W_ABANDONED;
    }
    mux__mutex_unlock(&mux__pool.mu);
    switch (state) {
    case W_QUEUED:
        return 0;
    case W_RUNNING:
        if (!reap)
            return -EBUSY;
        mux__work_forget(home);
        return 1;
    case W_DONE:
        return -EBUSY;
    default:
        return -EINVAL;
    }
}

MUX_EXPORT int mux_work_cancel(mux_work_t *w)
{
    if (!w || !w->home_)
        return -EINVAL;
    return mux__work_abandon(w, NULL);
}

MUX_EXPORT int mux_work_pool_size(unsigned threads)
{
    if (threads < 1 || threads > MUX_WORK_POOL_MAX)
        return -EINVAL;
    mux__mutex_lock(&mux__pool.mu);
    int err = mux__pool.threads > 0 ? -EBUSY : 0;
    if (err == 0)
        mux__pool.size = threads;
    mux__mutex_unlock(&mux__pool.mu);
    return err;
}

MUX_EXPORT unsigned mux_work_pool_threads(unsigned *started)
{
    mux__mutex_lock(&mux__pool.mu);
    unsigned size = mux__pool_size_locked();
    if (started)
        *started = mux__pool.threads;
    mux__mutex_unlock(&mux__pool.mu);
    return size;
}
