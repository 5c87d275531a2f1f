/* SPDX-License-Identifier: MIT */
/* idle, prepare, check and fork watchers: plain lists the loop walks at fixed points of
 * an iteration. Walking only queues the watchers; their callbacks run afterwards from
 * the pending queue, so starting or stopping any of them from a callback is safe. */
#include <string.h>

#include "internal.h"
#include "platform/platform.h"

static void mux__list_init(struct mux__hooklist *l, ptrdiff_t hdr_off)
{
    mux__link_init(&l->anchor);
    l->count = 0;
    l->hdr_off = hdr_off;
}

void mux__hooks_init(struct mux__loop *loop)
{
    mux__list_init(&loop->idles, offsetof(mux_idle_t, h_) - offsetof(mux_idle_t, link_));
    mux__list_init(&loop->prepares, offsetof(mux_prepare_t, h_) - offsetof(mux_prepare_t, link_));
    mux__list_init(&loop->checks, offsetof(mux_check_t, h_) - offsetof(mux_check_t, link_));
    mux__list_init(&loop->forks, offsetof(mux_fork_t, h_) - offsetof(mux_fork_t, link_));
    mux__list_init(&loop->asyncs, offsetof(mux_async_t, h_) - offsetof(mux_async_t, link_));
    mux__list_init(&loop->cleanups, offsetof(mux_cleanup_t, h_) - offsetof(mux_cleanup_t, link_));
    mux__list_init(&loop->fs_polls, offsetof(mux_fs_poll_t, h_) - offsetof(mux_fs_poll_t, link_));
}

void mux__hooks_queue(struct mux__loop *loop, struct mux__hooklist *l)
{
    for (struct mux__link *k = l->anchor.next; k != &l->anchor; k = k->next)
        mux__queue(loop, mux__hook_hdr(l, k), 0);
}

/* Shared start and stop of every list-kept watcher, async included. */
int mux__hook_start(struct mux__loop *loop, struct mux__hooklist *l, struct mux__link *k)
{
    struct mux__whdr *h = mux__hook_hdr(l, k);
    if (h->flags & MUX__W_ACTIVE)
        return -EBUSY;
    int err = mux__reserve(loop);
    if (err != 0)
        return err;
    mux__link_insert(&l->anchor, k); /* append: called in start order */
    l->count++;
    mux__activate(loop, h);
    return 0;
}

void mux__hook_stop(struct mux__loop *loop, struct mux__hooklist *l, struct mux__link *k)
{
    struct mux__whdr *h = mux__hook_hdr(l, k);
    mux__unqueue(loop, h);
    if (!(h->flags & MUX__W_ACTIVE))
        return;
    mux__link_remove(k);
    l->count--;
    mux__deactivate(loop, h);
}

/* The four hook types differ only in name, type and list; each gets the same four
 * functions, written out so that every public symbol is plain C a reader can find. */

MUX_EXPORT int mux_idle_init(mux_idle_t *w, mux_idle_cb cb)
{
    if (!w || !cb)
        return -EINVAL;
    memset(w, 0, sizeof *w);
    w->h_.type = MUX__T_IDLE;
    w->cb_ = cb;
    return 0;
}

MUX_EXPORT int mux_idle_start(mux_loop_t *pub, mux_idle_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_IDLE)
        return -EINVAL;
    return mux__hook_start(loop, &loop->idles, &w->link_);
}

MUX_EXPORT int mux_idle_stop(mux_loop_t *pub, mux_idle_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_IDLE)
        return -EINVAL;
    mux__hook_stop(loop, &loop->idles, &w->link_);
    return 0;
}

MUX_EXPORT int mux_prepare_init(mux_prepare_t *w, mux_prepare_cb cb)
{
    if (!w || !cb)
        return -EINVAL;
    memset(w, 0, sizeof *w);
    w->h_.type = MUX__T_PREPARE;
    w->cb_ = cb;
    return 0;
}

MUX_EXPORT int mux_prepare_start(mux_loop_t *pub, mux_prepare_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_PREPARE)
        return -EINVAL;
    return mux__hook_start(loop, &loop->prepares, &w->link_);
}

MUX_EXPORT int mux_prepare_stop(mux_loop_t *pub, mux_prepare_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_PREPARE)
        return -EINVAL;
    mux__hook_stop(loop, &loop->prepares, &w->link_);
    return 0;
}

MUX_EXPORT int mux_check_init(mux_check_t *w, mux_check_cb cb)
{
    if (!w || !cb)
        return -EINVAL;
    memset(w, 0, sizeof *w);
    w->h_.type = MUX__T_CHECK;
    w->cb_ = cb;
    return 0;
}

MUX_EXPORT int mux_check_start(mux_loop_t *pub, mux_check_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_CHECK)
        return -EINVAL;
    return mux__hook_start(loop, &loop->checks, &w->link_);
}

MUX_EXPORT int mux_check_stop(mux_loop_t *pub, mux_check_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_CHECK)
        return -EINVAL;
    mux__hook_stop(loop, &loop->checks, &w->link_);
    return 0;
}

MUX_EXPORT int mux_fork_init(mux_fork_t *w, mux_fork_cb cb)
{
    if (!w || !cb)
        return -EINVAL;
    memset(w, 0, sizeof *w);
    w->h_.type = MUX__T_FORK;
    w->cb_ = cb;
    return 0;
}

MUX_EXPORT int mux_fork_start(mux_loop_t *pub, mux_fork_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_FORK)
        return -EINVAL;
    int err = mux__fork_supported(); /* -ENOTSUP where processes do not fork (Windows) */
    if (err != 0)
        return err;
    return mux__hook_start(loop, &loop->forks, &w->link_);
}

MUX_EXPORT int mux_fork_stop(mux_loop_t *pub, mux_fork_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_FORK)
        return -EINVAL;
    mux__hook_stop(loop, &loop->forks, &w->link_);
    return 0;
}

/* Cleanup watchers are kept in their list but not counted: they are no reason to run, and no
 * reason for mux_loop_close to refuse, whose end they are part of. */
MUX_EXPORT int mux_cleanup_init(mux_cleanup_t *w, mux_cleanup_cb cb)
{
    if (!w || !cb)
        return -EINVAL;
    memset(w, 0, sizeof *w);
    w->h_.type = MUX__T_CLEANUP;
    w->cb_ = cb;
    return 0;
}

MUX_EXPORT int mux_cleanup_start(mux_loop_t *pub, mux_cleanup_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_CLEANUP)
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE)
        return -EBUSY;
    mux__link_insert(&loop->cleanups.anchor, &w->link_);
    loop->cleanups.count++;
    w->h_.flags |= MUX__W_ACTIVE;
    return 0;
}

MUX_EXPORT int mux_cleanup_stop(mux_loop_t *pub, mux_cleanup_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_CLEANUP)
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE) {
        mux__link_remove(&w->link_);
        loop->cleanups.count--;
        w->h_.flags &= (uint8_t)~MUX__W_ACTIVE;
    }
    return 0;
}

void mux__cleanups_run(struct mux__loop *loop)
{
    struct mux__link *anchor = &loop->cleanups.anchor;
    while (anchor->prev != anchor) { /* the last started first; started in a call: run too */
        mux_cleanup_t *w = mux__container_of(anchor->prev, mux_cleanup_t, link_);
        mux_cleanup_stop(loop->pub, w);
        w->cb_(loop->pub, w);
    }
}
