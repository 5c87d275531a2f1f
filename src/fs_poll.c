/* SPDX-License-Identifier: MIT */
/* fs_poll watchers: a path's status looked at on a timer (libev's ev_stat, libuv's
 * uv_fs_poll), where the kernel sends no notifications and for network file systems, where
 * it sends none of other machines' changes. The timer is a part of the watcher, which counts
 * as one; the look is a stat(2) through the platform seam, on the loop's thread. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "platform/platform.h"

static int mux__fs_stat_same(const mux_fs_stat_t *a, const mux_fs_stat_t *b)
{
    return a->size == b->size && a->ino == b->ino && a->dev == b->dev &&
           a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns && a->mode == b->mode &&
           a->nlink == b->nlink && a->uid == b->uid && a->gid == b->gid;
}

/* h_.aux: the look at start found the path missing or not to be looked at, and the first
 * tick, at once, says so (a callback never runs inside mux_fs_poll_start). */
#define MUX__FSP_SAY_FIRST 1

/* Looks again: 1 when the status changed (w->last_ and w->status_ are the new one, *prev the
 * one before). */
static int mux__fs_poll_look(mux_fs_poll_t *w, mux_fs_stat_t *prev)
{
    mux_fs_stat_t now = {0};
    int status = mux__path_stat(w->path_, &now);
    if (status != 0)
        memset(&now, 0, sizeof now);
    int changed = status != w->status_ || (status == 0 && !mux__fs_stat_same(&now, &w->last_));
    *prev = w->last_;
    w->last_ = now;
    w->status_ = status;
    return changed;
}

static void mux__fs_poll_tick(mux_loop_t *pub, mux_timer_t *t)
{
    mux_fs_poll_t *w = mux__container_of(t, mux_fs_poll_t, timer_);
    mux_fs_stat_t prev;
    if (w->h_.aux == MUX__FSP_SAY_FIRST) {
        static const mux_fs_stat_t none;
        w->h_.aux = 0;
        w->cb_(pub, w, w->status_, &none, &w->last_);
        return;
    }
    if (mux__fs_poll_look(w, &prev))
        w->cb_(pub, w, w->status_, &prev, &w->last_);
}

MUX_EXPORT int mux_fs_poll_init(mux_fs_poll_t *w, mux_fs_poll_cb cb, const char *path,
                                uint64_t interval_ns)
{
    if (!w || !cb || !path || !*path || interval_ns == 0 || interval_ns > INT64_MAX)
        return -EINVAL;
    size_t n = strlen(path) + 1;
    char *copy = malloc(n);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, path, n);
    memset(w, 0, sizeof *w);
    w->h_.type = MUX__T_FS_POLL;
    w->cb_ = cb;
    w->path_ = copy;
    w->interval_ = interval_ns;
    mux_timer_init(&w->timer_, mux__fs_poll_tick);
    w->timer_.h_.flags |= MUX__W_NOREF; /* a part of the watcher, which counts itself */
    return 0;
}

MUX_EXPORT int mux_fs_poll_start(mux_loop_t *pub, mux_fs_poll_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_FS_POLL || !w->path_)
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE)
        return -EBUSY;
    mux_fs_stat_t prev;
    w->status_ = 0;
    memset(&w->last_, 0, sizeof w->last_);
    mux__fs_poll_look(w, &prev); /* what the ticks compare with */
    w->h_.aux = w->status_ != 0 ? MUX__FSP_SAY_FIRST : 0;
    int err = mux__hook_start(loop, &loop->fs_polls, &w->link_);
    if (err == 0 && (err = mux_timer_start(pub, &w->timer_, w->h_.aux ? 0 : w->interval_,
                                           w->interval_)) != 0)
        mux__hook_stop(loop, &loop->fs_polls, &w->link_);
    return err;
}

MUX_EXPORT int mux_fs_poll_stop(mux_loop_t *pub, mux_fs_poll_t *w)
{
    struct mux__loop *loop = mux__loop_of(pub);
    if (!loop || !w || w->h_.type != MUX__T_FS_POLL)
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE) {
        mux_timer_stop(pub, &w->timer_);
        mux__hook_stop(loop, &loop->fs_polls, &w->link_);
    }
    return 0;
}

MUX_EXPORT int mux_fs_poll_free(mux_fs_poll_t *w)
{
    if (!w || w->h_.type != MUX__T_FS_POLL)
        return -EINVAL;
    if (w->h_.flags & MUX__W_ACTIVE)
        return -EBUSY;
    free(w->path_);
    w->path_ = NULL;
    return 0;
}
