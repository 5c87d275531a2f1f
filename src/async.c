/* SPDX-License-Identifier: MIT */
/* Async watchers: the one entry point other threads and signal handlers may use.
 *
 * A send sets the watcher's flag, then the loop's flag, and writes to the loop's wake-up
 * descriptor only when the loop's flag was clear: a thousand sends before the loop wakes
 * cost one wake-up (one write where the backend wakes through a descriptor). The loop clears its
 * own flag before it scans the watchers' flags, so a send that lands during the scan either is seen
 * by it or sets the loop's flag again and writes: the last send is never lost. Only atomics and
 * write(2): async-signal-safe.
 *
 * A send that finds the watcher's flag already set touches nothing but the watcher. The one
 * that sets it goes on to the loop, and counts itself in the watcher while it does (busy_):
 * mux_async_stop waits until none is, so that the loop may be closed and its memory given
 * back as soon as the stop returns, while such a send is still on its way to the wake-up.
 * libuv's uv_close of an async spins for the same reason.
 */
#include <sched.h>
#include <string.h>

#include "backend/backend.h"
#include "internal.h"

static int mux__async_valid(const mux_async_t *w)
{
    return w && w->h_.type == MUX__T_ASYNC;
}

MUX_EXPORT int mux_async_init(mux_async_t *w, mux_async_cb cb)
{
    if (!w || !cb)
        return -EINVAL;
    memset(w, 0, sizeof *w);
    w->h_.type = MUX__T_ASYNC;
    w->cb_ = cb;
    return 0;
}

MUX_EXPORT int mux_async_start(mux_loop_t *pub, mux_async_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__async_valid(w))
        return -EINVAL;
    int err = mux__hook_start(loop, &loop->asyncs, &w->link_);
    if (err != 0)
        return err;
    __atomic_store_n(&w->sent_, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&w->loop_, loop, __ATOMIC_SEQ_CST);
    return 0;
}

MUX_EXPORT int mux_async_stop(mux_loop_t *pub, mux_async_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !mux__async_valid(w))
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE) {
        __atomic_store_n(&w->loop_, NULL, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&w->busy_, __ATOMIC_SEQ_CST) != 0)
            sched_yield(); /* a send is finishing: it saw the loop before the store */
    }
    mux__hook_stop(loop, &loop->asyncs, &w->link_);
    return 0;
}

MUX_EXPORT int mux_async_send(mux_async_t *w)
{
    if (!mux__async_valid(w) || !__atomic_load_n(&w->loop_, __ATOMIC_SEQ_CST))
        return -EINVAL;
    /* Already sent and not yet run: the loop will get to it, and this send touches nothing
     * of the loop's (the common case of a busy sender costs one atomic operation). */
    if (__atomic_exchange_n(&w->sent_, 1, __ATOMIC_SEQ_CST) != 0)
        return 0;
    /* The first send wakes the loop: counted, so that a stop waits for it (async_stop). */
    __atomic_fetch_add(&w->busy_, 1, __ATOMIC_SEQ_CST);
    struct mux__loop *loop = __atomic_load_n(&w->loop_, __ATOMIC_SEQ_CST);
    int err = loop ? 0 : -EINVAL;
    if (loop && __atomic_exchange_n(&loop->async_pending, 1, __ATOMIC_SEQ_CST) == 0)
        err = loop->backend->wake(loop);
    __atomic_fetch_sub(&w->busy_, 1, __ATOMIC_SEQ_CST);
    return err;
}

MUX_EXPORT int mux_async_pending(const mux_async_t *w)
{
    if (!mux__async_valid(w))
        return -EINVAL;
    return __atomic_load_n(&w->sent_, __ATOMIC_SEQ_CST) != 0;
}

void mux__asyncs_poll(struct mux__loop *loop)
{
    if (!__atomic_exchange_n(&loop->async_pending, 0, __ATOMIC_SEQ_CST))
        return;
    struct mux__hooklist *l = &loop->asyncs;
    for (struct mux__link *k = l->anchor.next; k != &l->anchor; k = k->next) {
        mux_async_t *w = mux__container_of(k, mux_async_t, link_);
        if (__atomic_exchange_n(&w->sent_, 0, __ATOMIC_SEQ_CST))
            mux__queue(loop, &w->h_, 0);
    }
}
